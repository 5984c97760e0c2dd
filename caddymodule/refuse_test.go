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
