package installations

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/servicegate/servicegate/internal/names"
	"github.com/servicegate/servicegate/respond"
)

// Outcome is how a lifecycle call ended, told to HandlerConfig.Report.
type Outcome int

// The outcomes of a Handler.
const (
	// Stored: an installation was proved, acknowledged by the app (with
	// Forward) and stored.
	Stored Outcome = iota
	// Refused: the service refused the installation's secret; nothing
	// was stored.
	Refused
	// Unreachable: the service could not be asked to prove the call, or
	// the store failed; nothing changed.
	Unreachable
	// Malformed: the call's body or method was not a lifecycle call's,
	// or it named another app.
	Malformed
	// Uninstalled: an installation was removed.
	Uninstalled
	// WrongSecret: an uninstall with an app secret other than the
	// stored one, or naming another domain, was refused.
	WrongSecret
	// Unknown: an uninstall or subscription_paid of an organization with
	// no installation; nothing changed.
	Unknown
	// Paid: a subscription_paid the service's subscription query
	// confirmed.
	Paid
	// NotProved: the app token the service issued does not name the
	// call's organization, or cannot be verified; nothing was stored.
	NotProved
	// Taken: the installation's domain belongs to another organization's
	// installation; nothing was stored.
	Taken
	// Limited: the source's (or every source's) budget of unproved calls
	// is spent; the service was not asked.
	Limited
	// ClientRefused: the service refused service_app's own client_id and
	// client_secret; nothing changed.
	ClientRefused
	// NotPaid: the service's subscription query does not confirm a
	// subscription_paid; nothing changed.
	NotPaid
	// NotAcknowledged: the app did not acknowledge the call (no 2xx);
	// nothing changed.
	NotAcknowledged
	// Repeated: a call already proved came again; it was answered from
	// what is stored, without asking the service.
	Repeated
	// NumOutcomes is the number of outcomes, for arrays indexed by
	// Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	Stored: "stored", Refused: "refused", Unreachable: "service_unreachable", Malformed: "malformed",
	Uninstalled: "uninstalled", WrongSecret: "wrong_secret", Unknown: "unknown", Paid: "paid",
	NotProved: "not_proved", Taken: "taken", Limited: "limited", ClientRefused: "client_refused",
	NotPaid: "not_paid", NotAcknowledged: "not_acknowledged", Repeated: "repeated",
}

// String is the outcome's metric label.
func (o Outcome) String() string { return names.Of(outcomeNames[:], o, "outcome") }

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// DefaultPaidInterval is how often a subscription_paid call of one
// organization may make the gateway ask the service to confirm it, at
// most; a call within it after a confirmation is answered from that.
const DefaultPaidInterval = 10 * time.Second

// retryAfter is the Retry-After of an answer 503: the service tries the
// call again.
const retryAfter = "30"

// Confirmation is the service's answer to the subscription query the
// gateway asks to confirm a subscription_paid.
type Confirmation struct {
	// Paid: the subscription is active.
	Paid bool
	// Expires is when it ends, when Paid.
	Expires time.Time
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Book holds the installations; its Grant proves an installation.
	// Required.
	Book *Book
	// ClientID is the app's OAuth client_id: a call for another client
	// is refused. Required.
	ClientID string
	// Prove verifies the app token the service issues for an
	// installation and names its organization: the installation is
	// stored under that organization, and only when the call names the
	// same. Required.
	Prove Prover
	// Confirm asks the service, with the organization's app token,
	// whether the organization's subscription is paid: a
	// subscription_paid is acted on and told to the app only when it
	// confirms. An error means no usable answer. Without it,
	// subscription_paid calls are answered 503.
	Confirm func(ctx context.Context, in *Installation, appToken string) (Confirmation, error)
	// BaseURL is the service's address, the installation's baseUrl
	// (what the app is told): the gateway's own setting, never the
	// call's.
	BaseURL string
	// Paths are the paths of the lifecycle calls, by kind, as the
	// descriptor's events name them; an empty path is not answered.
	Paths [NumKinds]string
	// Forward tells the app of each call (the next handler) with a
	// request the gateway builds: a POST of a body the gateway writes
	// (see told) to the call's path, with no query and only
	// Content-Type, Content-Length, TokenHeader and the trace context
	// (see appRequest). It commits the change only once the app
	// acknowledged the call with a final 2xx: with no final status (an
	// informational one at most) the call is refused 502, and when next
	// returns an error without one Serve returns a *NoAnswer. Without
	// Forward the handler commits and answers 200 itself.
	Forward bool
	// TokenHeader, when set, carries the organization's app token to
	// the app on a forwarded installed and subscription_paid.
	TokenHeader string
	// Purge forgets the cached subscription answer of an organization,
	// on every instance. Optional.
	Purge func(organizationID, domain string)
	// PaidInterval: see DefaultPaidInterval, the default.
	PaidInterval time.Duration
	// Budget limits the requests to the service that unproved calls
	// make. Default: NewBudget(0, 0, 0, Now).
	Budget *Budget
	// Source is the address a call comes from, for Budget. Default: the
	// host of r.RemoteAddr.
	Source func(r *http.Request) string
	// Refuse answers a refused call with status and a message for a
	// person, and returns what Serve returns. Headers such as Allow and
	// Retry-After are already set on w. Default: respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error
	// Report, when set, is told how each call ended, with the
	// organization (id) and the error; err never holds a secret.
	Report func(o Outcome, organization string, err error)
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Handler answers the service's lifecycle calls in front of an app. It
// believes the service and nothing else: an installation is stored under
// the organization the app token the service issued for it names, a
// subscription_paid is acted on when the service's subscription query
// confirms it, and the app is told by a body the gateway writes from what
// it verified and stored.
type Handler struct {
	cfg HandlerConfig
}

// NewHandler checks cfg and returns its Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Book == nil {
		return nil, errors.New("installations: a book is required")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("installations: the app's client_id is required")
	}
	if cfg.Prove == nil {
		return nil, errors.New("installations: a way to verify the service's app tokens is required")
	}
	if cfg.PaidInterval <= 0 {
		cfg.PaidInterval = DefaultPaidInterval
	}
	if cfg.Refuse == nil {
		cfg.Refuse = respond.Refuse
	}
	if cfg.Report == nil {
		cfg.Report = func(Outcome, string, error) {}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(0, 0, 0, cfg.Now)
	}
	if cfg.Source == nil {
		cfg.Source = remoteHost
	}
	return &Handler{cfg: cfg}, nil
}

// remoteHost is the host of r.RemoteAddr.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// Kind reports which lifecycle call path is, if any.
func (h *Handler) Kind(path string) (Kind, bool) {
	for k, p := range h.cfg.Paths {
		if p != "" && p == path {
			return Kind(k), true
		}
	}
	return 0, false
}

// Serve answers r when its path is a lifecycle call's, and passes any
// other request to next unchanged.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	kind, ok := h.Kind(r.URL.Path)
	if !ok {
		return next.ServeHTTP(w, r)
	}
	if r.Method != http.MethodPost {
		h.cfg.Report(Malformed, "", nil)
		w.Header().Set("Allow", http.MethodPost)
		return h.cfg.Refuse(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("The %s call of the service is a POST.", kind))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxEventBody+1))
	if err != nil {
		h.cfg.Report(Malformed, "", err)
		return h.cfg.Refuse(w, r, http.StatusBadRequest, fmt.Sprintf("The body of the %s call could not be read.", kind))
	}
	if len(body) > MaxEventBody {
		h.cfg.Report(Malformed, "", nil)
		return h.cfg.Refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The body of the %s call is larger than 64 KiB.", kind))
	}
	ev, err := ParseEvent(kind, body)
	if err != nil {
		h.cfg.Report(Malformed, "", err)
		return h.cfg.Refuse(w, r, http.StatusBadRequest, capitalize(err.Error())+".")
	}
	if kind != SubscriptionPaid && ev.ClientID != h.cfg.ClientID {
		h.cfg.Report(Malformed, ev.OrganizationID, nil)
		return h.cfg.Refuse(w, r, http.StatusForbidden, fmt.Sprintf("This %s call names another app's clientId.", kind))
	}
	switch kind {
	case Installed:
		return h.installed(w, r, next, ev)
	case Uninstall:
		return h.uninstall(w, r, next, ev)
	default:
		return h.paid(w, r, next, ev)
	}
}

// serviceFailed is the message of a question (what) the service gave no
// usable answer to: the status it answered with when it answered (an
// oauth.AnsweredError, a subscription.StatusError), else unreachable.
func serviceFailed(err error, what, unreachable string) string {
	var answered interface{ AnsweredStatus() int }
	if errors.As(err, &answered) {
		return fmt.Sprintf("The service answered %d when asked %s; try again later.", answered.AnsweredStatus(), what)
	}
	return unreachable
}

// unavailable answers 503 with Retry-After: the service tries again.
func (h *Handler) unavailable(w http.ResponseWriter, r *http.Request, o Outcome, org string, err error, message string) error {
	h.cfg.Report(o, org, err)
	w.Header().Set("Retry-After", retryAfter)
	return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, message)
}

// limited answers a call that found a budget of unproved calls spent
// (its source's, or the overall one): 429, and the service is not asked.
func (h *Handler) limited(w http.ResponseWriter, r *http.Request, ev *Event, retry time.Duration, spent Spent) error {
	h.cfg.Report(Limited, ev.OrganizationID, nil)
	w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	if spent == SpentOverall {
		return h.cfg.Refuse(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many %s calls that the service did not confirm came from all addresses together: "+
			"the overall budget of unconfirmed calls is spent; try again later.", ev.Kind))
	}
	return h.cfg.Refuse(w, r, http.StatusTooManyRequests,
		fmt.Sprintf("Too many %s calls that the service did not confirm came from this address: its budget of unconfirmed calls is spent; try again later.", ev.Kind))
}

func (h *Handler) installed(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	if e := h.cfg.Book.lookupID(ev.OrganizationID); e != nil && e.domain == ev.Domain && SameSecret(e.secret, ev.AppSecret) {
		// The service's retry of a call proved before: what is stored
		// answers it, and the service is not asked again.
		in, err := h.cfg.Book.Get(e.id)
		if err != nil {
			return h.unavailable(w, r, Unreachable, e.id, err, "The installation could not be read; try again later.")
		}
		h.cfg.Report(Repeated, e.id, nil)
		return h.tell(w, r, next, Installed, in, time.Time{}, nil)
	}
	source := h.cfg.Source(r)
	if ok, retry, spent := h.cfg.Budget.Take(source); !ok {
		return h.limited(w, r, ev, retry, spent)
	}
	in, o, err := h.prove(r.Context(), ev)
	if o == Unreachable {
		h.cfg.Budget.Refund(source) // the service refused nothing
	}
	switch o {
	case ClientRefused:
		return h.unavailable(w, r, o, ev.OrganizationID, err,
			"The gateway cannot confirm installations: the service refused service_app's client_id/client_secret. The gateway's operator must fix them.")
	case Refused:
		h.cfg.Report(o, ev.OrganizationID, err)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "The service does not confirm this installation: it refused the call's app secret.")
	case NotProved:
		h.cfg.Report(o, ev.OrganizationID, err)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "The service does not confirm this installation: the app token it issued is not for the organization the call names.")
	case Unreachable:
		return h.unavailable(w, r, o, ev.OrganizationID, err, serviceFailed(err, "to confirm this installation",
			"The service could not be reached to confirm this installation; try again later."))
	}
	h.cfg.Budget.Refund(source)
	if e := h.cfg.Book.lookup(Org{Domain: in.Domain}); in.Domain != "" && e != nil && e.id != in.OrganizationID {
		h.cfg.Report(Taken, in.OrganizationID, nil)
		return h.cfg.Refuse(w, r, http.StatusConflict,
			"The gateway holds another organization's installation under this domain; it is not replaced. Uninstall that one first.")
	}
	return h.tell(w, r, next, Installed, in, time.Time{}, func() error { return h.cfg.Book.Install(in) })
}

// prove asks the service for an app token with the call's installation
// and checks that the token names the call's organization: the
// installation to store, in the service's words, or the outcome that
// refuses the call.
func (h *Handler) prove(ctx context.Context, ev *Event) (*Installation, Outcome, error) {
	grant := h.cfg.Book.cfg.Grant
	if grant == nil {
		return nil, Unreachable, errors.New("no way to ask the service for app tokens")
	}
	in := &Installation{
		OrganizationID: ev.OrganizationID, Domain: ev.Domain, BaseURL: h.cfg.BaseURL,
		AppID: ev.AppID, AppSecret: ev.AppSecret, UserID: ev.UserID, InstalledAt: h.cfg.Now().UTC(),
	}
	tok, err := grant(ctx, in)
	switch {
	case errors.Is(err, ErrClientRefused):
		return nil, ClientRefused, err
	case errors.Is(err, ErrRefused):
		return nil, Refused, err
	case err != nil:
		return nil, Unreachable, err
	}
	org, err := h.cfg.Prove(ctx, tok.AccessToken)
	if err != nil {
		return nil, NotProved, fmt.Errorf("%w: %v", ErrNotProved, err)
	}
	if org.ID != ev.OrganizationID || org.Domain != ev.Domain {
		return nil, NotProved, fmt.Errorf("%w: the token names organization %s (%q), the call %s (%q)",
			ErrNotProved, org.ID, org.Domain, ev.OrganizationID, ev.Domain)
	}
	in.Token = tok
	return in, Stored, nil
}

func (h *Handler) uninstall(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	e := h.cfg.Book.lookupID(ev.OrganizationID)
	if e == nil {
		// Nothing to undo; the app is not told of a call nobody proved.
		h.cfg.Report(Unknown, ev.OrganizationID, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	if !SameSecret(e.secret, ev.AppSecret) || e.domain != ev.Domain {
		h.cfg.Report(WrongSecret, e.id, nil)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "This uninstall call does not carry the app secret and domain of the organization's installation.")
	}
	in, err := h.cfg.Book.Get(e.id)
	if err != nil {
		return h.unavailable(w, r, Unreachable, e.id, err, "The installation could not be read; try again later.")
	}
	return h.tell(w, r, next, Uninstall, in, time.Time{}, func() error {
		if err := h.cfg.Book.Remove(in.OrganizationID); err != nil {
			return err
		}
		if h.cfg.Purge != nil {
			h.cfg.Purge(in.OrganizationID, in.Domain)
		}
		return nil
	})
}

func (h *Handler) paid(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	e := h.cfg.Book.lookupID(ev.OrganizationID)
	if e == nil || e.domain != ev.Domain {
		// Only the service's own organizations are confirmed: a made-up
		// organization costs nothing.
		h.cfg.Report(Unknown, ev.OrganizationID, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	now := h.cfg.Now().UnixNano()
	if last := e.paidAt.Load(); last != 0 && now-last < int64(h.cfg.PaidInterval) {
		// Confirmed a moment ago: however often the call comes, the
		// service is asked once per PaidInterval.
		h.cfg.Report(Repeated, e.id, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	if h.cfg.Confirm == nil {
		return h.unavailable(w, r, Unreachable, e.id, errors.New("no way to ask the service for the subscription"),
			"The gateway cannot confirm payments with the service.")
	}
	source := h.cfg.Source(r)
	if ok, retry, spent := h.cfg.Budget.Take(source); !ok {
		return h.limited(w, r, ev, retry, spent)
	}
	in, c, err := h.confirm(r.Context(), e)
	if err != nil {
		h.cfg.Budget.Refund(source)
		return h.unavailable(w, r, Unreachable, e.id, err, serviceFailed(err, "whether this organization paid",
			"The service could not be asked whether this organization paid; try again later."))
	}
	if !c.Paid {
		h.cfg.Report(NotPaid, e.id, nil)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "The service does not confirm that this organization's subscription is paid.")
	}
	h.cfg.Budget.Refund(source)
	e.paidAt.Store(now)
	if h.cfg.Purge != nil {
		h.cfg.Purge(e.id, e.domain)
	}
	return h.tell(w, r, next, SubscriptionPaid, in, c.Expires, nil)
}

// confirm asks the service, with the organization's app token, whether
// its subscription is paid.
func (h *Handler) confirm(ctx context.Context, e *entry) (*Installation, Confirmation, error) {
	in, err := h.cfg.Book.Get(e.id)
	if err != nil {
		return nil, Confirmation{}, err
	}
	tok, _, err := h.cfg.Book.Token(ctx, Org{ID: e.id})
	if err != nil {
		return nil, Confirmation{}, err
	}
	in.Token.AccessToken = tok
	c, err := h.cfg.Confirm(ctx, in, tok)
	return in, c, err
}

// tell tells the app of the call, with a request the gateway builds
// around the body it writes from in, and runs commit once the app
// acknowledged it with a final 2xx; without Forward it commits and
// answers 200.
func (h *Handler) tell(w http.ResponseWriter, r *http.Request, next Next, kind Kind, in *Installation, expires time.Time, commit func() error) error {
	done := toldOutcomes[kind]
	if !h.cfg.Forward {
		if commit != nil {
			if err := commit(); err != nil {
				return h.commitFailed(w, r, in, err)
			}
		}
		h.cfg.Report(done, in.OrganizationID, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	var token string
	if kind != Uninstall {
		token = in.Token.AccessToken
	}
	// The app reads the call from a request the gateway builds: the
	// descriptor's path, the gateway's body, an allow-list of headers.
	// No byte of the caller's goes with it.
	out := appRequest(r, h.cfg.Paths[kind], told(kind, h.cfg.ClientID, in, expires), h.cfg.TokenHeader, token)
	aw := &ackWriter{ResponseWriter: w, commit: commit}
	err := next.ServeHTTP(aw, out)
	switch {
	case aw.failed != nil:
		for k := range w.Header() {
			delete(w.Header(), k) // the app's answer is not sent
		}
		return h.commitFailed(w, r, in, aw.failed)
	case !aw.decided && err != nil:
		h.cfg.Report(NotAcknowledged, in.OrganizationID, err)
		return &NoAnswer{Kind: kind, Err: err}
	case !aw.decided:
		// An informational answer (a 101 above all, which a proxy drops
		// when the request did not ask for it) is no acknowledgement.
		h.cfg.Report(NotAcknowledged, in.OrganizationID, errNoFinalStatus)
		return h.cfg.Refuse(w, r, http.StatusBadGateway, noFinalStatusMessage(kind, aw.informational))
	case err != nil:
		h.cfg.Report(NotAcknowledged, in.OrganizationID, err)
		return err
	}
	if aw.status() >= 300 {
		h.cfg.Report(NotAcknowledged, in.OrganizationID, nil)
		return nil
	}
	h.cfg.Report(done, in.OrganizationID, nil)
	return nil
}

// toldOutcomes is the outcome of each kind of call once it is done.
var toldOutcomes = [NumKinds]Outcome{Installed: Stored, Uninstall: Uninstalled, SubscriptionPaid: Paid}

// commitFailed answers a call whose change could not be stored.
func (h *Handler) commitFailed(w http.ResponseWriter, r *http.Request, in *Installation, err error) error {
	if errors.Is(err, ErrTaken) {
		h.cfg.Report(Taken, in.OrganizationID, err)
		return h.cfg.Refuse(w, r, http.StatusConflict,
			"The gateway holds another organization's installation under this domain; it is not replaced. Uninstall that one first.")
	}
	return h.unavailable(w, r, Unreachable, in.OrganizationID, err, "The installation could not be stored; try again later.")
}

// SameSecret compares two secrets in constant time, whatever their
// lengths.
func SameSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
