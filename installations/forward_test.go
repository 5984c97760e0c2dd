package installations

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedToApp are the headers appRequest may give the app.
var allowedToApp = []string{"Content-Type", "Content-Length", "X-Service-App-Token", "Traceparent", "Tracestate"}

const goodTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// checkAppRequest checks what appRequest built from r: POST of body to
// path with no query, the allowed headers only, no trailer, r's context.
func checkAppRequest(t *testing.T, r, out *http.Request, path, body string) {
	t.Helper()
	if out.Method != http.MethodPost || out.URL.String() != path || out.RequestURI != path || out.URL.RawQuery != "" {
		t.Errorf("%s %s (%q), want POST %s", out.Method, out.URL, out.RequestURI, path)
	}
	for name := range out.Header {
		if !slices.Contains(allowedToApp, name) {
			t.Errorf("the app gets %s: %q", name, out.Header[name])
		}
	}
	if out.Trailer != nil || out.Close || len(out.TransferEncoding) != 0 || out.Form != nil {
		t.Errorf("trailer %v, close %v, transfer encoding %v, form %v", out.Trailer, out.Close, out.TransferEncoding, out.Form)
	}
	got, _ := io.ReadAll(out.Body)
	if string(got) != body || out.ContentLength != int64(len(body)) || out.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Errorf("body %q (%d, %q), want %q", got, out.ContentLength, out.Header.Get("Content-Length"), body)
	}
	if out.Context() != r.Context() || out.Host != r.Host || out.RemoteAddr != r.RemoteAddr {
		t.Errorf("context, Host %q or remote address %q not the caller's connection's", out.Host, out.RemoteAddr)
	}
}

// callerKey marks the caller's context.
type callerKey struct{}

// TestAppRequestIsTheGateways: the request the app is told with holds
// nothing of the caller's but a well-formed trace context.
func TestAppRequestIsTheGateways(t *testing.T) {
	r := httptest.NewRequest("POST", "/Installed/?appSecret=forged&userId=666", strings.NewReader(`{"forged":true}`))
	r = r.WithContext(context.WithValue(r.Context(), callerKey{}, "the caller's context"))
	for k, v := range map[string]string{
		"Authorization": "Bearer forged", "Cookie": "session=forged", "Forwarded": "for=10.0.0.1",
		"X-Http-Method-Override": "DELETE", "Connection": "Upgrade, X-Service-App-Token", "Upgrade": "websocket",
		"X-Service-App-Token": "forged", "X-Service-Domain": "evil.example", "Content-Type": "text/plain",
		"Content-Encoding": "gzip", "Transfer-Encoding": "chunked", "Expect": "100-continue",
		"Traceparent": goodTraceparent, "Tracestate": "vendor=opaque",
	} {
		r.Header.Set(k, v)
	}
	r.Trailer = http.Header{"X-Service-Domain": {"evil.example"}}
	r.Close = true
	body := `{"event":"installed"}`
	out := appRequest(r, "/installed", []byte(body), "X-Service-App-Token", "the-token")
	checkAppRequest(t, r, out, "/installed", body)
	for name, want := range map[string]string{"Content-Type": "application/json", "X-Service-App-Token": "the-token",
		"Traceparent": goodTraceparent, "Tracestate": "vendor=opaque"} {
		if got := out.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
	// No token header for an uninstall; a malformed or repeated trace
	// context is left out.
	for _, tp := range [][]string{{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, {goodTraceparent, goodTraceparent},
		{strings.ToUpper(goodTraceparent)}, {goodTraceparent + "-extra"}, {"forged"}} {
		r.Header["Traceparent"] = tp
		out := appRequest(r, "/uninstall", []byte(body), "X-Service-App-Token", "")
		checkAppRequest(t, r, out, "/uninstall", body)
		if len(out.Header) != 2 {
			t.Errorf("traceparent %q: the app gets %v", tp, out.Header)
		}
	}
	r.Header.Set("Traceparent", goodTraceparent)
	r.Header.Set("Tracestate", "a=b\x01")
	if out := appRequest(r, "/installed", []byte(body), "", "the-token"); out.Header.Get("Tracestate") != "" || out.Header.Get("Traceparent") == "" {
		t.Errorf("a tracestate with a control character went on: %v", out.Header)
	}
}

// FuzzAppRequest: whatever the caller's trace headers and query, the
// request to the app has no query and only the allowed headers.
func FuzzAppRequest(f *testing.F) {
	f.Add(goodTraceparent, "vendor=opaque", "appSecret=forged")
	f.Add("00-00000000000000000000000000000000-0000000000000000-00", strings.Repeat("a", 513), "")
	f.Add("zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x\r\ny: z", "a=%zz&&")
	f.Fuzz(func(t *testing.T, traceparent, tracestate, query string) {
		r := httptest.NewRequest("POST", "/installed", strings.NewReader("{}"))
		r.URL.RawQuery = query
		r.Header["Traceparent"] = []string{traceparent}
		r.Header["Tracestate"] = []string{tracestate}
		out := appRequest(r, "/installed", []byte("{}"), "X-Service-App-Token", "tok")
		checkAppRequest(t, r, out, "/installed", "{}")
		if v := out.Header.Get("Traceparent"); v != "" && (len(v) != 55 || strings.ContainsAny(v, "\r\n ")) {
			t.Errorf("traceparent %q went on", v)
		}
		if v := out.Header.Get("Tracestate"); len(v) > 512 || strings.ContainsAny(v, "\r\n\x00") {
			t.Errorf("tracestate %q went on", v)
		}
	})
}

// informationalApp answers status (a 1xx) and nothing after it, as
// reverse_proxy does with a 101 the request did not ask for; with err it
// returns that too.
type informationalApp struct {
	status int
	err    error
}

func (a informationalApp) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	if a.status != 0 {
		w.WriteHeader(a.status)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if _, _, err := http.NewResponseController(w).Hijack(); err == nil {
		return errors.New("a lifecycle call's answer could be hijacked")
	}
	return a.err
}

// TestHandlerInformationalIsNoAcknowledgement: an app that answers only a
// 1xx (101 included), or nothing, does not acknowledge a call: 502 with a
// message naming the app's failure, nothing stored; the 1xx is not passed
// on. An app that gives no answer (a proxy's error) makes Serve return a
// *NoAnswer whose message says so.
func TestHandlerInformationalIsNoAcknowledgement(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	for _, tt := range []struct {
		app  informationalApp
		want string
	}{
		{informationalApp{status: http.StatusSwitchingProtocols}, "it answered only 101 Switching Protocols"},
		{informationalApp{status: http.StatusEarlyHints}, "it answered only 103 Early Hints"},
		{informationalApp{}, "it answered with no final status"},
	} {
		w := httptest.NewRecorder()
		if err := l.h.Serve(w, httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("42", "acme", "s3cret-42"))), tt.app); err != nil {
			t.Fatal(err)
		}
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "The app did not acknowledge the installed call: "+tt.want) ||
			l.book.Len() != 0 {
			t.Fatalf("%d: %d %s, %d held", tt.app.status, w.Code, w.Body, l.book.Len())
		}
	}
	w := httptest.NewRecorder()
	err := l.h.Serve(w, httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("42", "acme", "s3cret-42"))),
		informationalApp{err: io.ErrUnexpectedEOF})
	var none *NoAnswer
	if !errors.As(err, &none) || !errors.Is(err, io.ErrUnexpectedEOF) || w.Code != http.StatusOK || w.Body.Len() != 0 || l.book.Len() != 0 ||
		none.Message() != "The app did not acknowledge the installed call: it closed the connection without an answer. Nothing was changed; the service may send the call again." {
		t.Fatalf("no answer: %v, %d %s, %d held", err, w.Code, w.Body, l.book.Len())
	}
	if got := strings.Join(l.reports, ","); got != "not_acknowledged,not_acknowledged,not_acknowledged,not_acknowledged" {
		t.Errorf("reports = %s", got)
	}
}
