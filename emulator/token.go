package emulator

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// maxTokenBody caps the token request's JSON body.
const maxTokenBody = 64 << 10

// codeGrant is an issued authorization code.
type codeGrant struct {
	redirectURI string
	user        int64
	org         Organization
	expires     time.Time
	used        bool
	// family names the refresh tokens descended from this code, so that
	// a second exchange of the code can revoke them (RFC 6749 §4.1.2).
	family string
}

// refreshGrant is an issued refresh token.
type refreshGrant struct {
	user   int64
	org    Organization
	family string
}

// tokenRequest is the JSON body of POST /oauth/token.
type tokenRequest struct {
	GrantType    string `json:"grant_type"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RedirectURI  string `json:"redirect_uri"`
	Code         string `json:"code"`
	RefreshToken string `json:"refresh_token"`
}

// tokenResponse is the service's token response.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
}

// oauthError is an RFC 6749 §5.2 error answer.
type oauthError struct {
	status      int
	code        string
	description string
}

func (e *oauthError) Error() string { return e.code + ": " + e.description }

func invalidRequest(description string) *oauthError {
	return &oauthError{http.StatusBadRequest, "invalid_request", description}
}

func invalidGrant(description string) *oauthError {
	return &oauthError{http.StatusBadRequest, "invalid_grant", description}
}

var errInvalidClient = &oauthError{http.StatusUnauthorized, "invalid_client", "unknown client or wrong client secret"}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeOAuthError(w, &oauthError{http.StatusMethodNotAllowed, "invalid_request", "the token endpoint takes POST"})
		return
	}
	req, oerr := readTokenRequest(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	resp, oerr := s.grant(req)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// readTokenRequest reads and decodes the JSON body, capped at maxTokenBody.
func readTokenRequest(w http.ResponseWriter, r *http.Request) (tokenRequest, *oauthError) {
	var req tokenRequest
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return req, invalidRequest("the request body must be JSON with the content type application/json")
	}
	if r.ContentLength > maxTokenBody {
		return req, &oauthError{http.StatusRequestEntityTooLarge, "invalid_request", "the request body is larger than 64 KiB"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return req, &oauthError{http.StatusRequestEntityTooLarge, "invalid_request", "the request body is larger than 64 KiB"}
		}
		return req, invalidRequest("the request body could not be read")
	}
	return req, decodeTokenRequest(body, &req)
}

// decodeTokenRequest decodes one JSON object of string fields, and nothing
// after it.
func decodeTokenRequest(body []byte, req *tokenRequest) *oauthError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(req); err != nil {
		return invalidRequest("the request body is not a JSON object of string fields")
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidRequest("the request body holds more than one JSON value")
	}
	return nil
}

// grant runs one token request.
func (s *Server) grant(req tokenRequest) (tokenResponse, *oauthError) {
	if req.GrantType == "" {
		return tokenResponse{}, invalidRequest("grant_type is missing")
	}
	if req.GrantType != "authorization_code" && req.GrantType != "refresh_token" {
		return tokenResponse{}, &oauthError{http.StatusBadRequest, "unsupported_grant_type",
			"grant_type must be authorization_code or refresh_token"}
	}
	if req.ClientID == "" || req.ClientSecret == "" {
		return tokenResponse{}, invalidRequest("client_id and client_secret are required")
	}
	if !s.clientMatches(req.ClientID, req.ClientSecret) {
		return tokenResponse{}, errInvalidClient
	}
	if req.GrantType == "authorization_code" {
		return s.exchangeCode(req)
	}
	return s.refreshTokens(req)
}

// clientMatches compares the credentials in constant time. Hashing first
// keeps the comparison independent of the lengths.
func (s *Server) clientMatches(id, secret string) bool {
	wantID, gotID := sha256.Sum256([]byte(s.cfg.ClientID)), sha256.Sum256([]byte(id))
	wantSecret, gotSecret := sha256.Sum256([]byte(s.cfg.ClientSecret)), sha256.Sum256([]byte(secret))
	idOK := subtle.ConstantTimeCompare(wantID[:], gotID[:])
	secretOK := subtle.ConstantTimeCompare(wantSecret[:], gotSecret[:])
	return idOK&secretOK == 1
}

func (s *Server) exchangeCode(req tokenRequest) (tokenResponse, *oauthError) {
	if req.Code == "" || req.RedirectURI == "" {
		return tokenResponse{}, invalidRequest("code and redirect_uri are required")
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.codes[req.Code]
	switch {
	case g == nil || !now.Before(g.expires):
		return tokenResponse{}, invalidGrant("the code is unknown or has expired")
	case g.used:
		s.revokeFamily(g.family)
		return tokenResponse{}, invalidGrant("the code has already been used")
	case g.redirectURI != req.RedirectURI:
		return tokenResponse{}, invalidGrant("redirect_uri differs from the one the code was issued for")
	}
	g.used = true
	return s.issue(g.user, g.org, g.family, now)
}

func (s *Server) refreshTokens(req tokenRequest) (tokenResponse, *oauthError) {
	if req.RefreshToken == "" {
		return tokenResponse{}, invalidRequest("refresh_token is required")
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.refresh[req.RefreshToken]
	if g == nil {
		return tokenResponse{}, invalidGrant("the refresh token is unknown, revoked or already used")
	}
	delete(s.refresh, req.RefreshToken)
	return s.issue(g.user, g.org, g.family, now)
}

// revokeFamily drops every refresh token descended from one code. Access
// tokens already issued stay valid until they expire: they are verified
// offline, by service_auth as by the emulator.
func (s *Server) revokeFamily(family string) {
	for token, g := range s.refresh {
		if g.family == family {
			delete(s.refresh, token)
		}
	}
}

// issue mints an access token and a new refresh token. s.mu is held.
func (s *Server) issue(user int64, org Organization, family string, now time.Time) (tokenResponse, *oauthError) {
	access, err := MintToken(s.cfg.ClientSecret, Token{
		Issuer:         s.cfg.Issuer,
		Audience:       s.cfg.ClientID,
		UserID:         user,
		OrganizationID: org.ID,
		Domain:         org.Domain,
		IssuedAt:       now,
		Lifetime:       s.cfg.TokenLifetime,
	})
	if err != nil {
		return tokenResponse{}, &oauthError{http.StatusInternalServerError, "server_error", "the access token could not be made"}
	}
	refresh := rand.Text()
	s.refresh[refresh] = &refreshGrant{user: user, org: org, family: family}
	return tokenResponse{
		AccessToken:  access,
		TokenType:    "bearer",
		ExpiresIn:    int64(s.cfg.TokenLifetime / time.Second),
		RefreshToken: refresh,
	}, nil
}

// maxPendingCodes bounds the codes issued and not yet expired: anyone who
// reaches the authorization endpoint can ask for codes.
const maxPendingCodes = 10000

// newCode issues an authorization code, and forgets expired ones. It
// reports false, issuing nothing, while maxPendingCodes codes are pending.
func (s *Server) newCode(redirectURI string, user int64, org Organization) (string, bool) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.codes) >= maxPendingCodes {
		for c, g := range s.codes {
			if !now.Before(g.expires) {
				delete(s.codes, c)
			}
		}
		if len(s.codes) >= maxPendingCodes {
			return "", false
		}
	}
	code := rand.Text()
	s.codes[code] = &codeGrant{
		redirectURI: redirectURI,
		user:        user,
		org:         org,
		expires:     now.Add(s.cfg.CodeLifetime),
		family:      rand.Text(),
	}
	return code, true
}

func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.description})
}

// writeJSON writes a complete JSON answer that no cache keeps.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"message":"the answer could not be encoded"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
