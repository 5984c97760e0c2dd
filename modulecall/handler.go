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
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/respond"
)

// Event is what a Handler tells HandlerConfig.Report about a request. The
// events before NumOutcomes are outcomes: each request ends with exactly
// one. The others are findings on the way, told before the outcome.
type Event int

// The events of a Handler.
const (
	// OK: the app's answer was sent.
	OK Event = iota
	// RequestTooLarge: the request was over MaxRequestSize (413).
	RequestTooLarge
	// RequestTimeout: the request body did not arrive in time (408).
	RequestTimeout
	// ResponseTooLarge: the answer was over its limit (502); with
	// Detail.Err, an answer over MaxResponseSize could not be handed over
	// by URL.
	ResponseTooLarge
	// ResponseIncomplete: the app's answer was cut off (502).
	ResponseIncomplete
	// Timeout: the app did not answer in time (504).
	Timeout
	// ContractViolation: the answer broke the module contract (502).
	ContractViolation
	// BadJob: the job broke the module contract (400).
	BadJob
	// InlineFailed: a payload the job sent by URL could not be fetched;
	// Detail.Err is its *contract.InlineError.
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
	// unreachable, the request body unreadable); with Detail.Err, the
	// app's answer was lost on its way to disk.
	Failed
	// NumOutcomes is the number of outcomes, for arrays indexed by Event.
	NumOutcomes

	// JobBreach: the job breaks the module contract; Detail.Err says how.
	// Outcome BadJob follows unless the mode is report.
	JobBreach Event = iota - 1
	// AnswerBreach: the answer breaks the module contract; Detail.Err is
	// its *contract.Breach. Outcome ContractViolation follows unless the
	// mode is report.
	AnswerBreach
)

var eventNames = [...]string{
	OK:                 "ok",
	RequestTooLarge:    "request_too_large",
	RequestTimeout:     "request_timeout",
	ResponseTooLarge:   "response_too_large",
	ResponseIncomplete: "response_incomplete",
	Timeout:            "timeout",
	ContractViolation:  "contract_violation",
	BadJob:             "bad_job",
	InlineFailed:       "inline_failed",
	Spilled:            "spilled",
	SpillDownload:      "spill_download",
	SpillRefused:       "spill_refused",
	SpillUnavailable:   "spill_unavailable",
	ClientGone:         "client_gone",
	Failed:             "error",
	JobBreach:          "job_breach",
	AnswerBreach:       "answer_breach",
}

// String names the event in a word or two, as metrics label outcomes.
func (e Event) String() string {
	if e < 0 || int(e) >= len(eventNames) {
		return "event " + strconv.Itoa(int(e))
	}
	return eventNames[e]
}

// Detail is what comes with an event, for a log line: never a body, a
// token or a secret, though Err may quote a job's or an answer's text.
type Detail struct {
	// Err is what went wrong, as each event says.
	Err error
	// Size is the size of the answer: as declared (ResponseTooLarge
	// without Err, -1 for none) or as sent (Spilled, ResponseTooLarge with
	// Err).
	Size int64
	// Limit is the limit the answer broke (ResponseTooLarge).
	Limit int64
	// Payloads is how many payloads were handed over by URL (Spilled).
	Payloads int
}

// Next is the handler after a Handler; caddyhttp.Handler is one.
type Next interface {
	ServeHTTP(http.ResponseWriter, *http.Request) error
}

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// MaxRequestSize and MaxResponseSize are the largest request and
	// answer bodies, in bytes; Timeout is how long the app may take, from
	// the request's arrival to the last byte of its answer.
	MaxRequestSize, MaxResponseSize int64
	Timeout                         time.Duration

	// Contract is the module whose contract the exchanges keep:
	// contract.CustomFileFormat or contract.FilePreExport; empty checks
	// nothing. ReportOnly reports a breach and lets the exchange go on.
	Contract   string
	ReportOnly bool

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
	// Report, when set, is told each event of a request, for metrics and
	// logs.
	Report func(r *http.Request, ev Event, d Detail)
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
// contract 502 naming the first broken string.
type Handler struct {
	cfg    HandlerConfig
	refuse func(http.ResponseWriter, *http.Request, int, string) error
	fail   func(int, error) error
	report func(*http.Request, Event, Detail)
}

// NewHandler checks cfg and returns its Handler. The limits are taken as
// they are: checking them against what the service sets is the caller's.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Spill != nil && (cfg.Spill.Store == nil || (cfg.Spill.BaseURL == "" && cfg.Spill.Origin == nil)) {
		return nil, errors.New("spill needs a Store, and a BaseURL or an Origin")
	}
	h := &Handler{cfg: cfg, refuse: cfg.Refuse, fail: cfg.Fail, report: cfg.Report}
	if h.refuse == nil {
		h.refuse = func(w http.ResponseWriter, _ *http.Request, status int, message string) error {
			respond.Error(w, status, message)
			return nil
		}
	}
	if h.fail == nil {
		h.fail = func(_ int, err error) error { return err }
	}
	if h.report == nil {
		h.report = func(*http.Request, Event, Detail) {}
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
		h.report(r, RequestTooLarge, Detail{})
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
		h.report(r, RequestTooLarge, Detail{})
		return h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The file is too large for this app: the request is larger than %s, the most the app accepts. Try a smaller file, or split it into several files.",
			limits.LimitName(h.cfg.MaxRequestSize)))
	case limits.BodyTooSlow:
		h.report(r, RequestTimeout, Detail{})
		return h.refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf(
			"The file did not arrive within %s. Try again.", limits.DurationName(h.cfg.Timeout)))
	case limits.BodyAbandoned:
		h.report(r, ClientGone, Detail{})
		return h.fail(499, r.Context().Err())
	}
	h.report(r, Failed, Detail{})
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
		h.report(r, JobBreach, Detail{Err: err})
		if h.cfg.ReportOnly {
			job = nil
		} else {
			h.report(r, BadJob, Detail{})
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
			h.report(r, InlineFailed, Detail{Err: ie})
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
		h.report(r, ClientGone, Detail{})
		return h.fail(499, r.Context().Err())
	case up.Context().Err() != nil:
		h.report(r, Timeout, Detail{})
		return h.refuse(w, r, http.StatusGatewayTimeout, fmt.Sprintf(
			"The app did not answer within %s, the most the service waits. Try again later or with a smaller file; if it keeps happening, contact the app's developer.",
			limits.DurationName(h.cfg.Timeout)))
	case rb.TooLarge():
		size := "larger than " + limits.LimitName(maxAnswer)
		if n := rb.DeclaredSize(); n > maxAnswer {
			size = limits.SizeName(n)
		}
		h.report(r, ResponseTooLarge, Detail{Size: rb.DeclaredSize(), Limit: maxAnswer})
		return h.refuse(w, r, http.StatusBadGateway, tooLargeMessage(size, maxAnswer))
	case aborted:
		h.report(r, ResponseIncomplete, Detail{})
		return h.refuse(w, r, http.StatusBadGateway,
			"The app's answer was cut off before it was complete. Try again; if it keeps happening, contact the app's developer.")
	case err != nil:
		// next refused or failed without an answer (reverse_proxy: the
		// app is unreachable); whatever it buffered is dropped and its
		// error goes on, as without limits.
		h.report(r, Failed, Detail{})
		return err
	case sb != nil && sb.Err() != nil:
		// the answer could not be kept on disk
		h.report(r, Failed, Detail{Err: sb.Err()})
		return h.fail(http.StatusBadGateway, sb.Err())
	}
	if job != nil {
		var answer io.Reader
		if sb != nil {
			answer = sb.Reader()
		} else {
			answer = bytes.NewReader(rb.(*limits.ResponseBuffer).Body())
		}
		if msg := h.checkAnswer(r, job, answer); msg != "" {
			h.report(r, ContractViolation, Detail{})
			return h.refuse(w, r, http.StatusBadGateway, msg)
		}
	}
	if sb != nil && sb.Spilled() {
		return h.spillAnswer(w, r, sb)
	}
	h.report(r, OK, Detail{})
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

// checkAnswer checks the app's answer to job, reports a breach, and
// returns the message that replaces the answer, "" when the answer goes on
// (it keeps the contract, or the mode is report).
func (h *Handler) checkAnswer(r *http.Request, job *contract.Job, answer io.Reader) string {
	_, err := job.CheckAnswer(answer)
	if err == nil {
		return ""
	}
	var b *contract.Breach
	if !errors.As(err, &b) {
		b = &contract.Breach{Job: job.Type, Rule: "it could not be read"}
	}
	h.report(r, AnswerBreach, Detail{Err: b})
	if h.cfg.ReportOnly {
		return ""
	}
	return b.Error()
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
