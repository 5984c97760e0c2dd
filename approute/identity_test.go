package approute

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/installations"
)

// headerApp is the app behind the router: it keeps the headers it got.
type headerApp struct{ got http.Header }

func (a *headerApp) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	a.got = r.Header.Clone()
	return nil
}

// setting is a handler that sets a header, as the gateway's checks set the
// identity headers, and passes the request on.
func setting(name, value string) Handler {
	return func(w http.ResponseWriter, r *http.Request, next Next) error {
		r.Header.Set(name, value)
		return next.ServeHTTP(w, r)
	}
}

// TestRouterRemovesIdentityHeaders: on every route, what a client sends
// under an identity header's name (in any spelling a stack reads as it)
// never reaches the app, and its Connection header cannot name one; what
// the gateway sets does; a delivery's organization headers are left to the
// delivery check.
func TestRouterRemovesIdentityHeaders(t *testing.T) {
	sealer, err := installations.NewSealer([]byte("an installations key of 32 bytes+"))
	if err != nil {
		t.Fatal(err)
	}
	book, err := installations.NewBook(installations.BookConfig{Store: installations.NewMemoryStore(), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Config{
		Identity:  []string{"X-Service-User-Id", "x-service-domain", "X-Service-Id", "X-Claim", "X-SERVICE-USER-ID"},
		AppTokens: &AppTokens{Header: "X-App-Token", Book: book}, // no installation: no token is set
	})
	rt.Exact("/installed", setting("X-Other", "1"))
	rt.Module("/file-format", setting("X-Other", "1"))
	rt.Webhook("/webhooks", setting("X-Other", "1"))
	rt.Prefix("/spill/", setting("X-Other", "1"))
	rt.WebhookPrefix("/hooks/", setting("X-Other", "1"))
	rt.Public(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/assets/") })
	rt.Guard(Guard{Auth: setting("X-Service-User-Id", "7")})

	sent := http.Header{
		"X-Service-User-Id": {"spoofed"},
		"X_service_user_id": {"spoofed"},
		"X-Service-Domain":  {"evil.example"},
		"X_Service_Domain":  {"evil.example"},
		"X-Service-Id":      {"666"},
		"X-Claim":           {"spoofed"},
		"X-App-Token":       {"forged"},
		"X-Kept":            {"1"},
		"Connection":        {"X-Service-User-Id, keep-alive", "x_service_domain,X-Claim", "X-Kept"},
	}
	identity := []string{"X-Service-User-Id", "X_service_user_id", "X-Service-Domain", "X_Service_Domain", "X-Service-Id", "X-Claim", "X-App-Token"}
	for _, c := range []struct {
		path string
		kept []string // identity headers the app gets as the client sent them
	}{
		{"/assets/app.css", nil},
		{"/installed", nil},
		{"/File-Format", nil},
		{"/spill/abc", nil},
		{"/webhooks", []string{"X-Service-Domain", "X-Service-Id"}},
		{"/hooks/a", []string{"X-Service-Domain", "X-Service-Id"}},
		{"/api/x", nil},
	} {
		app := &headerApp{}
		r := httptest.NewRequest(http.MethodPost, c.path, nil)
		r.Header = sent.Clone()
		if err := rt.Serve(httptest.NewRecorder(), r, app); err != nil || app.got == nil {
			t.Fatalf("%s: %v, the app got %v", c.path, err, app.got)
		}
		for _, name := range identity {
			v, ok := app.got[name]
			switch {
			case slices.Contains(c.kept, name) && !slices.Equal(v, sent[name]):
				t.Errorf("%s: the delivery's %s is %q, want it left to the delivery check", c.path, name, v)
			case !slices.Contains(c.kept, name) && ok && !(c.path == "/api/x" && name == "X-Service-User-Id" && v[0] == "7"):
				t.Errorf("%s: the client's %s: %q reached the app", c.path, name, v)
			}
		}
		if got := app.got["Connection"]; !slices.Equal(got, []string{"keep-alive", "X-Kept"}) {
			t.Errorf("%s: Connection %q, want only the tokens that name no identity header", c.path, got)
		}
		if app.got.Get("X-Kept") != "1" || app.got.Get("X-Other") == "" && c.path != "/assets/app.css" && c.path != "/api/x" {
			t.Errorf("%s: the app got %v", c.path, app.got)
		}
	}
	if app := (&headerApp{}); rt.Serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/x", nil), app) != nil || app.got.Get("X-Service-User-Id") != "7" {
		t.Error("the header the guard set did not reach the app")
	}

	// A Connection header naming identity headers only is removed.
	app := &headerApp{}
	r := httptest.NewRequest(http.MethodGet, "/assets/a", nil)
	r.Header.Set("Connection", " X-App-Token ,, x-claim")
	if _ = rt.Serve(httptest.NewRecorder(), r, app); app.got == nil || len(app.got["Connection"]) != 0 {
		t.Errorf("Connection %q", app.got["Connection"])
	}
}

// TestIdentityRemovalAllocatesNothing: a request without identity headers
// is passed on as it came, with no allocation.
func TestIdentityRemovalAllocatesNothing(t *testing.T) {
	id := newIdentity([]string{"X-Service-User-Id", "X-Service-Domain", "X-Service-Id"}, "X-Service-App-Token")
	h := http.Header{"Authorization": {"Bearer x"}, "Accept": {"*/*"}, "Connection": {"keep-alive"}, "User-Agent": {"test"}}
	if n := testing.AllocsPerRun(100, func() { id.remove(h, false) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
	if len(h) != 4 || h.Get("Connection") != "keep-alive" {
		t.Errorf("the request changed: %v", h)
	}
}

// trailerApp is the app behind the router: it reads the body, then keeps
// the trailers it got.
type trailerApp struct{ got http.Header }

func (a *trailerApp) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	_, _ = io.ReadAll(r.Body)
	a.got = r.Trailer.Clone()
	return nil
}

// TestRouterDropsIdentityTrailers: no request trailer named as an
// identity header (in any spelling) reaches the app on any route; on the
// routes where the app is told to trust headers (webhook deliveries, the
// guard) no trailer does.
func TestRouterDropsIdentityTrailers(t *testing.T) {
	rt := New(Config{Identity: []string{"X-Service-User-Id", "X-Service-Domain"}})
	pass := func(w http.ResponseWriter, r *http.Request, next Next) error { return next.ServeHTTP(w, r) }
	rt.Module("/file-format", pass)
	rt.Webhook("/webhooks", pass)
	rt.Public(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/assets/") })
	rt.Guard(Guard{Auth: pass})
	for path, want := range map[string]string{"/file-format": "map[X-Checksum:[abc]]", "/assets/a": "map[X-Checksum:[abc]]",
		"/webhooks": "map[]", "/api/x": "map[]"} {
		r := httptest.NewRequest("POST", path, strings.NewReader("body"))
		r.ContentLength = -1
		// As net/http leaves them once the body has ended.
		r.Trailer = http.Header{"X-Service-Domain": {"evil.example"}, "X_service_user_id": {"spoofed"}, "X-Checksum": {"abc"}}
		app := &trailerApp{}
		if err := rt.Serve(httptest.NewRecorder(), r, app); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(app.got); got != want {
			t.Errorf("%s: the app got trailers %s, want %s", path, got, want)
		}
	}
}
