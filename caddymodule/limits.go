package caddymodule

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

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
)

// The limits of the service's module calls (custom file format, file
// pre-export): 5 MB each way, read as 5 MiB, and 2 minutes for the answer.
const (
	defaultMaxRequestSize  = 5 << 20
	defaultMaxResponseSize = 5 << 20
	defaultLimitsTimeout   = 2 * time.Minute
)

// ServiceLimits holds the module endpoints of an app (custom file format:
// parse-file and build-file; file pre-export) to the limits the service
// sets on those calls, and answers every breach with a JSON error
// {"error":{"message":…}} that the service shows to its user:
//
//   - a request body over max_request_size gets 413, decided from
//     Content-Length before reading when there is one; a body of unknown
//     length is read up to the limit before the app is called, so a
//     refused request never reaches the app. A request within the limit
//     reaches the app whole, with its Content-Length set;
//   - a response over max_response_size gets 502, and no part of it
//     reaches the client: the app's answer is buffered (one response per
//     request at most) and sent only once complete and within the limit;
//   - no complete answer within timeout gets 504, and the request to the
//     app is cancelled: the handlers after this one (reverse_proxy) see
//     the request's context end.
//
// Handlers after this one must stop when the request's context ends, as
// reverse_proxy does: the timeout is carried by that context.
//
// With contract, the exchange is also checked against the module contract
// of the service (see package contract): a malformed job gets 400, an
// answer that breaks the contract 502 naming the first broken string. With
// spill, answers over max_response_size (up to spill_max_size, kept on
// disk, or in Redis with the servicegate redis option so that any instance
// serves the link) reach the service with their payloads by signed URL; with inline,
// payloads the service sends by URL reach the app inline.
type ServiceLimits struct {
	// The largest request body the app accepts, in bytes. Default: 5 MiB
	// (5242880). In the Caddyfile, sizes are written as Caddy writes
	// them: 5MiB, 500KB, 1048576.
	MaxRequestSize int64 `json:"max_request_size,omitempty"`

	// The largest response body the app may give, in bytes. Default: 5 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// How long the app may take to answer, from the moment the request
	// reaches this handler to the last byte of the app's response.
	// Default: 2m.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// The module whose contract the exchanges keep: "custom-file-format"
	// (parse-file and build-file jobs) or "file-pre-export". When set, a
	// job that breaks the contract gets 400 and never reaches the app, and
	// the app's answer is checked against its job (string records, plural
	// forms, statuses, customData, previewIds, content, pre-export's "same
	// strings, same uniqIds"); a breach is logged and, in mode enforce,
	// answered with 502 and a JSON message naming the first broken string.
	// The app's own {"error":{"message":…}} answer passes untouched.
	// Default: no check.
	Contract string `json:"contract,omitempty"`

	// What a breach of the contract does: "enforce" (the default) replaces
	// the answer with a JSON error; "report" only logs it, for the app's
	// developer, and lets the answer through.
	Mode string `json:"mode,omitempty"`

	// Hands answers over max_response_size to the service by URL instead
	// of refusing them. Needs contract. Default: off.
	Spill *SpillOptions `json:"spill,omitempty"`

	// Fetches payloads the service sends by URL and hands them to the app
	// inline. Needs contract. Default: off.
	Inline *InlineOptions `json:"inline,omitempty"`

	logger  *zap.Logger
	counts  *limitsCounters
	store   contract.Payloads
	inliner *contract.Inliner
	// origin is the base of spill links when spill_base_url is unset:
	// service_app sets it to its own, else it is the site's.
	origin func(*http.Request) (string, error)
}

// CaddyModule returns the Caddy module information.
func (ServiceLimits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_limits",
		New: func() caddy.Module { return new(ServiceLimits) },
	}
}

// Provision fills in the defaults and registers the metrics.
func (l *ServiceLimits) Provision(ctx caddy.Context) error {
	l.logger = ctx.Logger()
	if l.MaxRequestSize == 0 {
		l.MaxRequestSize = defaultMaxRequestSize
	}
	if l.MaxResponseSize == 0 {
		l.MaxResponseSize = defaultMaxResponseSize
	}
	if l.Timeout == 0 {
		l.Timeout = caddy.Duration(defaultLimitsTimeout)
	}
	l.counts = registerLimitsMetrics(ctx.GetMetricsRegistry())
	if l.Spill != nil {
		if err := l.provisionSpill(ctx); err != nil {
			return err
		}
	}
	if l.Inline != nil {
		l.provisionInline()
	}
	return nil
}

// Validate refuses limits that would refuse everything.
func (l *ServiceLimits) Validate() error {
	if l.MaxRequestSize < 0 {
		return fmt.Errorf("service_limits: max_request_size must be positive, got %d", l.MaxRequestSize)
	}
	if l.MaxResponseSize < 0 {
		return fmt.Errorf("service_limits: max_response_size must be positive, got %d", l.MaxResponseSize)
	}
	if l.Timeout < 0 {
		return fmt.Errorf("service_limits: timeout must be positive, got %s", time.Duration(l.Timeout))
	}
	if err := l.validateContract(); err != nil {
		return err
	}
	if l.Spill != nil {
		if err := l.validateSpill(); err != nil {
			return err
		}
	}
	if l.Inline != nil && len(l.Inline.Hosts) == 0 {
		return errors.New("service_limits: inline needs inline_hosts, the hosts payloads may be fetched from")
	}
	return nil
}

// ServeHTTP buffers the request body within its limit, calls next under
// the timeout with its answer buffered within the response limit, and
// sends that answer only when it is complete and within every limit.
func (l *ServiceLimits) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if l.Spill != nil && strings.HasPrefix(r.URL.Path, l.Spill.Path) {
		return l.serveSpilled(w, r)
	}
	if r.ContentLength > l.MaxRequestSize {
		l.counts.inc(outcomeRequestTooLarge)
		return refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The file is too large for this app: the request is %s and the app accepts at most %s. Try a smaller file, or split it into several files.",
			limits.SizeName(r.ContentLength), limits.LimitName(l.MaxRequestSize)))
	}

	timeout := time.Duration(l.Timeout)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	// Without a contract, a request of declared length (within the limit,
	// checked above) goes to the app as it arrives: net/http holds it to
	// that length, and a client that stops short leaves the app with a
	// request cut off before its length, never a shorter complete one. A
	// request of unknown length, or one the contract must read, is read
	// whole first.
	stream := l.Contract == "" && r.ContentLength > 0
	var body *limits.Body
	var err error
	if !stream {
		body, err = l.readRequest(w, r, ctx)
		if body != nil {
			defer body.Release()
		}
		if err != nil {
			return l.refuseRequest(w, r, err)
		}
	}

	var job *contract.Job
	if l.Contract != "" {
		var done bool
		if job, done, err = l.parseJob(w, r, body); done {
			return err
		}
		if job != nil && l.Inline != nil && body != nil && (job.StringsURL != "" || job.ContentURL != "") {
			if ie := l.inline(ctx, job, body); ie != nil {
				l.counts.inc(outcomeInlineFailed)
				l.logger.Info("job payload not inlined", zap.String("path", r.URL.Path), zap.Int("status", ie.Status))
				return refuse(w, r, ie.Status, ie.Message)
			}
			r.Header.Set("Content-Length", strconv.Itoa(body.Len()))
		}
		// The answer is read to be checked: ask the app for it as it is,
		// not compressed.
		r.Header.Del("Accept-Encoding")
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

	var rb answerBuffer
	var sb *limits.SpillBuffer
	maxAnswer := l.MaxResponseSize
	if l.Spill != nil {
		maxAnswer = l.Spill.MaxSize
		sb = limits.NewSpillBuffer(w.Header(), l.MaxResponseSize, maxAnswer, l.Spill.Dir)
		defer sb.Close()
		rb = sb
	} else {
		mb := responseBuffers.Get().(*limits.ResponseBuffer)
		defer func() {
			// The answer is sent or dropped: a mapped one is unmapped, a
			// large heap one left to the garbage collector.
			mb.Release()
			responseBuffers.Put(mb)
		}()
		mb.Reset(w.Header(), l.MaxResponseSize)
		rb = mb
	}

	aborted, err := serveAborting(rb, up, next)

	switch {
	case r.Context().Err() != nil:
		// The client went away: nobody is left to answer.
		l.counts.inc(outcomeClientGone)
		return caddyhttp.Error(499, r.Context().Err())
	case ctx.Err() != nil:
		l.counts.inc(outcomeTimeout)
		l.logger.Info("app did not answer in time", zap.String("path", r.URL.Path), zap.Duration("timeout", timeout))
		return refuse(w, r, http.StatusGatewayTimeout, fmt.Sprintf(
			"The app did not answer within %s, the most the service waits. Try again later or with a smaller file; if it keeps happening, contact the app's developer.",
			limits.DurationName(timeout)))
	case rb.TooLarge():
		l.counts.inc(outcomeResponseTooLarge)
		size := "larger than " + limits.LimitName(maxAnswer)
		if n := rb.DeclaredSize(); n > maxAnswer {
			size = limits.SizeName(n)
		}
		l.logger.Info("app answer over the size limit", zap.String("path", r.URL.Path), zap.Int64("max_response_size", maxAnswer), zap.Int64("declared_size", rb.DeclaredSize()))
		return refuse(w, r, http.StatusBadGateway, fmt.Sprintf(
			"The app's answer is too large: it is %s and the service accepts at most %s. Try a smaller file; if it keeps happening, contact the app's developer.",
			size, limits.LimitName(maxAnswer)))
	case aborted:
		l.counts.inc(outcomeResponseIncomplete)
		l.logger.Info("app answer cut off", zap.String("path", r.URL.Path))
		return refuse(w, r, http.StatusBadGateway,
			"The app's answer was cut off before it was complete. Try again; if it keeps happening, contact the app's developer.")
	case err != nil:
		// next refused or failed without an answer (reverse_proxy: the
		// app is unreachable); whatever it buffered is dropped and its
		// error goes on to Caddy's error handling, as without limits.
		l.counts.inc(outcomeError)
		return err
	}

	if sb != nil && sb.Err() != nil {
		// the answer could not be kept on disk
		l.counts.inc(outcomeError)
		l.logger.Error("app answer lost", zap.String("path", r.URL.Path), zap.Error(sb.Err()))
		return caddyhttp.Error(http.StatusBadGateway, sb.Err())
	}

	if job != nil {
		var answer io.Reader
		if sb != nil {
			answer = sb.Reader()
		} else {
			answer = bytes.NewReader(rb.(*limits.ResponseBuffer).Body())
		}
		if _, msg := l.checkAnswer(r, job, answer); msg != "" {
			l.counts.inc(outcomeContract)
			return refuse(w, r, http.StatusBadGateway, msg)
		}
	}

	if sb != nil && sb.Spilled() {
		return l.spillAnswer(w, r, sb)
	}

	l.counts.inc(outcomeOK)
	// A write error means the client went away; there is no one to tell.
	_ = rb.WriteTo(w, r.Method == http.MethodHead)
	return nil
}

// readRequest reads the request body up to the limit, with the read
// deadline of the connection at the timeout. It returns nil for a request
// without a body.
func (l *ServiceLimits) readRequest(w http.ResponseWriter, r *http.Request, ctx context.Context) (*limits.Body, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, nil
	}
	deadline, _ := ctx.Deadline()
	return limits.ReadRequest(w, r, l.MaxRequestSize, deadline, nil)
}

// refuseRequest answers a request whose body could not be read whole.
func (l *ServiceLimits) refuseRequest(w http.ResponseWriter, r *http.Request, err error) error {
	switch limits.FailureOf(r, err) {
	case limits.BodyTooLarge:
		l.counts.inc(outcomeRequestTooLarge)
		return refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"The file is too large for this app: the request is larger than %s, the most the app accepts. Try a smaller file, or split it into several files.",
			limits.LimitName(l.MaxRequestSize)))
	case limits.BodyTooSlow:
		l.counts.inc(outcomeRequestTimeout)
		return refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf(
			"The file did not arrive within %s. Try again.", limits.DurationName(time.Duration(l.Timeout))))
	case limits.BodyAbandoned:
		l.counts.inc(outcomeClientGone)
		return caddyhttp.Error(499, r.Context().Err())
	default:
		l.counts.inc(outcomeError)
		return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
	}
}

// serveAborting calls next and reports whether it aborted its answer with
// http.ErrAbortHandler, as reverse_proxy does when the response it is
// copying fails half-way (the app's answer is cut off, too large, or out
// of time). Since the answer is buffered, the client has seen none of it,
// and this handler can still answer properly. Other panics go on.
func serveAborting(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) (aborted bool, err error) {
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
// a limits.ResponseBuffer, or a limits.SpillBuffer when spill is on.
type answerBuffer interface {
	http.ResponseWriter
	Status() int
	TooLarge() bool
	DeclaredSize() int64
	WriteTo(w http.ResponseWriter, head bool) error
}

var (
	_ caddy.Provisioner           = (*ServiceLimits)(nil)
	_ answerBuffer                = (*limits.ResponseBuffer)(nil)
	_ answerBuffer                = (*limits.SpillBuffer)(nil)
	_ caddy.Validator             = (*ServiceLimits)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceLimits)(nil)
)
