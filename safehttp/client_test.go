package safehttp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/limits"
)

func TestHostAllowed(t *testing.T) {
	c := New(Options{Hosts: []string{"files.service.example", "*.CDN.example"}})
	for raw, want := range map[string]bool{
		"https://files.service.example/a":     true,
		"https://FILES.service.example./a":    true,
		"http://files.service.example:8443/a": true,
		"https://eu.cdn.example/a":            true,
		"https://cdn.example/a":               false,
		"https://evilcdn.example/a":           false,
		"https://files.service.example.evil/": false,
		"ftp://files.service.example/a":       false,
		"file:///etc/passwd":                  false,
		"https:///a":                          false,
	} {
		u, _ := url.Parse(raw)
		if got := c.HostAllowed(u); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}

// Fetches go to a server on loopback only; without AllowPrivate they are
// refused before a connection is made.
func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/payload":
			w.Write([]byte("payload"))
		case "/large":
			w.Write([]byte(strings.Repeat("x", 100)))
		case "/missing":
			http.NotFound(w, r)
		case "/away":
			http.Redirect(w, r, "http://elsewhere.example/payload", http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	open := New(Options{Hosts: []string{"127.0.0.1", "localhost"}, MaxSize: 50, Timeout: time.Second, AllowPrivate: true})
	closed := New(Options{Hosts: []string{"127.0.0.1", "localhost"}, MaxSize: 50, Timeout: time.Second})
	ctx := context.Background()

	if got, err := open.Get(ctx, srv.URL+"/payload"); err != nil || string(got) != "payload" {
		t.Errorf("payload: %q, %v", got, err)
	}
	var se *StatusError
	if _, err := open.Get(ctx, srv.URL+"/missing"); !errors.As(err, &se) || se.Code != 404 {
		t.Errorf("missing: %v", err)
	}
	if _, err := open.Get(ctx, srv.URL+"/large"); !errors.Is(err, limits.ErrTooLarge) {
		t.Errorf("large: %v", err)
	}
	if _, err := open.Get(ctx, srv.URL+"/away"); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("redirect to a host not allowed: %v", err)
	}
	if _, err := open.Get(ctx, "http://elsewhere.example/payload"); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("host not allowed: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := open.Get(short, srv.URL+"/slow"); err == nil || short.Err() == nil {
		t.Errorf("slow: %v, context %v", err, short.Err())
	}
	// The address is checked as dialled: localhost resolves to loopback.
	for _, raw := range []string{srv.URL + "/payload", "http://localhost:" + port + "/payload"} {
		if _, err := closed.Get(ctx, raw); !errors.Is(err, ErrNotPublic) {
			t.Errorf("%s without allow_private: %v, want ErrNotPublic", raw, err)
		}
	}
}
