package emulator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGatewayCallToApp: what the app receives and answers is kept as it
// passes (status, headers, body cut at 64 KiB with its size), an
// informational answer is not taken for the final one, secrets are masked
// in the detail, and a call that got no answer says why.
func TestGatewayCallToApp(t *testing.T) {
	v := &Verdicts{}
	id, c := v.expect()
	in := httptest.NewRequest("POST", "http://localhost/file-format?x=1&token=abcdefghijklmnop", strings.NewReader(strings.Repeat("j", 70<<10)))
	in.Header.Set(CallHeader, id)
	in.Header.Set("X-Service-App-Token", "app-token-0123456789")
	call := v.Take(in)
	if call != c {
		t.Fatal("the call was not taken")
	}
	rec := httptest.NewRecorder()
	w, r, end := call.ToApp(rec, in)
	if n, _ := io.Copy(io.Discard, r.Body); n != 70<<10 {
		t.Fatalf("the app read %d bytes", n)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusEarlyHints)
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, "Traceback: boom")
	end(nil)
	verdict, side, ok := v.done(id, c)
	if !ok || verdict.Outcome != OutcomeAccepted || side == nil {
		t.Fatalf("done: %+v %v %v", verdict, side, ok)
	}
	d := side.detail()
	if d.Request.Method != "POST" || d.Request.URL != "/file-format?x=1&token=%E2%80%A2%E2%80%A2%E2%80%A2%E2%80%A2mnop" ||
		d.Request.Size != 70<<10 || !d.Request.Cut || len(d.Request.Body) != 64<<10 ||
		d.Request.Headers["X-Service-App-Token"][0] != "••••6789" || d.Request.Headers[CallHeader] != nil {
		t.Fatalf("the request: %s %s %d %v %v", d.Request.Method, d.Request.URL, d.Request.Size, d.Request.Cut, d.Request.Headers)
	}
	if d.Answer.Status != 500 || d.Answer.Body != "Traceback: boom" || d.Answer.Size != 15 || d.Answer.Cut ||
		d.Answer.Headers["Content-Type"][0] != "text/plain" || d.Answer.Error != "" {
		t.Fatalf("the answer: %+v", d.Answer)
	}
	if rec.Body.String() != "Traceback: boom" {
		t.Fatalf("what went on: %d %q", rec.Code, rec.Body)
	}

	// No answer before the gateway's time limit.
	id, c = v.expect()
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	in = httptest.NewRequest("GET", "http://localhost/", nil).WithContext(ctx)
	in.Header.Set(CallHeader, id)
	_, _, end = v.Take(in).ToApp(httptest.NewRecorder(), in)
	<-ctx.Done()
	end(errors.New("context deadline exceeded"))
	_, side, _ = v.done(id, c)
	if d := side.detail(); d.Answer.Status != 0 || !strings.Contains(d.Answer.Error, "time limit") || d.Answer.Headers == nil {
		t.Fatalf("a late answer: %+v", d.Answer)
	}

	// A call the gateway never handed on has no app side; nil records nothing.
	id, c = v.expect()
	in = httptest.NewRequest("GET", "http://localhost/", nil)
	in.Header.Set(CallHeader, id)
	v.Take(in).Refused("no")
	if _, side, _ := v.done(id, c); side != nil || side.detail() != nil {
		t.Fatalf("a refused call's app side: %+v", side)
	}
	var none *GatewayCall
	rec = httptest.NewRecorder()
	if w, r, _ := none.ToApp(rec, in); w != rec || r != in {
		t.Fatal("a nil call changed the writer or the request")
	}
}
