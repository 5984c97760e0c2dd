package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// callMeta says what a request the emulator sends is, for the console:
// its kind, organization and module, and what it replays. The recorder
// writes the call's id into it.
type callMeta struct {
	kind, org, module string
	replayOf          int64
	tamper            string

	// id is written by the recorder, read once the call is done.
	id *atomic.Int64
}

type callMetaKey struct{}

// withCall returns ctx marking the requests made with it as one call of
// the console (see callMeta).
func withCall(ctx context.Context, m callMeta) context.Context {
	m.id = new(atomic.Int64)
	return context.WithValue(ctx, callMetaKey{}, &m)
}

// recordedID is the console's id of the last call made with ctx (see
// withCall), 0 when none was recorded.
func recordedID(ctx context.Context) int64 {
	m, _ := ctx.Value(callMetaKey{}).(*callMeta)
	if m == nil {
		return 0
	}
	return m.id.Load()
}

// client is the client the emulator sends its calls with: c when given,
// else one whose calls the console records (http.DefaultClient's
// transport when the console is off).
func (s *Server) client(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	if s.console == nil {
		return http.DefaultClient
	}
	return s.console.client
}

// recorder is the transport of the console's client: it sends each
// request marked with withCall with the gateway's correlation id, and
// adds the call to the log once its answer has been read.
type recorder struct {
	c    *console
	base http.RoundTripper
}

func (t *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	meta, _ := req.Context().Value(callMetaKey{}).(*callMeta)
	if meta == nil {
		return t.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	e := &callRecord{
		start: t.c.now(), kind: meta.kind, org: meta.org, module: meta.module,
		method: req.Method, url: req.URL.Redacted(), sent: true,
		reqHeader: keepHeader(req.Header), reqBody: keepBody(body),
		replayOf: meta.replayOf, tamper: meta.tamper,
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	var id string
	var gc *GatewayCall
	if g := t.c.gateway; g != nil {
		id, gc = g.expect()
		out.Header.Set(CallHeader, id)
	}
	finish := func(resp *http.Response, answer []byte, err error) {
		e.duration = t.c.now().Sub(e.start)
		if resp != nil {
			e.status = resp.StatusCode
			e.respHeader = keepHeader(resp.Header)
		}
		e.respBody = keepBody(answer)
		if err != nil {
			e.err = err.Error()
		}
		e.verdict = Verdict{Outcome: OutcomeUnknown}
		if gc != nil {
			if v, app, ok := t.c.gateway.done(id, gc); ok {
				e.verdict, e.app = v, app
			}
		}
		if e.verdict.From == "" {
			if msg := errorMessage(answer); msg != "" && e.status >= 400 {
				e.verdict = Verdict{Outcome: OutcomeRefused, Reason: msg, From: "answer"}
			}
		}
		meta.id.Store(t.c.log.add(e))
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		finish(nil, nil, err)
		return nil, err
	}
	resp.Body = &recordedBody{rc: resp.Body, done: func(answer []byte, err error) { finish(resp, answer, err) }}
	return resp, nil
}

// recordedBody is an answer's body that keeps what is read of it (up to
// the most any caller reads, maxAnswer bytes, and a little more to tell
// a larger answer) and adds the call to the log at its end or when it is
// closed.
type recordedBody struct {
	rc   io.ReadCloser
	buf  bytes.Buffer
	once sync.Once
	done func([]byte, error)
}

// maxRecordedAnswer caps what the recorder keeps of an answer while it is
// read, for the size it reports: the whole of any answer a caller reads
// (file jobs read up to the service's 5 MiB).
const maxRecordedAnswer = maxJobAnswer + 1

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if room := maxRecordedAnswer - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(n, room)])
	}
	if err == io.EOF {
		b.end(nil)
	} else if err != nil {
		b.end(err)
	}
	return n, err
}

func (b *recordedBody) Close() error {
	err := b.rc.Close()
	b.end(nil)
	return err
}

func (b *recordedBody) end(err error) {
	b.once.Do(func() { b.done(b.buf.Bytes(), err) })
}

// errorMessage is the error.message of a JSON answer, or "".
func errorMessage(answer []byte) string {
	var body struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer, &body) != nil || body.Error == nil {
		return ""
	}
	return body.Error.Message
}

// answered serves one of the emulator's own endpoints, recording the
// exchange for the console as kind.
func (s *Server) answered(w http.ResponseWriter, r *http.Request, kind string, serve http.HandlerFunc) {
	c := s.console
	if c == nil {
		serve(w, r)
		return
	}
	e := &callRecord{start: c.now(), kind: kind, method: r.Method, url: requestURL(r), reqHeader: keepHeader(r.Header)}
	note := &answerNote{}
	in := &keptReader{rc: r.Body}
	r = r.WithContext(context.WithValue(r.Context(), answerNoteKey{}, note))
	r.Body = in
	rw := &keptWriter{ResponseWriter: w}
	// Recorded even when the endpoint panics to reset the stream (an
	// emulated outage without hijacking).
	defer func() {
		e.duration = c.now().Sub(e.start)
		e.status = rw.status
		if rw.status == 0 {
			e.status = http.StatusOK // nothing written: net/http answers 200
		}
		e.respHeader = keepHeader(rw.Header())
		e.reqBody = keptBody{data: bytes.Clone(in.buf.Bytes()), size: in.size}
		e.respBody = keptBody{data: bytes.Clone(rw.buf.Bytes()), size: rw.size}
		e.org = note.org
		if note.outage {
			e.status = 0
			e.err = "the connection was closed with no answer (an outage set in the emulator's console)"
		}
		e.verdict = Verdict{Outcome: OutcomeUnknown}
		c.log.add(e)
		if note.hijacked != nil {
			note.hijacked.Close()
		}
	}()
	serve(rw, r)
}

// requestURL is the address a request was sent to, as the client wrote
// it, with any password left out.
func requestURL(r *http.Request) string {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	if r.TLS != nil {
		u.Scheme = "https"
	}
	return u.Redacted()
}

// answerNote is what an endpoint of the emulator tells the console about
// the exchange it answers.
type answerNote struct {
	org string
	// outage: the endpoint closed the connection with no answer.
	outage bool
	// hijacked is that connection, closed once the call is recorded.
	hijacked net.Conn
}

type answerNoteKey struct{}

// noteOrganization tells the console which organization the exchange of
// r is about.
func noteOrganization(r *http.Request, org string) {
	if n, _ := r.Context().Value(answerNoteKey{}).(*answerNote); n != nil {
		n.org = org
	}
}

// keptReader keeps the start of a request body as it is read.
type keptReader struct {
	rc   io.ReadCloser
	buf  bytes.Buffer
	size int64
}

func (k *keptReader) Read(p []byte) (int, error) {
	n, err := k.rc.Read(p)
	if room := maxKeptBody - k.buf.Len(); room > 0 {
		k.buf.Write(p[:min(n, room)])
	}
	k.size += int64(n)
	return n, err
}

func (k *keptReader) Close() error { return k.rc.Close() }

// keptWriter keeps the status and the start of an answer as it is
// written.
type keptWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
	size   int64
}

func (k *keptWriter) WriteHeader(status int) {
	if k.status == 0 {
		k.status = status
	}
	k.ResponseWriter.WriteHeader(status)
}

func (k *keptWriter) Write(p []byte) (int, error) {
	if k.status == 0 {
		k.status = http.StatusOK
	}
	if room := maxKeptBody - k.buf.Len(); room > 0 {
		k.buf.Write(p[:min(len(p), room)])
	}
	k.size += int64(len(p))
	return k.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (k *keptWriter) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// hostOf is the host name of a Host header, lowercase, without port,
// brackets or a final dot.
func hostOf(host string) string {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.Trim(host, "[]"), ".")
}

// since is a call's time in the API.
func apiTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
