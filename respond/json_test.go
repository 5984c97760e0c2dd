package respond

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestError(t *testing.T) {
	rec := httptest.NewRecorder()
	Error(rec, http.StatusForbidden, `the "x" module key is <not> allowed & never was`)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("status %d", rec.Code)
	}
	const want = `{"error":{"message":"the \"x\" module key is \u003cnot\u003e allowed \u0026 never was"}}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
	h := rec.Header()
	if h.Get("Content-Type") != ContentTypeJSON || h.Get("Content-Length") != strconv.Itoa(len(want)) ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", h)
	}
	var b ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Message != `the "x" module key is <not> allowed & never was` {
		t.Fatalf("decoded %+v, %v", b, err)
	}
}

func TestJSONEndsWithOneNewline(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1}`, "{\"a\":1}\n"},
		{"{\"a\":1}\n", "{\"a\":1}\n"},
		{"", "\n"},
	} {
		in := []byte(tt.in)
		rec := httptest.NewRecorder()
		JSON(rec, http.StatusOK, in)
		if rec.Body.String() != tt.want || rec.Header().Get("Content-Length") != strconv.Itoa(len(tt.want)) {
			t.Errorf("JSON(%q) wrote %q, Content-Length %s", tt.in, rec.Body, rec.Header().Get("Content-Length"))
		}
		if string(in) != tt.in {
			t.Errorf("JSON changed the caller's bytes to %q", in)
		}
	}
	// A caller's slice with room to spare is not written into.
	buf := make([]byte, 0, 16)
	buf = append(buf, `{"a":1}`...)
	JSON(httptest.NewRecorder(), http.StatusOK, buf)
	if buf[:cap(buf)][len(buf)] == '\n' {
		t.Fatal("JSON wrote past the caller's slice")
	}
}

func TestJSONAs(t *testing.T) {
	rec := httptest.NewRecorder()
	JSONAs(rec, http.StatusOK, "application/json", []byte(`{}`))
	if rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != "{}\n" {
		t.Fatalf("%v %q", rec.Header(), rec.Body)
	}
}

func TestMarshalJSON(t *testing.T) {
	out, err := MarshalJSON(map[string]string{"link": "https://a.example/?a=1&b=2"})
	if err != nil || string(out) != "{\"link\":\"https://a.example/?a=1\\u0026b=2\"}\n" {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := MarshalJSON(func() {}); err == nil {
		t.Fatal("a func was encoded")
	}
}
