package queue

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/servicegate/servicegate/spans"
)

// Headers the queue adds to every attempt.
const (
	// HeaderDeliveryID carries the delivery's ID, the same on every
	// attempt, so the app can tell a repeat from a new delivery.
	HeaderDeliveryID = "X-Servicegate-Delivery-Id"
	// HeaderAttempt numbers the attempts from 1.
	HeaderAttempt = "X-Servicegate-Attempt"
)

// hopHeaders are connection-level headers that never go on to the app.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
}

// HTTPSender posts deliveries to the app.
type HTTPSender struct {
	// Client sends the attempts; default: a client that does not follow
	// redirects.
	Client *http.Client
	// Timeout bounds one attempt, answer included. Default 30s.
	Timeout time.Duration
	// Spans, when set, makes each attempt a span under the trace of the
	// request that queued the delivery (Meta.Traceparent).
	Spans *spans.Later
	// Prepare, when set, may change the headers of each attempt once the
	// stored ones are copied: a credential fresh at send time, say.
	Prepare func(ctx context.Context, m Meta, h http.Header)
}

// Send implements Sender: the delivery's method, URI, headers (with the
// delivery ID and attempt number) and exact body bytes, to Meta.To. The
// app gets the W3C trace context of the attempt, else the delivery's.
func (s *HTTPSender) Send(ctx context.Context, m Meta, h http.Header, body []byte) (res Result) {
	ctx, span := s.Spans.Start(ctx, "servicegate.webhook.attempt", m.Traceparent)
	defer func() {
		span.Int("servicegate.webhook.attempt", int64(m.Attempts))
		if res.Status != 0 {
			span.Int("http.response.status_code", int64(res.Status))
		}
		if !res.Delivered() {
			span.Fail("not delivered")
		}
		span.End()
	}()
	span.String("servicegate.webhook.delivery_id", m.ID)
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, m.Method, strings.TrimSuffix(m.To, "/")+m.URI, bytes.NewReader(body))
	if err != nil {
		return Result{Err: err}
	}
	req.Header = h.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	for _, name := range hopHeaders {
		req.Header.Del(name)
	}
	if s.Prepare != nil {
		s.Prepare(ctx, m, req.Header)
	}
	req.Header.Set(HeaderDeliveryID, m.ID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(m.Attempts))
	if span.Recording() {
		spans.Inject(ctx, req.Header)
	} else if m.Traceparent != "" {
		req.Header.Set("Traceparent", m.Traceparent)
	}
	if host := h.Get("Host"); host != "" {
		req.Host = host
		req.Header.Del("Host")
	}
	client := s.Client
	if client == nil {
		client = noRedirects
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{Err: fmt.Errorf("sending to the app: %w", err)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return Result{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// noRedirects sends to the app without following redirects, keeping
// enough idle connections for DefaultConcurrency attempts at once.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     sendTransport(),
}

func sendTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4 * DefaultConcurrency
	return t
}

// retryAfter reads a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(min(secs, 7*24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
