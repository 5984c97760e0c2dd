package caddymodule

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRefuseWritesJSONWithoutErrorRoutes(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if err := refuse(rec, req, http.StatusForbidden, `the "x" module key is not allowed`); err != nil {
		t.Fatalf("refuse returned %v, want nil after writing the answer", err)
	}
	if rec.Code != http.StatusForbidden {
		t.Fatalf("status %d, want 403", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if !strings.HasSuffix(rec.Body.String(), "}\n") {
		t.Fatalf("body %q does not end with a newline", rec.Body)
	}
	var body errorBody
	if err := json.NewDecoder(rec.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Message != `the "x" module key is not allowed` {
		t.Fatalf("message %q", body.Error.Message)
	}
}

func TestE2EHarness(t *testing.T) {
	tester := startCaddy(t, `
localhost:{port} {
	respond "harness ok"
}
`)
	resp, err := tester.Client.Get(e2eURL("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "harness ok" {
		t.Fatalf("body %q", b)
	}
}

// TestPaymentRequiredAnswers: the 402 page carries the security headers of
// every servicegate page, and its JSON ends with a newline.
func TestPaymentRequiredAnswers(t *testing.T) {
	page := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	writePaymentRequired(page, r, "Subscribe to continue.", "https://service.example/pay?a=1&b=2")
	if page.Code != http.StatusPaymentRequired || page.Header().Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" ||
		page.Header().Get("X-Frame-Options") != "DENY" || page.Header().Get("Location") != "https://service.example/pay?a=1&b=2" ||
		!strings.Contains(page.Body.String(), `<a href="https://service.example/pay?a=1&amp;b=2">Subscribe</a>`) {
		t.Fatalf("page: %d %v\n%s", page.Code, page.Header(), page.Body)
	}
	js := httptest.NewRecorder()
	r.Header.Set("Accept", "application/json, text/html;q=0.1")
	writePaymentRequired(js, r, "Subscribe to continue.", "https://service.example/pay")
	if js.Code != http.StatusPaymentRequired ||
		js.Body.String() != `{"error":{"message":"Subscribe to continue."},"subscribe_link":"https://service.example/pay"}`+"\n" {
		t.Fatalf("JSON: %d %q", js.Code, js.Body)
	}
}
