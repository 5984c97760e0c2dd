package token

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/servicegate/servicegate/internal/trailers"
	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/spans"
)

// MessageNoToken answers a request that carries no access token.
const MessageNoToken = "Sign in to use this app: the request carries no access token."

// messageNoKeys answers a request whose token cannot be checked for want
// of signing keys.
const messageNoKeys = "Sign-in cannot be checked right now: the signing keys are unavailable. Try again in a moment."

// Challenge is the RFC 6750 WWW-Authenticate challenge of realm ("service"
// when empty); realm must pass ValidRealm.
func Challenge(realm string) string {
	if realm == "" {
		realm = "service"
	}
	return `Bearer realm="` + realm + `"`
}

// ValidRealm reports whether realm can sit inside an HTTP quoted-string
// without escapes.
func ValidRealm(realm string) bool {
	for i := 0; i < len(realm); i++ {
		c := realm[i]
		if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// DefaultOrganizationClaims are the claim paths of the organization key:
// the domain claim, else the organization id in the context claim.
var DefaultOrganizationClaims = []string{"domain", "context.organization_id"}

// Outcome is what a Handler made of one request, told to
// HandlerConfig.Report.
type Outcome int

// The outcomes of a Handler.
const (
	// Remembered: a token verified before, served from the cache.
	Remembered Outcome = iota
	// Verified: a token verified now.
	Verified
	// NoToken: refused 401, the request carries no token.
	NoToken
	// InvalidToken: refused 401, the token did not verify.
	InvalidToken
	// BadRequest: refused 400, two Authorization headers or a repeated
	// query parameter.
	BadRequest
	// KeysUnavailable: refused 503, no signing keys could be had.
	KeysUnavailable
)

// Refusal says why a Handler refused a request, with Report.
type Refusal struct {
	// Reason is why, in a few words: one of this package's Err* texts or
	// the request's problem; never the token.
	Reason string
	// FromQuery tells whether the token refused came from the query.
	FromQuery bool
}

// Entry is what a verified token gives every request that carries it,
// built once per token and shared by all of them: it must not be changed.
type Entry struct {
	// Token is the raw bearer token, as received.
	Token string
	// Claims are the token's verified claims.
	Claims Claims
	// Organization is the organization key: the first of
	// HandlerConfig.OrganizationClaims holding a non-empty string or a
	// number; "" when none does.
	Organization string
	// Data is what HandlerConfig.Prepare made of the token.
	Data any

	headers []claimValue // value of each claim header
}

// claimValue is the value of a claim header, when the token has one.
type claimValue struct {
	value   string
	present bool
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Verifier checks the tokens. Required.
	Verifier *Verifier
	// Cache, when set, remembers verified tokens until they expire, each
	// under the key generation that verified it.
	Cache *Cache[*Entry]

	// FromQuery names a query parameter that may carry the token when
	// the request has no Authorization: Bearer header.
	FromQuery string
	// StripQuery removes every FromQuery parameter from a request passed
	// on, whether or not it carried the token used.
	StripQuery bool
	// ClaimHeaders maps a header to the claim path whose value it carries
	// to the next handler. Every inbound copy of these headers is deleted
	// from every request (names compared ignoring case, "_" equal to
	// "-"), and so is every request trailer; names must be valid header
	// names.
	ClaimHeaders map[string]string
	// OrganizationClaims are the claim paths tried, in order, for the
	// organization key. Default DefaultOrganizationClaims.
	OrganizationClaims []string

	// Challenge is the WWW-Authenticate value of refusals, to which the
	// RFC 6750 error is added. Default Challenge("").
	Challenge string
	// Refuse answers a refused request with status and a message for a
	// person, and returns what Serve returns. WWW-Authenticate is
	// already set on w. Default: respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error
	// Prepare, when set, makes Entry.Data once per verified token.
	Prepare func(*Entry) any
	// Pass, when set, is called with the token's entry before r goes on,
	// after the claim headers are set.
	Pass func(r *http.Request, e *Entry)
	// Report, when set, is told the outcome of each request, with why it
	// was refused (zero for those passed on).
	Report func(r *http.Request, o Outcome, why Refusal)
}

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// Handler passes on requests that carry a valid bearer token, with the
// token's claims in the configured headers, and refuses the others with
// an RFC 6750 challenge: 401 without a token or with one that does not
// verify, 400 for a malformed request, 503 when no signing keys can be
// had. Its methods are safe for concurrent use.
type Handler struct {
	c        HandlerConfig
	headers  []string // canonical names of ClaimHeaders, sorted
	paths    []string // claim path of each of headers
	orgPaths []string
	values   valueChunks // the backing arrays of requests' claim header values
}

// NewHandler returns the Handler of c.
func NewHandler(c HandlerConfig) (*Handler, error) {
	if c.Verifier == nil {
		return nil, errors.New("a verifier is required")
	}
	if c.Challenge == "" {
		c.Challenge = Challenge("")
	}
	if c.Refuse == nil {
		c.Refuse = respond.Refuse
	}
	if c.Report == nil {
		c.Report = func(*http.Request, Outcome, Refusal) {}
	}
	h := &Handler{c: c, orgPaths: c.OrganizationClaims}
	if len(h.orgPaths) == 0 {
		h.orgPaths = DefaultOrganizationClaims
	}
	for name := range c.ClaimHeaders {
		h.headers = append(h.headers, http.CanonicalHeaderKey(name))
	}
	slices.Sort(h.headers)
	h.headers = slices.Compact(h.headers)
	for _, name := range h.headers {
		for n, path := range c.ClaimHeaders {
			if http.CanonicalHeaderKey(n) == name {
				h.paths = append(h.paths, path)
				break
			}
		}
	}
	return h, nil
}

// Serve verifies r's bearer token and passes r to next with its trusted
// claims, or refuses it.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	h.dropClaimHeaders(r.Header)
	if len(h.headers) > 0 {
		// The app trusts the claim headers: no request trailer, which
		// some stacks merge into the headers, goes with them.
		trailers.Drop(r, nil)
	}
	raw, sent, fromQuery, problem := h.extract(r)
	if problem != "" {
		h.c.Report(r, BadRequest, Refusal{Reason: problem})
		w.Header().Set("WWW-Authenticate", h.c.Challenge+`, error="invalid_request", error_description="`+problem+`"`)
		return h.c.Refuse(w, r, http.StatusBadRequest, "The request is malformed: "+problem+".")
	}
	if !sent {
		h.c.Report(r, NoToken, Refusal{Reason: "no bearer token"})
		w.Header().Set("WWW-Authenticate", h.c.Challenge)
		return h.c.Refuse(w, r, http.StatusUnauthorized, MessageNoToken)
	}
	e, err := h.entry(r, raw)
	if err != nil {
		return h.refuseToken(w, r, err, fromQuery)
	}
	if n := len(h.headers); n > 0 {
		// Values of this request's own: later handlers may change them
		// in place, so they are never shared.
		vals := h.values.take(n)
		for i, name := range h.headers {
			if e.headers[i].present {
				vals[i] = e.headers[i].value
				r.Header[name] = vals[i : i+1 : i+1]
			}
		}
	}
	if h.c.Pass != nil {
		h.c.Pass(r, e)
	}
	if h.c.StripQuery {
		// Whether or not it carried the token used: a parameter the app
		// reads as a token must not reach it unverified.
		stripQueryParam(r, h.c.FromQuery)
	}
	return next.ServeHTTP(w, r)
}

// entry is the entry of raw: the one remembered, or a new one once raw
// verifies.
func (h *Handler) entry(r *http.Request, raw string) (*Entry, error) {
	// The generation of the keys is read before the check: a token is
	// remembered only under the keys that verified it (Cache).
	gen := h.c.Verifier.Generation()
	ctx, span := spans.Start(r.Context(), "servicegate.token.check")
	defer span.End()
	if h.c.Cache != nil && len(raw) <= MaxLength {
		if e, ok := h.c.Cache.Get(raw, gen); ok {
			span.Bool("servicegate.token.remembered", true)
			h.c.Report(r, Remembered, Refusal{})
			return e, nil
		}
	}
	span.Bool("servicegate.token.remembered", false)
	claims, err := h.c.Verifier.Verify(ctx, raw)
	if err != nil {
		span.Fail(err.Error()) // one of this package's reasons: short, never the token
		return nil, err
	}
	h.c.Report(r, Verified, Refusal{})
	e := h.newEntry(raw, claims)
	if h.c.Cache != nil {
		h.c.Cache.Put(raw, e, claims.Expiry(), gen)
	}
	return e, nil
}

// refuseToken answers a token that did not verify.
func (h *Handler) refuseToken(w http.ResponseWriter, r *http.Request, err error, fromQuery bool) error {
	reason := err.Error() // one of this package's reasons: short, never the token
	if errors.Is(err, ErrKeysUnavailable) {
		h.c.Report(r, KeysUnavailable, Refusal{Reason: reason, FromQuery: fromQuery})
		return h.c.Refuse(w, r, http.StatusServiceUnavailable, messageNoKeys)
	}
	h.c.Report(r, InvalidToken, Refusal{Reason: reason, FromQuery: fromQuery})
	w.Header().Set("WWW-Authenticate", h.c.Challenge+`, error="invalid_token", error_description="`+reason+`"`)
	return h.c.Refuse(w, r, http.StatusUnauthorized, "Your access token was refused ("+reason+"). Sign in again.")
}

// newEntry renders what requests with this token need.
func (h *Handler) newEntry(raw string, claims Claims) *Entry {
	e := &Entry{
		Token:        raw,
		Claims:       claims,
		Organization: claims.Organization(h.orgPaths),
		headers:      make([]claimValue, len(h.headers)),
	}
	for i, path := range h.paths {
		if v, ok := claims.Lookup(path); ok && v != nil {
			// A value no HTTP/1 message can carry is left out, rather than
			// failing the request at the proxy.
			if s := Render(v); httpguts.ValidHeaderFieldValue(s) {
				e.headers[i] = claimValue{s, true}
			}
		}
	}
	if h.c.Prepare != nil {
		e.Data = h.c.Prepare(e)
	}
	return e
}

// Organization returns the first non-empty string or number at paths.
func (c Claims) Organization(paths []string) string {
	for _, p := range paths {
		v, _ := c.Lookup(p)
		switch v.(type) {
		case string, json.Number, float64:
			if s := Render(v); s != "" {
				return s
			}
		}
	}
	return ""
}

// extract finds the token: the Authorization header with the Bearer scheme,
// else the FromQuery parameter. sent tells whether a token was presented
// (it may be empty), fromQuery where it came from; a problem is a malformed
// request (answered 400).
func (h *Handler) extract(r *http.Request) (raw string, sent, fromQuery bool, problem string) {
	if vals := r.Header["Authorization"]; len(vals) > 0 {
		if len(vals) > 1 {
			return "", false, false, "more than one Authorization header"
		}
		if tok, ok := FromAuthorization(vals[0]); ok {
			return tok, true, false, ""
		}
	}
	if h.c.FromQuery == "" || !strings.Contains(r.URL.RawQuery, h.c.FromQuery) {
		return "", false, false, ""
	}
	// Pairs that parse are kept: a stray % elsewhere in the query is no
	// reason to refuse the token.
	q, _ := url.ParseQuery(r.URL.RawQuery)
	vals, ok := q[h.c.FromQuery]
	switch {
	case !ok:
		return "", false, false, ""
	case len(vals) > 1:
		return "", false, true, "the token query parameter appears more than once"
	}
	return vals[0], true, true, ""
}

// dropClaimHeaders deletes every inbound copy of the claim headers, also
// those spelled with "_" for "-", which some upstream stacks (CGI, PHP,
// WSGI) read as the same header.
func (h *Handler) dropClaimHeaders(hdr http.Header) {
	if len(h.headers) == 0 {
		return
	}
	for name := range hdr {
		for _, want := range h.headers {
			if SameHeaderName(name, want) {
				delete(hdr, name)
				break
			}
		}
	}
}

// SameHeaderName compares header names ignoring case, with "_" equal to
// "-": the names an upstream stack (CGI, PHP, WSGI) may read as one header.
func SameHeaderName(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == '_' {
			x = '-'
		}
		if y == '_' {
			y = '-'
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// stripQueryParam removes param from r's query, however its name is
// escaped, keeping the other pairs as they were written. A query without
// it is left untouched.
func stripQueryParam(r *http.Request, param string) {
	q := r.URL.RawQuery
	if param == "" || (!strings.Contains(q, param) && !strings.Contains(q, "%")) {
		return // not there in any spelling
	}
	pairs := strings.Split(q, "&")
	kept := pairs[:0]
	for _, p := range pairs {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == param {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(pairs) {
		return
	}
	r.URL.RawQuery = strings.Join(kept, "&")
	r.URL.ForceQuery = false
	r.RequestURI = r.URL.RequestURI()
}
