package emulator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// appRecorder keeps, for one call, what the app received from a gateway
// of the same process and what it answered, as the gateway handed the
// request to the app and read the answer: bounded like every call the
// console keeps (maxKeptBody of each body, keepHeader's bounds), and
// written as the exchange goes, so that the emulator, once it has read
// the gateway's answer, reads all the app said before it.
type appRecorder struct {
	mu        sync.Mutex
	ctx       context.Context
	method    string
	url       string
	reqHeader http.Header
	reqBody   []byte
	reqSize   int64

	status     int
	respHeader http.Header
	respBody   []byte
	respSize   int64
	err        string
}

// appSide is what the app received and answered for one call, as the
// console keeps it (see appRecorder).
type appSide struct {
	method, url           string
	reqHeader, respHeader http.Header
	reqBody, respBody     keptBody
	status                int
	err                   string
}

// ToApp records what the app receives and answers for the call, when the
// gateway hands r to the app (w is where the app's answer goes): it
// returns the writer and request to hand on instead, and end, which the
// gateway calls with what handing on returned. A nil call records
// nothing and returns w and r as they are, so a gateway calls ToApp only
// for the emulator's calls and its other requests cost nothing.
func (c *GatewayCall) ToApp(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func(error)) {
	if c == nil {
		return w, r, func(error) {}
	}
	a := &appRecorder{ctx: r.Context(), method: r.Method, url: r.URL.RequestURI(), reqHeader: keepHeader(r.Header)}
	c.v.mu.Lock()
	c.app = a
	c.v.mu.Unlock()
	if r.Body != nil && r.Body != http.NoBody {
		r = r.WithContext(r.Context())
		r.Body = &appRequestBody{rc: r.Body, a: a}
	}
	return &appWriter{ResponseWriter: w, a: a}, r, a.end
}

// snapshot copies what was recorded so far.
func (a *appRecorder) snapshot() *appSide {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &appSide{method: a.method, url: a.url, reqHeader: a.reqHeader, respHeader: a.respHeader, status: a.status, err: a.err,
		reqBody:  keptBody{data: append([]byte(nil), a.reqBody...), size: a.reqSize},
		respBody: keptBody{data: append([]byte(nil), a.respBody...), size: a.respSize}}
}

// end records how handing the request on ended: an error with no answer
// says why none came.
func (a *appRecorder) end(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.status != 0:
	case errors.Is(a.ctx.Err(), context.DeadlineExceeded):
		a.err = "The app did not answer before the gateway's time limit: the gateway stopped waiting."
	case err != nil:
		msg := err.Error()
		if len(msg) > maxKeptHeaderValue {
			msg = msg[:maxKeptHeaderValue]
		}
		a.err = "No answer came from the app: " + msg
	}
}

// keep appends the part of p that fits in maxKeptBody to *buf, and counts
// all of it in *size. a.mu is held.
func keep(buf *[]byte, size *int64, p []byte) {
	if room := maxKeptBody - len(*buf); room > 0 {
		*buf = append(*buf, p[:min(len(p), room)]...)
	}
	*size += int64(len(p))
}

// appRequestBody keeps the start of the request body as the gateway
// sends it to the app.
type appRequestBody struct {
	rc io.ReadCloser
	a  *appRecorder
}

func (b *appRequestBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.a.mu.Lock()
		keep(&b.a.reqBody, &b.a.reqSize, p[:n])
		b.a.mu.Unlock()
	}
	return n, err
}

func (b *appRequestBody) Close() error { return b.rc.Close() }

// appWriter keeps the app's answer as it is written, before passing it
// on: the status and headers once final, then the body.
type appWriter struct {
	http.ResponseWriter
	a *appRecorder
}

func (w *appWriter) WriteHeader(status int) {
	// An informational answer (100, 103) comes before the final one.
	if status >= 200 || status == http.StatusSwitchingProtocols {
		w.answered(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *appWriter) answered(status int) {
	w.a.mu.Lock()
	if w.a.status == 0 {
		w.a.status, w.a.respHeader = status, keepHeader(w.ResponseWriter.Header())
	}
	w.a.mu.Unlock()
}

func (w *appWriter) Write(p []byte) (int, error) {
	w.answered(http.StatusOK)
	w.a.mu.Lock()
	keep(&w.a.respBody, &w.a.respSize, p)
	w.a.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer beneath (the
// reverse proxy flushes through it).
func (w *appWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// appDetail is the app's side of a call in the API.
type appDetail struct {
	Request appRequestDetail `json:"request"`
	Answer  appAnswerDetail  `json:"answer"`
}

// appRequestDetail is the request as the app received it.
type appRequestDetail struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	messageDetail
}

// appAnswerDetail is the app's answer as the gateway received it: Status
// is 0 and Error says why when none came.
type appAnswerDetail struct {
	Status int `json:"status"`
	messageDetail
	Error string `json:"error,omitempty"`
}

// detail is the app's side as the API shows it, secrets masked.
func (s *appSide) detail() *appDetail {
	if s == nil {
		return nil
	}
	answer := detailOf(s.respHeader, s.respBody)
	if answer.Headers == nil {
		answer.Headers = map[string][]string{}
	}
	return &appDetail{
		Request: appRequestDetail{Method: s.method, URL: maskURL(s.url), messageDetail: detailOf(s.reqHeader, s.reqBody)},
		Answer:  appAnswerDetail{Status: s.status, messageDetail: answer, Error: s.err},
	}
}
