package subscription

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/spans"
	"github.com/servicegate/servicegate/token"
)

// OnError says what a Handler does with a request whose subscription the
// service could not answer (unreachable, timeout, 5xx, unexpected status,
// unreadable body).
type OnError string

// The on_error policies.
const (
	// Deny answers 503 with Retry-After (the default).
	Deny OnError = "deny"
	// Allow lets the request through.
	Allow OnError = "allow"
	// Stale lets the request through while the expires date of the last
	// Active answer for its key passed less than HandlerConfig.StaleGrace
	// ago (or has not passed), and answers 503 otherwise.
	Stale OnError = "stale"
)

// Validate checks o ("" is Deny) with its grace period: Stale needs one
// above zero, the others none.
func (o OnError) Validate(grace time.Duration) error {
	switch o {
	case "", Deny, Allow:
		if grace != 0 {
			return errors.New(`stale_grace is only used with on_error "stale"`)
		}
	case Stale:
		if grace <= 0 {
			return errors.New(`on_error "stale" needs a grace period above zero`)
		}
	default:
		return fmt.Errorf(`on_error %q is not one of deny, allow, stale`, string(o))
	}
	return nil
}

// The answers of a Handler, written for the person who made the request.
const (
	messageBadBase = "The subscription of your organization cannot be checked: the service address for it is not valid."
	messageNoCheck = "The subscription of your organization cannot be checked right now. Try again in a moment."
	messageUnpaid  = "Your organization has not subscribed to this app. Subscribe to continue."
	messageEnded   = "The subscription of your organization to this app has ended. Renew it to continue."
	messageBadTok  = "The service did not accept your access token. Sign in again."
	messageNoSub   = "This app has no subscription for your organization. Ask an organization admin to add one."
)

// Event is a step of a subscription check, told to HandlerConfig.Report
// with what came with it.
type Event int

// The events of a Handler.
const (
	// CacheHit: the cache held a trusted answer.
	CacheHit Event = iota
	// CacheMiss: it did not; the answer is resolved.
	CacheMiss
	// Answered: a query got Detail.Answer, after Detail.Took.
	Answered
	// QueryFailed: a query got no usable answer (Detail.Err), after
	// Detail.Took.
	QueryFailed
	// BaseRefused: the base URL could not be built for the request
	// (Detail.Err); no query was sent and the request was refused 403.
	BaseRefused
	// Refused: the answer (Detail.Answer) is not an active subscription;
	// the request was refused.
	Refused
	// StaleTrusted: the service could not answer and the lapsed Active
	// answer was trusted under on_error "stale".
	StaleTrusted
)

// Detail is what comes with an Event. It never holds the token.
type Detail struct {
	// Organization is the organization key, "" when answers are kept
	// per token.
	Organization string
	// Answer is the answer of Answered and Refused.
	Answer Answer
	// Err is the error of QueryFailed and BaseRefused.
	Err error
	// Took is how long the query of Answered and QueryFailed took.
	Took time.Duration
	// Path is the request's path, with Refused.
	Path string
}

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// App is the app's identifier in the service. Required.
	App string
	// BaseURL is the service API base address, valid per ValidateBaseURL.
	// Required unless Base is set.
	BaseURL string
	// Base, when set, builds the base address for a request (e.g. from
	// the organization of its verified token); an error refuses the
	// request with 403 and sends no query. Its result must pass
	// ValidateBaseURL.
	Base func(*http.Request) (string, error)
	// Verified returns the token and organization key that a token check
	// before this handler verified, and ok; without it (nil, or ok
	// false) the token is taken from the Authorization header and
	// answers are kept per token.
	Verified func(*http.Request) (token, organization string, ok bool)

	// Policy says how long answers are trusted and how long a query may
	// take.
	Policy Policy
	// OnError is the policy for requests the service could not answer.
	// Default Deny.
	OnError OnError
	// StaleGrace is how long after its expires date an Active answer is
	// trusted under Stale.
	StaleGrace time.Duration

	// Cache keeps the answers; it may be shared by many handlers.
	// Required.
	Cache *Cache
	// Client sends the queries. Required.
	Client *Client
	// Shared, when set, shares answers and queries with other instances:
	// a local miss asks it before querying.
	Shared Shared
	// Now is the clock expires dates are compared with. Default
	// time.Now. The Cache keeps its own clock.
	Now func() time.Time

	// Challenge is the WWW-Authenticate value of a 401 without a token;
	// a token the service refused gets it with error="invalid_token".
	// Default token.Challenge("").
	Challenge string
	// Refuse answers a refused request with status and a message for a
	// person, and returns what Serve returns. Headers such as
	// WWW-Authenticate and Retry-After are already set on w. Default:
	// respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error
	// PaymentRequired answers 402 with message and the subscribe link
	// (an absolute http(s) URL, or empty). Default: WritePaymentRequired.
	PaymentRequired func(w http.ResponseWriter, r *http.Request, message, link string)
	// Abandoned returns what Serve returns when the client went away
	// while its answer was awaited; nothing is written. Default: err.
	Abandoned func(err error) error
	// Report, when set, is told each event of a check, for metrics and
	// logs.
	Report func(Event, Detail)
}

// Shared shares answers and queries among instances; a
// cluster.Subscriptions is one.
type Shared interface {
	// Resolve returns the answer another instance keeps for k, or the
	// result of query, made once for all instances asking at once.
	Resolve(ctx context.Context, k Key, p Policy, query func(context.Context) (Answer, error)) (Answer, error)
}

// Handler lets a request through when the organization behind its access
// token has an active subscription to the app, and answers it otherwise:
// 401 without a token or with one the service refused, 402 with the
// subscribe link when unpaid, 403 without a subscription, and what OnError
// says when the service cannot answer. Its methods are safe for
// concurrent use.
type Handler struct {
	c        HandlerConfig
	badToken string // WWW-Authenticate value for a refused token
}

// NewHandler returns the Handler of c.
func NewHandler(c HandlerConfig) (*Handler, error) {
	switch {
	case c.App == "":
		return nil, errors.New("the app identifier is required")
	case c.Cache == nil || c.Client == nil:
		return nil, errors.New("a cache and a client are required")
	case c.Base == nil:
		if err := ValidateBaseURL(c.BaseURL); err != nil {
			return nil, err
		}
	}
	if err := c.OnError.Validate(c.StaleGrace); err != nil {
		return nil, err
	}
	if c.OnError == "" {
		c.OnError = Deny
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Challenge == "" {
		c.Challenge = token.Challenge("")
	}
	if c.Refuse == nil {
		c.Refuse = respond.Refuse
	}
	if c.PaymentRequired == nil {
		c.PaymentRequired = WritePaymentRequired
	}
	if c.Abandoned == nil {
		c.Abandoned = func(err error) error { return err }
	}
	if c.Report == nil {
		c.Report = func(Event, Detail) {}
	}
	return &Handler{c: c, badToken: c.Challenge + `, error="invalid_token"`}, nil
}

// Serve checks the subscription of r's organization and passes r to next
// when it is active, or answers r.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	tok, org, ok := "", "", false
	if h.c.Verified != nil {
		tok, org, ok = h.c.Verified(r)
	}
	if !ok {
		tok = BearerToken(r.Header.Get("Authorization"))
	}
	if tok == "" {
		w.Header().Set("WWW-Authenticate", h.c.Challenge)
		return h.c.Refuse(w, r, http.StatusUnauthorized, token.MessageNoToken)
	}
	base := h.c.BaseURL
	if h.c.Base != nil {
		var err error
		if base, err = h.c.Base(r); err != nil {
			h.c.Report(BaseRefused, Detail{Organization: org, Err: err})
			return h.c.Refuse(w, r, http.StatusForbidden, messageBadBase)
		}
	}
	key := Key{BaseURL: base, App: h.c.App, Organization: org}
	if org == "" {
		key.Token = TokenHash(tok)
	}

	ctx, span := spans.Start(r.Context(), "servicegate.subscription.check")
	defer span.End() // ended before next on the way through
	a, hit := h.c.Cache.Lookup(key)
	span.Bool("servicegate.subscription.cache_hit", hit)
	if hit {
		h.c.Report(CacheHit, Detail{})
		span.String("servicegate.subscription.answer", a.Status.String())
		if a.Status == Active {
			// Lookup trusts an active answer only before it expires.
			span.End()
			return next.ServeHTTP(w, r)
		}
		return h.refuseAnswer(w, r, a)
	}
	h.c.Report(CacheMiss, Detail{})
	a, err := h.resolve(ctx, key, tok)
	if err != nil {
		span.Fail("no usable answer from the service")
		span.End()
		return h.serviceFailed(w, r, next, key, err)
	}
	span.String("servicegate.subscription.answer", a.Status.String())
	if a.ActiveAt(h.c.Now()) {
		span.End()
		return next.ServeHTTP(w, r)
	}
	return h.refuseAnswer(w, r, a)
}

// resolve finds the answer for key on a cache miss: the one another
// request or instance is getting, or that of a query with tok.
func (h *Handler) resolve(ctx context.Context, key Key, tok string) (Answer, error) {
	// ours tells whether the query Resolve ran (if any) carried this
	// request's token; the write happens before Resolve returns.
	ours := false
	a, err := h.c.Cache.Resolve(ctx, key, h.c.Policy, func(ctx context.Context) (Answer, error) {
		direct := func(ctx context.Context) (Answer, error) {
			ours = true
			return h.query(ctx, key, tok)
		}
		if h.c.Shared != nil {
			// The answer of another instance, or this query shared
			// with them; the shared store failing, this query alone.
			return h.c.Shared.Resolve(ctx, key, h.c.Policy, direct)
		}
		return direct(ctx)
	})
	if err == nil && a.Status == Unauthorized && !ours {
		// The service refused the token of another member of the
		// organization, whose query this request shared: that says
		// nothing about this request's token, so ask with it.
		qctx, cancel := context.WithCancel(ctx)
		if h.c.Policy.Timeout > 0 {
			qctx, cancel = context.WithTimeout(ctx, h.c.Policy.Timeout)
		}
		a, err = h.query(qctx, key, tok)
		cancel()
	}
	return a, err
}

// query sends one subscription query and reports it. It runs once for all
// the requests waiting on the same key.
func (h *Handler) query(ctx context.Context, key Key, tok string) (Answer, error) {
	start := time.Now()
	a, err := h.c.Client.Query(ctx, key.BaseURL, h.c.App, tok)
	d := Detail{Organization: key.Organization, Answer: a, Err: err, Took: time.Since(start)}
	if err != nil {
		h.c.Report(QueryFailed, d)
	} else {
		h.c.Report(Answered, d)
	}
	return a, err
}

// serviceFailed applies on_error to a request whose subscription the
// service could not answer.
func (h *Handler) serviceFailed(w http.ResponseWriter, r *http.Request, next Next, key Key, err error) error {
	if r.Context().Err() != nil {
		// The client went away while waiting; nobody reads an answer.
		return h.c.Abandoned(err)
	}
	switch h.c.OnError {
	case Allow:
		return next.ServeHTTP(w, r)
	case Stale:
		if _, ok := h.c.Cache.Stale(key, h.c.StaleGrace); ok {
			h.c.Report(StaleTrusted, Detail{Organization: key.Organization})
			return next.ServeHTTP(w, r)
		}
	}
	w.Header().Set("Retry-After", "30")
	return h.c.Refuse(w, r, http.StatusServiceUnavailable, messageNoCheck)
}

// refuseAnswer answers a request whose subscription is not active.
func (h *Handler) refuseAnswer(w http.ResponseWriter, r *http.Request, a Answer) error {
	h.c.Report(Refused, Detail{Answer: a, Path: r.URL.Path})
	switch a.Status {
	case Unpaid:
		h.c.PaymentRequired(w, r, messageUnpaid, a.SubscribeLink)
		return nil
	case Active:
		// An active answer whose expires date has passed.
		h.c.PaymentRequired(w, r, messageEnded, "")
		return nil
	case Unauthorized:
		w.Header().Set("WWW-Authenticate", h.badToken)
		return h.c.Refuse(w, r, http.StatusUnauthorized, messageBadTok)
	default:
		return h.c.Refuse(w, r, http.StatusForbidden, messageNoSub)
	}
}

// paymentRequiredBody is the JSON answer to an unpaid organization.
type paymentRequiredBody struct {
	respond.ErrorBody
	SubscribeLink string `json:"subscribe_link,omitempty"`
}

// WritePaymentRequired writes the 402 answer: JSON with the message and
// the subscribe link, or a small page with a Subscribe link for browsers;
// the link, when there is one, also goes in Location. It is always written
// by the handler (not left to error pages) so that the link reaches the
// person. link is an absolute http(s) URL or empty.
func WritePaymentRequired(w http.ResponseWriter, r *http.Request, message, link string) {
	if link != "" {
		w.Header().Set("Location", link)
	}
	if !respond.WantsHTML(r.Header) {
		var b paymentRequiredBody
		b.Error.Message = message
		b.SubscribeLink = link
		out, _ := respond.MarshalJSON(b) // strings always marshal
		respond.JSON(w, http.StatusPaymentRequired, out)
		return
	}
	respond.WritePage(w, http.StatusPaymentRequired, respond.Page{
		Title:    "Subscription needed",
		Message:  message,
		Link:     link,
		LinkText: "Subscribe",
	})
}

// BearerToken returns the token of an Authorization header value of the
// Bearer scheme, or "": the token a token check would read. Without a
// check in front, the token goes to the service unverified, so a value
// that is not even of bearer token syntax is not sent at all.
func BearerToken(header string) string {
	tok, _ := token.FromAuthorization(header)
	if !token.IsB64Token(tok) {
		return ""
	}
	return tok
}

// ValidBaseValue reports whether s may be put into a base URL for a
// request, e.g. as the organization's host name label: non-empty and made
// of letters, digits, '.', '-' and '_', so that it can move the query
// neither to another host nor into the path.
func ValidBaseValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
