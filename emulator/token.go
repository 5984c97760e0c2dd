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
	"net/url"
	"strconv"
	"time"

	"github.com/servicegate/servicegate/respond"
)

// maxTokenBody caps the token request's body.
const maxTokenBody = 64 << 10

// basicChallenge is the WWW-Authenticate header of a 401 answer to a client
// that authenticated with HTTP Basic (RFC 6749 §5.2).
const basicChallenge = `Basic realm="service-emulator", charset="UTF-8"`

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

// tokenRequest is a request of POST /oauth/token, from its JSON or form
// body and its client authentication.
type tokenRequest struct {
	GrantType    string `json:"grant_type"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RedirectURI  string `json:"redirect_uri"`
	Code         string `json:"code"`
	RefreshToken string `json:"refresh_token"`
	// The service_app grant's installation (see appGrant).
	AppID     string `json:"app_id"`
	AppSecret string `json:"app_secret"`
	Domain    string `json:"domain"`
	UserID    string `json:"user_id"`

	// basic: the client authenticated with HTTP Basic, so a failed
	// authentication is answered with a Basic challenge.
	basic bool
}

// tokenResponse is the service's token response.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`

	// org is the organization the token is for, for the console.
	org string
}

// oauthError is an RFC 6749 §5.2 error answer.
type oauthError struct {
	status      int
	code        string
	description string
	challenge   string // WWW-Authenticate of the answer, if any
}

func (e *oauthError) Error() string { return e.code + ": " + e.description }

func invalidRequest(description string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, code: "invalid_request", description: description}
}

func invalidGrant(description string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, code: "invalid_grant", description: description}
}

var (
	errInvalidClient = &oauthError{status: http.StatusUnauthorized, code: "invalid_client",
		description: "unknown client or wrong client secret"}
	errInvalidBasicClient = &oauthError{status: http.StatusUnauthorized, code: "invalid_client",
		description: "unknown client or wrong client secret", challenge: basicChallenge}
	errTooLarge = &oauthError{status: http.StatusRequestEntityTooLarge, code: "invalid_request",
		description: "the request body is larger than 64 KiB"}
)

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeOAuthError(w, &oauthError{status: http.StatusMethodNotAllowed, code: "invalid_request",
			description: "the token endpoint takes POST"})
		return
	}
	if fault(w, r, s.Faults().Token, func(status int) {
		writeOAuthError(w, &oauthError{status: status, code: "server_error",
			description: "the token endpoint answers " + strconv.Itoa(status) + " (a fault set in the emulator's console)"})
	}) {
		return
	}
	req, oerr := readTokenRequest(w, r)
	if oerr != nil {
		noteOrganization(r, req.Domain)
		writeOAuthError(w, oerr)
		return
	}
	resp, oerr := s.grant(req)
	if oerr != nil {
		noteOrganization(r, req.Domain)
		writeOAuthError(w, oerr)
		return
	}
	noteOrganization(r, resp.org)
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, resp)
}

// readTokenRequest reads the body, capped at maxTokenBody: JSON, as the
// service's interface describes, or form-encoded, as OAuth clients send it
// (RFC 6749 §4.1.3, §6); then the client's HTTP Basic authentication, if
// it sent one (§2.3.1).
func readTokenRequest(w http.ResponseWriter, r *http.Request) (tokenRequest, *oauthError) {
	var req tokenRequest
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := mediaType == "application/x-www-form-urlencoded"
	if err != nil || (mediaType != "application/json" && !form) {
		return req, invalidRequest("the request body must be JSON (application/json) or a form (application/x-www-form-urlencoded)")
	}
	if r.ContentLength > maxTokenBody {
		return req, errTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return req, errTooLarge
		}
		return req, invalidRequest("the request body could not be read")
	}
	var oerr *oauthError
	if form {
		oerr = decodeTokenForm(body, &req)
	} else {
		oerr = decodeTokenRequest(body, &req)
	}
	if oerr != nil {
		return req, oerr
	}
	if _, ok := r.Header["Authorization"]; ok {
		return req, basicClient(r.Header, &req)
	}
	return req, nil
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

// decodeTokenForm decodes a form body. A parameter sent twice is refused
// (RFC 6749 §3.2); parameters the endpoint does not know are ignored.
func decodeTokenForm(body []byte, req *tokenRequest) *oauthError {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		return invalidRequest("the request body is not a valid form")
	}
	for name, field := range map[string]*string{
		"grant_type":    &req.GrantType,
		"client_id":     &req.ClientID,
		"client_secret": &req.ClientSecret,
		"redirect_uri":  &req.RedirectURI,
		"code":          &req.Code,
		"refresh_token": &req.RefreshToken,
	} {
		switch v := values[name]; len(v) {
		case 0:
		case 1:
			*field = v[0]
		default:
			return invalidRequest(name + " is sent more than once")
		}
	}
	return nil
}

// basicClient takes the client's credentials from an Authorization header:
// HTTP Basic, with client_id and client_secret form-encoded (RFC 6749
// §2.3.1). A header that is not such is a failed authentication (401 with
// a Basic challenge); credentials in the body as well are two
// authentication methods at once, which RFC 6749 §2.3 forbids. The body
// may name the same client_id.
func basicClient(h http.Header, req *tokenRequest) *oauthError {
	r := http.Request{Header: h}
	user, pass, ok := r.BasicAuth()
	if !ok || len(h["Authorization"]) != 1 {
		return errInvalidBasicClient
	}
	id, err1 := url.QueryUnescape(user)
	secret, err2 := url.QueryUnescape(pass)
	if err1 != nil || err2 != nil || id == "" {
		return errInvalidBasicClient
	}
	if req.ClientSecret != "" {
		return invalidRequest("the client authenticated twice: with HTTP Basic and with client_secret in the body; use one")
	}
	if req.ClientID != "" && req.ClientID != id {
		return invalidRequest("client_id in the body differs from the client of the Authorization header")
	}
	req.ClientID, req.ClientSecret, req.basic = id, secret, true
	return nil
}

// grant runs one token request.
func (s *Server) grant(req tokenRequest) (tokenResponse, *oauthError) {
	if req.GrantType == "" {
		return tokenResponse{}, invalidRequest("grant_type is missing")
	}
	if req.GrantType != "authorization_code" && req.GrantType != "refresh_token" && req.GrantType != appGrantType {
		return tokenResponse{}, &oauthError{status: http.StatusBadRequest, code: "unsupported_grant_type",
			description: "grant_type must be authorization_code, refresh_token or service_app"}
	}
	if req.ClientID == "" || req.ClientSecret == "" {
		return tokenResponse{}, invalidRequest("client_id and client_secret are required")
	}
	if !s.clientMatches(req.ClientID, req.ClientSecret) {
		if req.basic {
			return tokenResponse{}, errInvalidBasicClient
		}
		return tokenResponse{}, errInvalidClient
	}
	if req.GrantType == "authorization_code" {
		return s.exchangeCode(req)
	}
	if req.GrantType == appGrantType {
		return s.appGrant(req)
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
		return tokenResponse{}, invalidGrant("redirect_uri " + respond.Quote(req.RedirectURI) + " differs from " + respond.Quote(g.redirectURI) + ", the one the code was issued for")
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
		return tokenResponse{}, &oauthError{status: http.StatusInternalServerError, code: "server_error",
			description: "the access token could not be made"}
	}
	refresh := rand.Text()
	s.refresh[refresh] = &refreshGrant{user: user, org: org, family: family}
	return tokenResponse{
		AccessToken:  access,
		TokenType:    "bearer",
		ExpiresIn:    int64(s.cfg.TokenLifetime / time.Second),
		RefreshToken: refresh,
		org:          organizationKey(org.Domain, org.ID),
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
	if e.challenge != "" {
		w.Header().Set("WWW-Authenticate", e.challenge)
	}
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.description})
}

// writeJSON writes a complete JSON answer that no cache keeps, typed
// application/json as the service types its answers.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := respond.MarshalJSON(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"message":"the answer could not be encoded"}`)
	}
	respond.JSONAs(w, status, "application/json", body)
}
