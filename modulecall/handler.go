// Package modulecall holds the request pipeline of the service's calls to
// the module endpoints of an app (custom file format: parse-file and
// build-file; file pre-export): the limits the service sets on them (5 MB
// each way, 2 minutes for the answer), the module contract of package
// contract checked on the job and the answer, payloads sent by URL handed
// to the app inline, and answers over the size limit handed back by signed
// URL. Every breach is answered with a JSON error {"error":{"message":…}}
// that the service shows to its user. It knows nothing of Caddy: a Go app
// can put a Handler in front of its own handlers.
package modulecall

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/internal/names"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/respond"
)

// The limits the service sets on module calls: 5 MB each way, read as
// 5 MiB (the service's own app SDK keeps its answers under 4.9 MiB for
// it), and 2 minutes for the answer.
const (
	DefaultMaxSize = limits.DefaultMaxSize
	DefaultTimeout = 2 * time.Minute
)

// The modes of the contract check.
const (
	ModeEnforce = "enforce" // a breach replaces the answer with a JSON error
	ModeReport  = "report"  // a breach is logged, the answer passes
)

// Outcome is what became of one request through a Handler, told to
// HandlerConfig.Report: each request has exactly one.
type Outcome int

// The outcomes of a request.
const (
	// OK: the app's answer was sent.
	OK Outcome = iota
	// RequestTooLarge: the request was over MaxRequestSize (413).
	RequestTooLarge
	// RequestTimeout: the request body did not arrive in time (408).
	RequestTimeout
	// ResponseTooLarge: the answer was over its limit, or over
	// MaxResponseSize and could not be handed over by URL (502).
	ResponseTooLarge
	// ResponseIncomplete: the app's answer was cut off (502).
	ResponseIncomplete
	// Timeout: the app did not answer in time (504).
	Timeout
	// ContractViolation: the answer broke the module contract (502).
	ContractViolation
	// AppFailed: the app answered a job with a status other than 2xx and
	// no error.message of its own (502 naming the status).
	AppFailed
	// BadJob: the job broke the module contract (400).
	BadJob
	// InlineFailed: a payload the job sent by URL could not be fetched.
	InlineFailed
	// Spilled: the answer was sent with its payloads by URL.
	Spilled
	// SpillDownload: a payload was downloaded by its URL.
	SpillDownload
	// SpillRefused: a payload URL was invalid, used or expired (403).
	SpillRefused
	// SpillUnavailable: the stored payloads could not be reached (503).
	SpillUnavailable
	// ClientGone: the client left before the answer.
	ClientGone
	// Failed: an error passed on without an answer (the app is
	// unreachable, the request body unreadable, the answer lost on its way
	// to disk).
	Failed
	// NumOutcomes is the number of outcomes, for arrays indexed by Outcome.
	NumOutcomes
)

var outcomeNames = [NumOutcomes]string{
	OK:                 "ok",
	RequestTooLarge:    "request_too_large",
	RequestTimeout:     "request_timeout",
	ResponseTooLarge:   "response_too_large",
	ResponseIncomplete: "response_incomplete",
	Timeout:            "timeout",
	ContractViolation:  "contract_violation",
	AppFailed:          "app_failed",
	BadJob:             "bad_job",
	InlineFailed:       "inline_failed",
	Spilled:            "spilled",
	SpillDownload:      "spill_download",
	SpillRefused:       "spill_refused",
	SpillUnavailable:   "spill_unavailable",
	ClientGone:         "client_gone",
	Failed:             "error",
}

// String names the outcome in a word or two, as metrics label it.
func (o Outcome) String() string { return names.Of(outcomeNames[:], o, "outcome") }

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// MaxRequestSize and MaxResponseSize are the largest request and
	// answer bodies, in bytes; Timeout is how long the app may take, from
	// the request's arrival to the last byte of its answer. Default:
	// DefaultMaxSize and DefaultTimeout.
	MaxRequestSize, MaxResponseSize int64
	Timeout                         time.Duration

	// Contract is the module whose contract the exchanges keep:
	// contract.CustomFileFormat or contract.FilePreExport; empty checks
	// nothing. Mode is what a breach does: ModeEnforce (the default) or
	// ModeReport.
	Contract, Mode string

	// Inliner, when set, fetches the payloads a job carries by URL and
	// hands them to the app inline. Needs Contract.
	Inliner *contract.Inliner

	// Spill, when set, hands answers over MaxResponseSize to the service
	// by URL and serves those URLs. Needs Contract.
	Spill *Spill

	// Refuse answers a refused request with status and a message for a
	// person, and returns what Serve returns. Headers such as Allow and
	// Retry-After are already set on w. Default: respond.Error, and nil.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, message string) error
	// Fail returns the error Serve returns for a request that gets no
	// answer of the handler's own: status 499 when the client left, 400
	// when its body could not be read, 502 when the app's answer was lost.
	// Default: err.
	Fail func(status int, err error) error
	// AppStatus, when set, tells the status the app answered r with when
	// the handlers after wrote none: an informational status a proxy
	// does not pass on (reverse_proxy with a 101 to a plain POST). 0 when
	// unknown.
	AppStatus func(r *http.Request) int

	// Report, when set, is told the outcome of each request, for metrics.
	Report func(Outcome)
	// Logger, when set, logs what went wrong with a request, for the
	// operator and the app's developer: limits broken, contract breaches
	// by rule and position, never a body, a token or a secret.
	Logger *zap.Logger
}

// Handler holds the module endpoints of an app to the limits the service
// sets on their calls, and answers every breach with a JSON error:
//
//   - a request body over MaxRequestSize gets 413, decided from
//     Content-Length before reading when there is one; a body of unknown
//     length is read up to the limit before the app is called, so a
//     refused request never reaches the app. A request within the limit
//     reaches the app whole, with its Content-Length set;
//   - an answer over MaxResponseSize gets 502, and no part of it reaches
//     the client: the app's answer is buffered and sent only once complete
//     and within the limit;
//   - no complete answer within Timeout gets 504, and the request to the
//     app is cancelled: the handlers after this one see the request's
//     context end, and must stop then.
//
// With Contract, a malformed job gets 400 and an answer that breaks the
// contract 502 naming the first broken string; with Inliner, payloads the
// job carries by URL reach the app inline; with Spill, answers over
// MaxResponseSize reach the service with their payloads by signed URL.
type Handler struct {
	cfg    HandlerConfig
	refuse func(http.ResponseWriter, *http.Request, int, string) error
	fail   func(int, error) error
	report func(Outcome)
	log    *zap.Logger
	mode   string // of the contract check: ModeEnforce or ModeReport
	// stopSweeping, closed by Close, ends the sweeping of a spill store on
	// disk; swept is closed once it has ended.
	stopSweeping, swept chan struct{}
	closeOnce           sync.Once
}

// NewHandler checks cfg, fills in its defaults and returns its Handler.
// Limits set are taken as they are: checking them is the caller's. A
// Handler that spills to a store on disk sweeps it until Close.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Spill != nil {
		if cfg.Spill.Store == nil || (cfg.Spill.BaseURL == "" && cfg.Spill.Origin == nil) {
			return nil, errors.New("spill needs a Store, and a BaseURL or an Origin")
		}
		if err := os.MkdirAll(cfg.Spill.Dir, 0o700); err != nil { // answers are read to it either way
			return nil, fmt.Errorf("spill dir: %w", err)
		}
	}
	cfg.MaxRequestSize = cmp.Or(cfg.MaxRequestSize, DefaultMaxSize)
	cfg.MaxResponseSize = cmp.Or(cfg.MaxResponseSize, DefaultMaxSize)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	h := &Handler{cfg: cfg, refuse: cfg.Refuse, fail: cfg.Fail, report: cfg.Report, log: cfg.Logger, mode: cmp.Or(cfg.Mode, ModeEnforce)}
	if h.refuse == nil {
		h.refuse = respond.Refuse
	}
	if h.fail == nil {
		h.fail = func(_ int, err error) error { return err }
	}
	if h.report == nil {
		h.report = func(Outcome) {}
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	if cfg.Spill != nil {
		if store, ok := cfg.Spill.Store.(*contract.Store); ok {
			h.stopSweeping, h.swept = make(chan struct{}), make(chan struct{})
			go func() {
				defer close(h.swept)
				sweepExpired(store, h.stopSweeping, h.log)
			}()
		}
	}
	return h, nil
}

// Serve serves the payload URLs of spill, and passes every other request
// on to next within the limits, sending next's answer only when it is
// complete and within every limit.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, next Next) error {
	if h.cfg.Spill != nil && strings.HasPrefix(r.URL.Path, h.cfg.Spill.Path) {
		return h.serveSpilled(w, r)
	}
	if r.ContentLength > h.cfg.MaxRequestSize {
		h.report(RequestTooLarge)
		return h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The file is too large for this app: the request is %s and the app accepts at most %s. Try a smaller file, or split it into several files.",
			limits.SizeName(r.ContentLength), limits.LimitName(h.cfg.MaxRequestSize)))
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()

	// Without a contract, a request of declared length (within the limit,
	// checked above) goes to the app as it arrives: net/http holds it to
	// that length, and a client that stops short leaves the app with a
	// request cut off before its length, never a shorter complete one. A
	// request of unknown length, or one the contract must read, is read
	// whole first.
	stream := h.cfg.Contract == "" && r.ContentLength > 0
	var body *limits.Body
	if !stream && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		var err error
		deadline, _ := ctx.Deadline()
		if body, err = limits.ReadRequest(w, r, h.cfg.MaxRequestSize, deadline, nil); err != nil {
			return h.refuseUnread(w, r, err)
		}
		defer body.Release()
	}
	var job *contract.Job
	if h.cfg.Contract != "" {
		var refused bool
		var err error
		if job, refused, err = h.readJob(ctx, w, r, body); refused {
			return err
		}
	}
	up := r.WithContext(ctx)
	switch {
	case stream:
		// up.Body and up.ContentLength are the request's.
		if r.Header.Get("Content-Length") == "" {
			r.Header.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
		}
	case body == nil:
		up.Body, up.ContentLength = http.NoBody, 0
	default:
		up.Body, up.ContentLength = body, int64(body.Len())
		if r.Header.Get("Content-Length") == "" {
			r.Header.Set("Content-Length", strconv.Itoa(body.Len()))
		}
	}
	up.TransferEncoding = nil
	return h.exchange(w, r, up, next, job)
}

// refuseUnread answers a request whose body could not be read whole.
func (h *Handler) refuseUnread(w http.ResponseWriter, r *http.Request, err error) error {
	switch limits.FailureOf(r, err) {
	case limits.BodyTooLarge:
		h.report(RequestTooLarge)
		return h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The file is too large for this app: the request is larger than %s, the most the app accepts. Try a smaller file, or split it into several files.",
			limits.LimitName(h.cfg.MaxRequestSize)))
	case limits.BodyTooSlow:
		h.report(RequestTimeout)
		return h.refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf(
			"The file did not arrive within %s. Try again.", limits.DurationName(h.cfg.Timeout)))
	case limits.BodyAbandoned:
		h.report(ClientGone)
		return h.fail(499, r.Context().Err())
	}
	h.report(Failed)
	return h.fail(http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
}

// readJob parses the job in body and, with an Inliner, makes body the job
// with its payloads inline. A job that breaks the contract, or whose
// payloads cannot be fetched, is refused (refused is true, err is
// Refuse's); in mode report a malformed job goes on unchecked (job is nil).
func (h *Handler) readJob(ctx context.Context, w http.ResponseWriter, r *http.Request, body *limits.Body) (job *contract.Job, refused bool, err error) {
	var raw []byte
	if body != nil {
		raw = body.Bytes()
	}
	job, err = contract.ParseJobBytes(h.cfg.Contract, raw)
	if err != nil {
		// The message names fields only; what it quotes of the job is
		// left out of the log.
		h.log.Warn("module job breaks the contract", zap.String("path", r.URL.Path), zap.String("contract", h.cfg.Contract), zap.String("mode", h.mode), zap.String("error", contract.RedactQuoted(err.Error())))
		if h.mode == ModeReport {
			job = nil
		} else {
			h.report(BadJob)
			return nil, true, h.refuse(w, r, http.StatusBadRequest, err.Error())
		}
	}
	if job != nil && h.cfg.Inliner != nil && body != nil && (job.StringsURL != "" || job.ContentURL != "") {
		out, err := h.cfg.Inliner.Inline(ctx, job, body.Bytes())
		if err != nil {
			var ie *contract.InlineError
			if !errors.As(err, &ie) {
				ie = &contract.InlineError{Status: http.StatusBadGateway, Message: "The payloads of the job could not be fetched. Try again."}
			}
			h.report(InlineFailed)
			h.log.Info("job payload not inlined", zap.String("path", r.URL.Path), zap.Int("status", ie.Status))
			return nil, true, h.refuse(w, r, ie.Status, ie.Message)
		}
		body.Replace(out)
		r.Header.Set("Content-Length", strconv.Itoa(body.Len()))
	}
	// The answer is read to be checked: ask the app for it as it is, not
	// compressed.
	r.Header.Del("Accept-Encoding")
	return job, false, nil
}

// exchange calls next with up, the request within its limits, and its
// answer buffered: in memory, or with Spill on disk beyond
// MaxResponseSize.
func (h *Handler) exchange(w http.ResponseWriter, r, up *http.Request, next Next, job *contract.Job) error {
	if h.cfg.Spill != nil {
		sb := limits.NewSpillBuffer(w.Header(), h.cfg.MaxResponseSize, h.cfg.Spill.MaxSize, h.cfg.Spill.Dir)
		defer sb.Close()
		return h.answer(w, r, up, next, job, sb, sb)
	}
	mb := responseBuffers.Get().(*limits.ResponseBuffer)
	defer func() {
		// The answer is sent or dropped: a mapped one is unmapped, a large
		// heap one left to the garbage collector.
		mb.Release()
		responseBuffers.Put(mb)
	}()
	mb.Reset(w.Header(), h.cfg.MaxResponseSize)
	return h.answer(w, r, up, next, job, mb, nil)
}

// answer calls next into rb (which is sb when spilling) and answers with
// what became of it: the app's answer when it is complete and within
// every limit, else a refusal that says which limit it broke.
func (h *Handler) answer(w http.ResponseWriter, r, up *http.Request, next Next, job *contract.Job, rb answerBuffer, sb *limits.SpillBuffer) error {
	aborted, err := serveAborting(rb, up, next)
	maxAnswer := h.cfg.MaxResponseSize
	if sb != nil {
		maxAnswer = h.cfg.Spill.MaxSize
	}
	switch {
	case r.Context().Err() != nil:
		// The client went away: nobody is left to answer.
		h.report(ClientGone)
		return h.fail(499, r.Context().Err())
	case up.Context().Err() != nil:
		h.report(Timeout)
		h.log.Info("app did not answer in time", zap.String("path", r.URL.Path), zap.Duration("timeout", h.cfg.Timeout), zap.String("limit", h.timeoutSource()))
		return h.refuse(w, r, http.StatusGatewayTimeout, fmt.Sprintf(
			"The app did not answer within %s, %s. Try again later or with a smaller file; if it keeps happening, contact the app's developer.",
			limits.DurationName(h.cfg.Timeout), h.timeoutSource()))
	case rb.TooLarge():
		size := "larger than " + limits.LimitName(maxAnswer)
		if n := rb.DeclaredSize(); n > maxAnswer {
			size = limits.SizeName(n)
		}
		h.report(ResponseTooLarge)
		h.log.Info("app answer over the size limit", zap.String("path", r.URL.Path), zap.Int64("max_response_size", maxAnswer), zap.Int64("declared_size", rb.DeclaredSize()))
		return h.refuse(w, r, http.StatusBadGateway, tooLargeMessage(size, maxAnswer))
	case aborted:
		h.report(ResponseIncomplete)
		h.log.Info("app answer cut off", zap.String("path", r.URL.Path))
		return h.refuse(w, r, http.StatusBadGateway,
			"The app's answer was cut off before it was complete. Try again; if it keeps happening, contact the app's developer.")
	case err != nil:
		// next refused or failed without an answer (reverse_proxy: the
		// app is unreachable); whatever it buffered is dropped and its
		// error goes on, as without limits.
		h.report(Failed)
		return err
	case sb != nil && sb.Err() != nil:
		// the answer could not be kept on disk
		h.report(Failed)
		h.log.Error("app answer lost", zap.String("path", r.URL.Path), zap.Error(sb.Err()))
		return h.fail(http.StatusBadGateway, sb.Err())
	}
	if job != nil {
		var answer io.Reader
		if sb != nil {
			answer = sb.Reader()
		} else {
			answer = bytes.NewReader(rb.(*limits.ResponseBuffer).Body())
		}
		if o, msg := h.checkAnswer(r, job, answer, rb.Status()); msg != "" {
			h.report(o)
			return h.refuse(w, r, http.StatusBadGateway, msg)
		}
	}
	if sb != nil && sb.Spilled() {
		return h.spillAnswer(w, r, sb)
	}
	h.report(OK)
	// A write error means the client went away; there is no one to tell.
	_ = rb.WriteTo(w, r.Method == http.MethodHead)
	return nil
}

// tooLargeMessage is the refusal of an answer of size (named for a person)
// over limit.
func tooLargeMessage(size string, limit int64) string {
	return fmt.Sprintf(
		"The app's answer is too large: it is %s and the service accepts at most %s. Try a smaller file; if it keeps happening, contact the app's developer.",
		size, limits.LimitName(limit))
}

// timeoutSource says where the time limit in force comes from, for the
// person who reads the refusal: the service's own 2 minutes, or the
// timeout set on this module.
func (h *Handler) timeoutSource() string {
	if h.cfg.Timeout == DefaultTimeout {
		return "the most the service waits"
	}
	return "the `timeout` of this module"
}

// checkAnswer checks the app's answer to job, sent with status, reports a
// breach, and returns the message that replaces the answer with its
// outcome, "" when the answer goes on (it keeps the contract, or the mode
// is report). An answer of a status other than 2xx is the app's failure:
// it goes on when it carries the app's own error.message, and is named by
// its status otherwise, whatever its body.
func (h *Handler) checkAnswer(r *http.Request, job *contract.Job, answer io.Reader, status int) (Outcome, string) {
	ans, err := job.CheckAnswer(answer)
	if status < 200 || status > 299 {
		if err == nil && ans.AppError {
			return OK, ""
		}
		return h.appFailed(r, job, status)
	}
	if err == nil {
		return OK, ""
	}
	var b *contract.Breach
	if !errors.As(err, &b) {
		b = &contract.Breach{Job: job.Type, Rule: "it could not be read"}
	}
	// No body reaches a log: the string is named by its position, never
	// by its identifier, and what the rule quotes from the answer (a
	// language, a plural form) is left out.
	h.log.Warn("app answer breaks the module contract",
		zap.String("path", r.URL.Path),
		zap.String("job_type", job.Type),
		zap.Int("string", b.Index),
		zap.String("rule", contract.RedactQuoted(b.Rule)),
		zap.String("mode", h.mode))
	if h.mode == ModeReport {
		return OK, ""
	}
	return ContractViolation, b.Error()
}

// appFailed logs an answer of status without the app's error.message, and
// returns the message that replaces it: the status named, none of the
// app's body, which may hold a stack trace the service's user is not
// meant to read.
func (h *Handler) appFailed(r *http.Request, job *contract.Job, status int) (Outcome, string) {
	if status == 0 && h.cfg.AppStatus != nil {
		status = h.cfg.AppStatus(r)
	}
	msg := "The app failed to process the file: it answered " + strconv.Itoa(status) + "."
	if status == 0 {
		msg = "The app failed to process the file: it sent no answer."
	}
	h.log.Warn(msg,
		zap.String("path", r.URL.Path),
		zap.String("module", h.cfg.Contract),
		zap.String("job_type", job.Type),
		zap.Int("status", status),
		zap.String("mode", h.mode))
	if h.mode == ModeReport {
		return OK, ""
	}
	return AppFailed, msg
}

// serveAborting calls next and reports whether it aborted its answer with
// http.ErrAbortHandler, as a reverse proxy does when the response it is
// copying fails half-way (the app's answer is cut off, too large, or out
// of time). Since the answer is buffered, the client has seen none of it,
// and the handler can still answer properly. Other panics go on.
func serveAborting(w http.ResponseWriter, r *http.Request, next Next) (aborted bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // panics carry the sentinel itself
				panic(v)
			}
			aborted = true
		}
	}()
	return false, next.ServeHTTP(w, r)
}

// responseBuffers holds answer buffers, released: each keeps at most
// limits.MaxPooled bytes of heap memory and no mapping.
var responseBuffers = sync.Pool{New: func() any { return new(limits.ResponseBuffer) }}

// answerBuffer keeps the app's answer until it is complete and checked:
// a limits.ResponseBuffer, or a limits.SpillBuffer when spilling.
type answerBuffer interface {
	http.ResponseWriter
	Status() int
	TooLarge() bool
	DeclaredSize() int64
	WriteTo(w http.ResponseWriter, head bool) error
}

var (
	_ answerBuffer = (*limits.ResponseBuffer)(nil)
	_ answerBuffer = (*limits.SpillBuffer)(nil)
)
