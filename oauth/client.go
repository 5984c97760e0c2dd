package oauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/servicegate/servicegate/spans"
)

// maxTokenResponse caps the token endpoint's answer; a token response is a
// few kilobytes at most.
const maxTokenResponse = 64 << 10

// Client talks to the service's authorization server: it builds the
// authorization request and calls the token endpoint. Its fields must not
// change once it is in use.
type Client struct {
	// AuthURL is the authorization server's address ({auth_url}); the
	// endpoints are AuthURL + "/oauth/authorize" and AuthURL + "/oauth/token".
	AuthURL string
	// ClientID and ClientSecret are the app's OAuth credentials.
	ClientID     string
	ClientSecret string
	// Scopes are the scopes asked for, sent separated by spaces.
	Scopes []string
	// HTTP makes the token requests. Default http.DefaultClient.
	HTTP *http.Client
}

// Token is the token pair of a token response, with the moment the access
// token expires.
type Token struct {
	// AccessToken is the bearer token for the service's API.
	AccessToken string `json:"access_token"`
	// RefreshToken obtains the next token pair.
	RefreshToken string `json:"refresh_token"`
	// Expiry is when the access token stops being valid.
	Expiry time.Time `json:"expiry"`
}

// RefusedError is a token request the authorization server answered with
// an OAuth error (a 4xx status): the code or refresh token is not good, and
// asking again will not help.
type RefusedError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the OAuth error code (invalid_grant, invalid_client, …),
	// when the answer named one.
	Code string
}

func (e *RefusedError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("the authorization server refused the token request (status %d)", e.Status)
	}
	return fmt.Sprintf("the authorization server refused the token request: %s (status %d)", e.Code, e.Status)
}

// AnsweredError is a token request the authorization server answered, but
// with neither a token nor a refusal: a status other than 200 and 4xx, or
// a 200 whose body is no usable token response. Unlike a connection that
// failed, the server was reached; asking again later may help.
type AnsweredError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Err says what was wrong with the answer.
	Err error
}

func (e *AnsweredError) Error() string { return e.Err.Error() }

// Unwrap returns what was wrong with the answer.
func (e *AnsweredError) Unwrap() error { return e.Err }

// AnsweredStatus is the status the server answered with.
func (e *AnsweredError) AnsweredStatus() int { return e.Status }

// AuthorizeURL is the address the user is sent to: the authorization
// request for redirectURI with state.
func (c *Client) AuthorizeURL(redirectURI, state string) string {
	q := url.Values{
		"client_id":     {c.ClientID},
		"redirect_uri":  {redirectURI},
		"response_type": {"code"},
		"scope":         {strings.Join(c.Scopes, " ")},
		"state":         {state},
	}
	return strings.TrimSuffix(c.AuthURL, "/") + "/oauth/authorize?" + q.Encode()
}

// Exchange trades an authorization code for a token pair.
func (c *Client) Exchange(ctx context.Context, code, redirectURI string, now time.Time) (Token, error) {
	return c.tokenRequest(ctx, map[string]string{
		"grant_type":    "authorization_code",
		"client_id":     c.ClientID,
		"client_secret": c.ClientSecret,
		"redirect_uri":  redirectURI,
		"code":          code,
	}, now)
}

// Refresh trades a refresh token for a new token pair.
func (c *Client) Refresh(ctx context.Context, refreshToken string, now time.Time) (Token, error) {
	return c.tokenRequest(ctx, map[string]string{
		"grant_type":    "refresh_token",
		"client_id":     c.ClientID,
		"client_secret": c.ClientSecret,
		"refresh_token": refreshToken,
	}, now)
}

// tokenResponse is the service's token response.
type tokenResponse struct {
	AccessToken  string      `json:"access_token"`
	TokenType    string      `json:"token_type"`
	ExpiresIn    json.Number `json:"expires_in"`
	RefreshToken string      `json:"refresh_token"`
	Error        string      `json:"error"`
}

func (c *Client) tokenRequest(ctx context.Context, fields map[string]string, now time.Time) (tok Token, err error) {
	ctx, span := spans.Start(ctx, "servicegate.oauth.token")
	defer func() {
		if err != nil {
			span.Fail(err.Error()) // names the endpoint or a status, never the body
		}
		span.End()
	}()
	span.String("servicegate.oauth.grant_type", fields["grant_type"])
	body, err := json.Marshal(fields)
	if err != nil {
		return Token{}, fmt.Errorf("token request: %w", err)
	}
	endpoint := strings.TrimSuffix(c.AuthURL, "/") + "/oauth/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return Token{}, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	spans.Inject(ctx, req.Header)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The error names the endpoint, never the body with its secrets.
		return Token{}, fmt.Errorf("token request to %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	span.Int("http.response.status_code", int64(resp.StatusCode))
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return Token{}, fmt.Errorf("token response from %s: %w", endpoint, err)
	}
	if len(raw) > maxTokenResponse {
		return Token{}, fmt.Errorf("token response from %s is larger than 64 KiB", endpoint)
	}
	tok, err = parseTokenResponse(resp.StatusCode, raw, now)
	var refused *RefusedError
	if err != nil && !errors.As(err, &refused) {
		err = &AnsweredError{Status: resp.StatusCode, Err: err}
	}
	return tok, err
}

// parseTokenResponse reads the answer of the token endpoint. A 4xx answer
// is a RefusedError; anything else that is not a complete 200 token
// response is an error to retry later.
func parseTokenResponse(status int, raw []byte, now time.Time) (Token, error) {
	var tr tokenResponse
	jsonErr := json.Unmarshal(raw, &tr)
	if status >= 400 && status < 500 {
		refused := &RefusedError{Status: status}
		if jsonErr == nil && isOAuthErrorCode(tr.Error) {
			refused.Code = tr.Error
		}
		return Token{}, refused
	}
	if status != http.StatusOK {
		return Token{}, fmt.Errorf("the token endpoint answered status %d", status)
	}
	if jsonErr != nil {
		return Token{}, errors.New("the token response is not a JSON object")
	}
	if tr.AccessToken == "" || tr.RefreshToken == "" {
		return Token{}, errors.New("the token response lacks access_token or refresh_token")
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return Token{}, fmt.Errorf("the token response has token_type %q, not bearer", truncate(tr.TokenType))
	}
	expiry, err := tokenExpiry(tr, now)
	if err != nil {
		return Token{}, err
	}
	return Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken, Expiry: expiry}, nil
}

// tokenExpiry is now + expires_in, or the exp claim of the access token
// when the answer has no expires_in.
func tokenExpiry(tr tokenResponse, now time.Time) (time.Time, error) {
	if tr.ExpiresIn != "" {
		secs, err := strconv.ParseInt(tr.ExpiresIn.String(), 10, 64)
		if err != nil || secs <= 0 || secs > 10*365*24*3600 {
			return time.Time{}, errors.New("the token response has an expires_in that is not a positive number of seconds")
		}
		return now.Add(time.Duration(secs) * time.Second), nil
	}
	claims, ok := decodeClaims(tr.AccessToken)
	if !ok {
		return time.Time{}, errors.New("the token response has no expires_in and the access token no exp claim")
	}
	exp, ok := claims["exp"].(float64)
	if !ok || exp <= 0 {
		return time.Time{}, errors.New("the token response has no expires_in and the access token no exp claim")
	}
	return time.Unix(int64(exp), 0), nil
}

// isOAuthErrorCode reports whether s looks like an RFC 6749 error code, so
// that nothing else from the answer reaches a log line.
func isOAuthErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// decodeClaims reads the claims of a JWT-shaped token without verifying
// its signature. The gateway uses them only to name the session's user and
// organization for the app; the token came to it straight from the token
// endpoint.
func decodeClaims(token string) (map[string]any, bool) {
	_, rest, ok := strings.Cut(token, ".")
	if !ok {
		return nil, false
	}
	payload, _, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(payload, "="))
	if err != nil {
		return nil, false
	}
	var claims map[string]any
	if json.Unmarshal(raw, &claims) != nil {
		return nil, false
	}
	return claims, true
}
