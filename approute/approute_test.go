package approute

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// named is a handler that records its name and passes the request on.
func named(name string, got *[]string) Handler {
	return func(w http.ResponseWriter, r *http.Request, next Next) error {
		*got = append(*got, name)
		return next.ServeHTTP(w, r)
	}
}

// appNext is the app behind the router: it records the path it got.
type appNext struct{ paths []string }

func (a *appNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	a.paths = append(a.paths, r.URL.Path)
	w.WriteHeader(http.StatusOK)
	return nil
}

type session struct{}

func (session) Carries(h http.Header) bool { return strings.Contains(h.Get("Cookie"), "sid=") }
func (session) StripCookies(h http.Header) { h.Del("Cookie") }

// TestRouterRoutes: each path goes to its route, in the router's order,
// and what passes reaches the app with the url as declared.
func TestRouterRoutes(t *testing.T) {
	var got []string
	rt := New(Config{})
	rt.Health("/health", func(w http.ResponseWriter, _ *http.Request, _ Next) error {
		got = append(got, "health")
		return nil
	})
	if other := rt.Module("/Hooks/Events", named("webhook", &got)); other != "" {
		t.Fatal(other)
	}
	if other := rt.Module("/hooks/events/", named("again", &got)); other != "/Hooks/Events" {
		t.Errorf("a second spelling of a module url clashes with %q", other)
	}
	rt.Prefix("/spill/", named("spill", &got))
	rt.Descriptor("/manifest.json", func(*http.Request) ([]byte, error) { return []byte(`{}`), nil })
	rt.Public(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/assets/") })
	rt.Guard(Guard{SignIn: named("sign-in", &got), SessionCookie: "sid", Session: session{}, Auth: named("auth", &got),
		FromQuery: "jwtToken", Subscription: named("subscription", &got)})
	for _, c := range []struct {
		path, accept, want, app string
		status                  int
	}{
		{"/health", "", "health", "", 200},
		{"/hooks/events;x", "", "webhook", "/Hooks/Events", 200},
		{"/spill/abc", "", "spill", "/spill/abc", 200},
		{"/manifest.json", "", "", "", 200},
		{"/assets/app.js", "", "", "/assets/app.js", 200},
		{"/api/x", "", "auth subscription", "/api/x", 200},
		{"/page", "text/html", "sign-in auth subscription", "/page", 200},
		{"/a/%2e%2e/b", "", "", "", 400},
	} {
		got = nil
		app := &appNext{}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if err := rt.Serve(w, r, app); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if strings.Join(got, " ") != c.want || strings.Join(app.paths, "") != c.app || w.Code != c.status {
			t.Errorf("%s: handlers %q, app got %q, status %d", c.path, got, app.paths, w.Code)
		}
	}
	if !rt.Takes("/HOOKS/events") || !rt.Takes("/manifest.json") || rt.Takes("/api/x") {
		t.Error("Routes does not tell the routed paths")
	}
}

// TestRouterStartingAndNoUpstream: a starting router answers 503 but its
// health check; a request that passes and finds no app is answered 502,
// reported once; the sign-in's cookies never reach the app.
func TestRouterStartingAndNoUpstream(t *testing.T) {
	var got []string
	starting := New(Config{Starting: true})
	starting.Health("/health", named("health", &got))
	w := httptest.NewRecorder()
	_ = starting.Serve(w, httptest.NewRequest(http.MethodGet, "/api", nil), &appNext{})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != retryAfter || !strings.Contains(w.Body.String(), "starting") {
		t.Errorf("starting: %d %s", w.Code, w.Body)
	}
	if _ = starting.Serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/health", nil), &appNext{}); len(got) != 1 {
		t.Error("the health check is not answered while starting")
	}

	reported := 0
	unhandled := false
	rt := New(Config{Unhandled: func(*http.Request) bool { return unhandled }, NoUpstream: func(*http.Request) { reported++ }})
	rt.Guard(Guard{Auth: named("auth", &got), Session: session{}})
	end := Next(nextFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Cookie") != "" {
			t.Error("the session cookie reached the app")
		}
		unhandled = true
		return nil
	}))
	for i := 0; i < 2; i++ {
		unhandled = false
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header.Set("Cookie", "sid=1")
		_ = rt.Serve(w, r, end)
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "not connected") {
			t.Errorf("no upstream: %d %s", w.Code, w.Body)
		}
	}
	if reported != 1 {
		t.Errorf("no upstream reported %d times", reported)
	}
}

type nextFunc func(http.ResponseWriter, *http.Request) error

func (f nextFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }
