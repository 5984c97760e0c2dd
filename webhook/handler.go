package webhook

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/servicegate/servicegate/internal/names"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/spans"
)

// DefaultReadTimeout is how long the body of a delivery may take to arrive
// unless HandlerConfig.ReadTimeout says otherwise.
const DefaultReadTimeout = 10 * time.Second

// DefaultTimeout is how long the app may take to acknowledge a delivery
// unless HandlerConfig.Timeout says otherwise. The interface names no limit
// for webhooks; 30 seconds is the time the delivery queue gives each
// attempt, long enough for an app that does its work before it answers and
// short enough that an app that hangs holds neither the service's
// connection nor a worker for long. A delivery that took longer is sent
// again (by the service, or by the queue).
const DefaultTimeout = 30 * time.Second

// Outcome is what became of one delivery through a Handler, told to
// HandlerConfig.Report: each delivery has exactly one.
type Outcome int

// The outcomes of a delivery.
const (
	Accepted         Outcome = iota // passed on to the app or its queue
	TooLarge                        // 413: over MaxSize
	MissingSignature                // 401: no X-Service-Signature
	BadSignature                    // 401: malformed, repeated, or matching no secret
	Forbidden                       // 403: organization headers, module key or event not allowed
	BadBody                         // 400: not {"events":[…]} while events are checked
	Unreadable                      // 400: the body could not be read in full
	SlowBody                        // 408: the body did not arrive within ReadTimeout
	Unavailable                     // 503: the organization's installation cannot be read now
	// NumOutcomes is the number of outcomes, for arrays indexed by Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	Accepted:         "accepted",
	TooLarge:         "too_large",
	MissingSignature: "missing_signature",
	BadSignature:     "bad_signature",
	Forbidden:        "forbidden",
	BadBody:          "bad_body",
	Unreadable:       "unreadable",
	SlowBody:         "slow_body",
	Unavailable:      "unavailable",
}

// String names the outcome in a word or two, as metrics label it.
func (o Outcome) String() string { return names.Of(outcomeNames[:], o, "outcome") }

// outcomeOf is the outcome of a refusal for its reason.
func outcomeOf(r Reason) Outcome {
	switch r {
	case ReasonMissingSignature:
		return MissingSignature
	case ReasonForbidden:
		return Forbidden
	case ReasonBadBody:
		return BadBody
	case ReasonTooLarge:
		return TooLarge
	case ReasonSlowBody:
		return SlowBody
	case ReasonUnreadable:
		return Unreadable
	case ReasonUnavailable:
		return Unavailable
	}
	return BadSignature
}

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Checker holds the secrets and allow-lists deliveries are checked
	// against. Required.
	Checker *Checker

	// MaxSize is the largest body accepted, in bytes. Default:
	// limits.DefaultMaxSize.
	MaxSize int64

	// ReadTimeout is how long the whole body may take to arrive, from
	// when the Handler starts reading it. Default: DefaultReadTimeout.
	ReadTimeout time.Duration

	// Timeout is how long the app may take to acknowledge a delivery
	// passed to next, from when it is passed on to the end of the app's
	// answer; past it the request to the app is cancelled and, when the
	// app has written nothing yet, the service gets 504. Not used with
	// Enqueue (the queue bounds its own attempts). Default: DefaultTimeout.
	Timeout time.Duration

	// Enqueue, when set, takes every verified delivery instead of next:
	// it stores body and answers the service itself, and returns what
	// Serve returns. body is only valid until Enqueue returns.
	Enqueue func(w http.ResponseWriter, r *http.Request, body []byte) error

	// Refuse answers a refused delivery with status and a message for a
	// person, and returns what Serve returns. Default: respond.Error, and
	// nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error

	// Report, when set, is told the outcome of each delivery, for metrics.
	Report func(Outcome)

	// Logger, when set, logs each refusal at debug level with its outcome,
	// status and message, what the endpoint expects and the module key
	// received; never a signature, a secret or the body.
	Logger *zap.Logger
}

// Handler verifies the service's webhook deliveries before the app sees
// them. A delivery over MaxSize by its Content-Length is refused (413)
// before anything else; then its headers are checked (Checker.CheckHeaders),
// so that a delivery no secret could verify is refused without reading its
// body; then the body is read whole, within MaxSize (413) and ReadTimeout
// (408), through the MACs of the candidate secrets, and checked
// (Checker.CheckBody). A verified delivery goes on, the very same bytes
// and headers (less an organization header the signature does not vouch
// for), to Enqueue or to next; a refused one never reaches the app.
//
// Each check is a span of the request's trace, servicegate.webhook.check,
// marked failed when it refuses.
type Handler struct {
	cfg HandlerConfig
	// The refusals whose messages name the limits, made once.
	tooLarge, tooSlow Refusal
	// expectedEvents are the event names of Checker.Events, for the log.
	expectedEvents []string
}

// NewHandler checks that cfg has a Checker, fills in its defaults and
// returns its Handler. Limits set are taken as they are: checking them is
// the caller's.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Checker == nil {
		return nil, errors.New("a webhook Handler needs a Checker")
	}
	cfg.MaxSize = cmp.Or(cfg.MaxSize, limits.DefaultMaxSize)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, DefaultReadTimeout)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Refuse == nil {
		cfg.Refuse = respond.Refuse
	}
	if cfg.Report == nil {
		cfg.Report = func(Outcome) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Handler{
		cfg: cfg,
		tooLarge: Refusal{http.StatusRequestEntityTooLarge, ReasonTooLarge,
			"The delivery is larger than the " + limits.LimitName(cfg.MaxSize) + " this endpoint accepts."},
		tooSlow: Refusal{http.StatusRequestTimeout, ReasonSlowBody,
			"The delivery did not arrive in full within " + limits.DurationName(cfg.ReadTimeout) + ". Send it again."},
		expectedEvents: cfg.Checker.Events.Names(),
	}, nil
}

// Serve checks a delivery and hands it on, to Enqueue when set, else to
// next with its body replaced by the bytes read; or refuses it.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	_, span := spans.Start(r.Context(), "servicegate.webhook.check")
	body, refusal := h.read(w, r)
	if refusal != nil {
		err := h.refuse(w, r, refusal)
		span.EndRefused(refusal.Status, err)
		return err
	}
	h.cfg.Report(Accepted)
	span.End()
	defer body.Release()
	if h.cfg.Enqueue != nil {
		err := h.cfg.Enqueue(w, r, body.Bytes())
		body.Close()
		return err
	}
	n := int64(body.Len())
	if n == 0 {
		body.Close()
		r.Body = http.NoBody
	} else {
		r.Body = body
	}
	r.ContentLength = n
	r.TransferEncoding = nil
	return h.pass(w, r, next)
}

// pass hands a verified delivery to next within Timeout. An app that has
// not begun to answer by then is given up on (the request to it is
// cancelled) and the service is answered 504, so that it sends the
// delivery again; one that began is left to finish as the proxy can.
func (h *Handler) pass(w http.ResponseWriter, r *http.Request, next Next) error {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	sw := &startedWriter{ResponseWriter: w}
	err := next.ServeHTTP(sw, r.WithContext(ctx))
	if sw.started || r.Context().Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	msg := "The app did not acknowledge the delivery within " + limits.DurationName(h.cfg.Timeout) + ", " + h.timeoutSource() + "."
	h.cfg.Logger.Warn(msg, zap.Duration("timeout", h.cfg.Timeout), zap.String("path", r.URL.Path),
		zap.String("module_key", respond.Quote(r.Header.Get(HeaderModuleKey))))
	return h.cfg.Refuse(w, r, http.StatusGatewayTimeout, msg+" Send it again later.")
}

// timeoutSource says where the time limit in force comes from.
func (h *Handler) timeoutSource() string {
	if h.cfg.Timeout == DefaultTimeout {
		return "servicegate's default for webhook deliveries"
	}
	return "the `timeout` of this webhook module"
}

// startedWriter tells whether the handler after began its answer.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(status int) {
	if status >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// read checks a delivery and returns its body, verified; or why it is
// refused. The body is written to the signature's MACs as it arrives.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) (*limits.Body, *Refusal) {
	if r.ContentLength > h.cfg.MaxSize {
		return nil, &h.tooLarge
	}
	d, refusal := h.cfg.Checker.CheckHeaders(r.Header)
	if refusal != nil {
		return nil, refusal
	}
	body, err := limits.ReadRequest(w, r, h.cfg.MaxSize, time.Now().Add(h.cfg.ReadTimeout), d.Writer())
	if err != nil {
		d.Release()
		return nil, h.unread(r, err)
	}
	if refusal := h.cfg.Checker.CheckBody(&d, r.Header, body.Bytes()); refusal != nil {
		body.Close()
		body.Release()
		return nil, refusal
	}
	return body, nil
}

// refuseUnreadable is a delivery whose body could not be read in full for
// another reason than its size or its pace.
var refuseUnreadable = &Refusal{http.StatusBadRequest, ReasonUnreadable, "The delivery could not be read in full. Send it again."}

// unread is why a delivery whose body could not be read in full is
// refused.
func (h *Handler) unread(r *http.Request, err error) *Refusal {
	switch limits.FailureOf(r, err) {
	case limits.BodyTooLarge:
		return &h.tooLarge
	case limits.BodyTooSlow:
		return &h.tooSlow
	}
	h.cfg.Logger.Debug("webhook delivery could not be read", zap.Error(err))
	return refuseUnreadable
}

// refuse reports, logs and answers a refused delivery. Only the outcome,
// status and message are logged, with what the endpoint expects and the
// module key received (a name, not a secret): never the signature or the
// body.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, refusal *Refusal) error {
	outcome := outcomeOf(refusal.Reason)
	h.cfg.Report(outcome)
	if ce := h.cfg.Logger.Check(zap.DebugLevel, "webhook delivery refused"); ce != nil {
		ce.Write(zap.String("outcome", outcome.String()), zap.Int("status", refusal.Status), zap.String("reason", refusal.Message),
			zap.Strings("expected_module_keys", h.cfg.Checker.ModuleKeys), zap.Strings("expected_events", h.expectedEvents),
			zap.String("module_key", respond.Quote(r.Header.Get(HeaderModuleKey))))
	}
	if refusal.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter) // the service sends it again
	}
	return h.cfg.Refuse(w, r, refusal.Status, refusal.Message)
}

// retryAfter is the Retry-After of a delivery refused for now.
const retryAfter = "30"
