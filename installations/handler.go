package installations

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
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
	// Stored: an installation was proved and stored.
	Stored Outcome = iota
	// Refused: the service refused the installation's secret; nothing
	// was stored.
	Refused
	// Unreachable: the service could not be asked to prove the
	// installation, or the store failed; nothing was stored.
	Unreachable
	// Malformed: the call's body or method was not a lifecycle call's,
	// or it named another app.
	Malformed
	// Uninstalled: an installation was removed.
	Uninstalled
	// WrongSecret: an uninstall with an app secret other than the
	// stored one was refused.
	WrongSecret
	// Unknown: an uninstall or subscription_paid of an organization with
	// no installation; nothing changed.
	Unknown
	// Paid: a subscription_paid of an installed organization.
	Paid
	// NumOutcomes is the number of outcomes, for arrays indexed by
	// Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	Stored: "stored", Refused: "refused", Unreachable: "service_unreachable", Malformed: "malformed",
	Uninstalled: "uninstalled", WrongSecret: "wrong_secret", Unknown: "unknown", Paid: "paid",
}

// String is the outcome's metric label.
func (o Outcome) String() string { return names.Of(outcomeNames[:], o, "outcome") }

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// DefaultPaidInterval is how often a subscription_paid call may make the
// gateway forget an organization's subscription answer, at most.
const DefaultPaidInterval = 10 * time.Second

// retryAfter is the Retry-After of an answer 503: the service tries the
// call again.
const retryAfter = "30"

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Book holds the installations; its Grant proves an installation.
	// Required.
	Book *Book
	// ClientID is the app's OAuth client_id: a call for another client
	// is refused. Required.
	ClientID string
	// Paths are the paths of the lifecycle calls, by kind, as the
	// descriptor's events name them; an empty path is not answered.
	Paths [NumKinds]string
	// Forward tells the app of each call (next handler), with appSecret
	// and code removed; without it the handler answers 200 itself.
	Forward bool
	// Purge forgets the cached subscription answer of an organization,
	// on every instance. Optional.
	Purge func(organizationID, domain string)
	// PaidInterval: see DefaultPaidInterval, the default.
	PaidInterval time.Duration
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

// Handler answers the service's lifecycle calls in front of an app: it
// keeps each organization's installation in its Book, proves it with the
// service before storing it, and tells the app without the secrets.
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
	return &Handler{cfg: cfg}, nil
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

func (h *Handler) installed(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	in := &Installation{
		OrganizationID: ev.OrganizationID, Domain: ev.Domain, BaseURL: ev.BaseURL,
		AppID: ev.AppID, AppSecret: ev.AppSecret, UserID: ev.UserID, InstalledAt: h.cfg.Now().UTC(),
	}
	grant := h.cfg.Book.cfg.Grant
	if grant == nil {
		h.cfg.Report(Unreachable, in.OrganizationID, errors.New("no way to ask the service for app tokens"))
		w.Header().Set("Retry-After", retryAfter)
		return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, "The gateway cannot confirm installations with the service.")
	}
	tok, err := grant(r.Context(), in)
	if errors.Is(err, ErrRefused) {
		h.cfg.Report(Refused, in.OrganizationID, err)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "The service does not confirm this installation: its app secret was refused.")
	}
	if err != nil {
		h.cfg.Report(Unreachable, in.OrganizationID, err)
		w.Header().Set("Retry-After", retryAfter)
		return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, "The service could not be reached to confirm this installation; try again later.")
	}
	in.Token = tok
	if err := h.cfg.Book.Install(in); err != nil {
		h.cfg.Report(Unreachable, in.OrganizationID, err)
		w.Header().Set("Retry-After", retryAfter)
		return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, "The installation could not be stored; try again later.")
	}
	h.cfg.Report(Stored, in.OrganizationID, nil)
	return h.tell(w, r, next, ev)
}

func (h *Handler) uninstall(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	in, err := h.cfg.Book.Get(ev.OrganizationID)
	if errors.Is(err, ErrNotFound) {
		// Nothing to undo; the app is not told of a call nobody proved.
		h.cfg.Report(Unknown, ev.OrganizationID, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	if err != nil {
		h.cfg.Report(Unreachable, ev.OrganizationID, err)
		w.Header().Set("Retry-After", retryAfter)
		return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, "The installation could not be read; try again later.")
	}
	if !SameSecret(in.AppSecret, ev.AppSecret) {
		h.cfg.Report(WrongSecret, in.OrganizationID, nil)
		return h.cfg.Refuse(w, r, http.StatusForbidden, "This uninstall call does not carry the app secret of the organization's installation.")
	}
	if err := h.cfg.Book.Remove(in.OrganizationID); err != nil {
		h.cfg.Report(Unreachable, in.OrganizationID, err)
		w.Header().Set("Retry-After", retryAfter)
		return h.cfg.Refuse(w, r, http.StatusServiceUnavailable, "The installation could not be removed; try again later.")
	}
	if h.cfg.Purge != nil {
		h.cfg.Purge(in.OrganizationID, in.Domain)
	}
	h.cfg.Report(Uninstalled, in.OrganizationID, nil)
	return h.tell(w, r, next, ev)
}

func (h *Handler) paid(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	e := h.cfg.Book.lookup(ev.OrganizationID)
	if e == nil {
		// Only the service's own organizations are purged: a made-up
		// organization costs nothing.
		h.cfg.Report(Unknown, ev.OrganizationID, nil)
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	// However often the call comes, the organization's answer is
	// forgotten at most once per PaidInterval: the next request asks the
	// service once.
	now := h.cfg.Now().UnixNano()
	last := e.paidAt.Load()
	if now-last >= int64(h.cfg.PaidInterval) && e.paidAt.CompareAndSwap(last, now) && h.cfg.Purge != nil {
		h.cfg.Purge(e.id, e.domain)
	}
	h.cfg.Report(Paid, e.id, nil)
	return h.tell(w, r, next, ev)
}

// tell passes the call to the app without its secrets, or answers it.
func (h *Handler) tell(w http.ResponseWriter, r *http.Request, next Next, ev *Event) error {
	if !h.cfg.Forward {
		respond.JSON(w, http.StatusOK, []byte("{}"))
		return nil
	}
	body := ev.Forwarded()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r.Header.Del("Transfer-Encoding")
	r.TransferEncoding = nil
	return next.ServeHTTP(w, r)
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
