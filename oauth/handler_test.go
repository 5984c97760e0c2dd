package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// handlerRig is a Handler over a rig, with the events it reported and
// what the next handler saw.
type handlerRig struct {
	*rig
	h *Handler

	mu     sync.Mutex
	events []Event
	errs   []error
	seen   *http.Request
	header http.Header // sent with every request
}

func newHandlerRig(t *testing.T, change func(*HandlerConfig)) *handlerRig {
	t.Helper()
	hr := &handlerRig{rig: newRig(t)}
	cfg := HandlerConfig{
		Manager:            hr.m,
		CallbackPath:       "/oauth/callback",
		RedirectURI:        testRedirect,
		LogoutPath:         "/oauth/logout",
		LogoutRedirect:     "/bye",
		CookieName:         "sid",
		Secure:             true,
		UserHeader:         "X-Service-User-Id",
		OrganizationHeader: "X-Service-Domain",
		Report: func(ev Event, err error) {
			hr.mu.Lock()
			defer hr.mu.Unlock()
			hr.events = append(hr.events, ev)
			hr.errs = append(hr.errs, err)
		},
	}
	if change != nil {
		change(&cfg)
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hr.h = h
	return hr
}

// serve sends one request through the handler.
func (hr *handlerRig) serve(t *testing.T, method, target, accept string, cookies ...*http.Cookie) (*httptest.ResponseRecorder, error) {
	t.Helper()
	r := httptest.NewRequest(method, "https://app.example"+target, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	for k, vs := range hr.header {
		r.Header[k] = vs
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	err := hr.h.Serve(w, r, nextFunc(func(w http.ResponseWriter, r *http.Request) error {
		hr.seen = r
		w.WriteHeader(http.StatusOK)
		return nil
	}))
	return w, err
}

func (hr *handlerRig) lastEvent() Event {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	if len(hr.events) == 0 {
		return -1
	}
	return hr.events[len(hr.events)-1]
}

// cookieOf finds a cookie set by an answer.
func cookieOf(rec *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signIn runs the whole flow from a browser's request for target and
// returns the session cookie.
func (hr *handlerRig) signIn(t *testing.T, target string) *http.Cookie {
	t.Helper()
	rec, err := hr.serve(t, http.MethodGet, target, browserAccept)
	if err != nil || rec.Code != http.StatusFound {
		t.Fatalf("browser without a session: %d %v", rec.Code, err)
	}
	state := cookieOf(rec, "sid_state")
	if state == nil || state.Path != "/oauth/callback" || !state.HttpOnly || !state.Secure || state.SameSite != http.SameSiteLaxMode ||
		state.MaxAge != int(DefaultLoginLifetime.Seconds()) {
		t.Fatalf("state cookie %+v", state)
	}
	code, back := hr.approve(t, rec.Header().Get("Location"), "approve")
	rec, err = hr.serve(t, http.MethodGet, "/oauth/callback?"+url.Values{"code": {code}, "state": {back}}.Encode(), browserAccept, state)
	if err != nil || rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != target {
		t.Fatalf("callback: %d %q %v", rec.Code, rec.Header().Get("Location"), err)
	}
	session := cookieOf(rec, "sid")
	if session == nil || session.Value == "" || session.Path != hr.h.cfg.CookiePath || !session.HttpOnly || !session.Secure ||
		session.MaxAge != int(DefaultSessionLifetime.Seconds()) {
		t.Fatalf("session cookie %+v", session)
	}
	if c := cookieOf(rec, "sid_state"); c == nil || c.MaxAge != -1 {
		t.Fatalf("the state cookie was not cleared: %+v", c)
	}
	return session
}

func TestHandlerSignInAndPassOn(t *testing.T) {
	hr := newHandlerRig(t, nil)
	session := hr.signIn(t, "/reports?year=2026")
	if hr.lastEvent() != LoginCompleted {
		t.Fatalf("events %v", hr.events)
	}

	r := httptest.NewRequest(http.MethodGet, "https://app.example/reports", nil)
	r.Header.Set("Accept", "application/json")
	r.Header.Set("Authorization", "Bearer forged")
	r.Header["X-Service-User-Id"] = []string{"1", "2"}
	r.Header.Set("X-Service-Domain", "other.example")
	r.Header.Set("Cookie", "theme=dark; sid="+session.Value+"; sid_state=x")
	var seen http.Header
	err := hr.h.Serve(httptest.NewRecorder(), r, nextFunc(func(_ http.ResponseWriter, r *http.Request) error {
		seen = r.Header.Clone()
		return errors.New("from next")
	}))
	if err == nil || err.Error() != "from next" {
		t.Fatalf("Serve returned %v, want the next handler's error", err)
	}
	if !strings.HasPrefix(seen.Get("Authorization"), "Bearer ey") || strings.Join(seen["X-Service-User-Id"], ",") != "7" ||
		seen.Get("X-Service-Domain") != "acme.example" || strings.Join(seen["Cookie"], "|") != "theme=dark" {
		t.Fatalf("the next handler saw %v", seen)
	}
}

func TestHandlerHeadersOff(t *testing.T) {
	hr := newHandlerRig(t, func(c *HandlerConfig) { c.UserHeader, c.OrganizationHeader = "", "" })
	session := hr.signIn(t, "/")
	r := httptest.NewRequest(http.MethodGet, "https://app.example/", nil)
	r.Header.Set("X-Service-Domain", "sent.example")
	r.AddCookie(session)
	var seen http.Header
	_ = hr.h.Serve(httptest.NewRecorder(), r, nextFunc(func(_ http.ResponseWriter, r *http.Request) error {
		seen = r.Header
		return nil
	}))
	if seen.Get("X-Service-Domain") != "sent.example" || seen.Get("X-Service-User-Id") != "" || seen.Get("Authorization") == "" {
		t.Fatalf("with the headers off the next handler saw %v", seen)
	}
}

func TestHandlerWithoutSession(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		accept   string
		status   int
		location string // prefix
	}{
		{"API client", http.MethodGet, "application/json", http.StatusUnauthorized, ""},
		{"no Accept", http.MethodGet, "", http.StatusUnauthorized, ""},
		{"curl", http.MethodGet, "*/*", http.StatusUnauthorized, ""},
		{"JSON before a little HTML", http.MethodGet, "application/json, text/html;q=0.1", http.StatusUnauthorized, ""},
		{"HTML refused", http.MethodGet, "text/html;q=0, */*", http.StatusUnauthorized, ""},
		{"browser page load", http.MethodGet, browserAccept, http.StatusFound, "http://127.0.0.1:"},
		{"browser form post", http.MethodPost, "text/html", http.StatusSeeOther, "http://127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hr := newHandlerRig(t, nil)
			rec, err := hr.serve(t, tt.method, "/x", tt.accept)
			if err != nil || rec.Code != tt.status || !strings.HasPrefix(rec.Header().Get("Location"), tt.location) {
				t.Fatalf("%d Location %q %v", rec.Code, rec.Header().Get("Location"), err)
			}
			if rec.Header().Get("Cache-Control") != "no-store" {
				t.Error("the answer may be cached")
			}
			if tt.status == http.StatusUnauthorized {
				if hr.lastEvent() != Unauthenticated || !strings.Contains(rec.Body.String(), `{"error":{"message":"Sign in`) {
					t.Fatalf("event %v body %s", hr.lastEvent(), rec.Body)
				}
				return
			}
			if hr.lastEvent() != LoginStarted || cookieOf(rec, "sid_state") == nil {
				t.Fatalf("event %v, state cookie %v", hr.lastEvent(), cookieOf(rec, "sid_state"))
			}
		})
	}
}

func TestHandlerRefuseCallback(t *testing.T) {
	refused := errors.New("refused by the caller")
	var got []int
	hr := newHandlerRig(t, func(c *HandlerConfig) {
		c.Refuse = func(w http.ResponseWriter, _ *http.Request, status int, message string) error {
			if message == "" {
				t.Error("a refusal without a message")
			}
			got = append(got, status)
			return refused
		}
	})
	for _, tt := range []struct {
		method, target, accept, allow string
		status                        int
	}{
		{http.MethodGet, "/x", "application/json", "", http.StatusUnauthorized},
		{http.MethodPost, "/oauth/callback", browserAccept, "GET, HEAD", http.StatusMethodNotAllowed},
		{http.MethodPut, "/oauth/logout", browserAccept, "GET, HEAD, POST", http.StatusMethodNotAllowed},
	} {
		rec, err := hr.serve(t, tt.method, tt.target, tt.accept)
		if err != refused || got[len(got)-1] != tt.status || rec.Header().Get("Allow") != tt.allow {
			t.Fatalf("%s %s: error %v, status %v, Allow %q", tt.method, tt.target, err, got, rec.Header().Get("Allow"))
		}
		if rec.Body.Len() != 0 {
			t.Fatalf("%s %s: the handler wrote %q itself", tt.method, tt.target, rec.Body)
		}
	}
}

// failingStore fails every call.
type failingStore struct{}

var errStoreDown = errors.New("store down")

func (failingStore) Get(context.Context, string) (Session, bool, error) {
	return Session{}, false, errStoreDown
}
func (failingStore) Put(context.Context, string, Session) error { return errStoreDown }
func (failingStore) Delete(context.Context, string) error       { return errStoreDown }

func TestHandlerStoreDown(t *testing.T) {
	hr := newHandlerRig(t, func(c *HandlerConfig) { c.Manager.Store = failingStore{} })
	rec, err := hr.serve(t, http.MethodGet, "/x", browserAccept, &http.Cookie{Name: "sid", Value: "abc"})
	if err != nil || rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" {
		t.Fatalf("session unreadable: %d %v %v", rec.Code, rec.Header(), err)
	}
	if hr.lastEvent() != SessionUnavailable || !errors.Is(hr.errs[len(hr.errs)-1], errStoreDown) {
		t.Fatalf("events %v errors %v", hr.events, hr.errs)
	}
	rec, _ = hr.serve(t, http.MethodGet, "/x", browserAccept)
	if rec.Code != http.StatusServiceUnavailable || hr.lastEvent() != LoginUnavailable {
		t.Fatalf("login unstartable: %d, event %v", rec.Code, hr.lastEvent())
	}
	hr.header = http.Header{"Sec-Fetch-Site": {"same-origin"}}
	rec, _ = hr.serve(t, http.MethodPost, "/oauth/logout", browserAccept, &http.Cookie{Name: "sid", Value: "abc"})
	if rec.Code != http.StatusSeeOther || hr.lastEvent() != Logout || !errors.Is(hr.errs[len(hr.errs)-1], errStoreDown) {
		t.Fatalf("logout with the store down: %d, event %v %v", rec.Code, hr.lastEvent(), hr.errs)
	}
}

func TestHandlerCallbackPages(t *testing.T) {
	tests := []struct {
		name   string
		query  func(state string) string
		status int
		text   string
		event  Event
		link   string
	}{
		{"declined", func(s string) string { return "error=access_denied&state=" + s }, http.StatusForbidden,
			"You declined", LoginDeclined, `<a href="/settings?tab=2">Try again</a>`},
		{"service error", func(s string) string { return "error=server_error&state=" + s }, http.StatusBadRequest,
			"(server_error)", LoginFailed, `<a href="/settings?tab=2">Try again</a>`},
		{"error code not reflected", func(s string) string { return "error=%3Cscript%3E&state=" + s }, http.StatusBadRequest,
			"(error)", LoginFailed, `<a href="/settings?tab=2">Try again</a>`},
		{"bad state", func(string) string { return "code=c&state=" + strings.Repeat("A", 43) }, http.StatusBadRequest,
			"Sign-in link expired", LoginBadState, `<a href="/">Try again</a>`},
		{"unknown code", func(s string) string { return "code=nope&state=" + s }, http.StatusForbidden,
			"did not accept this sign-in", LoginFailed, `<a href="/">Try again</a>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hr := newHandlerRig(t, nil)
			rec, _ := hr.serve(t, http.MethodGet, "/settings?tab=2", browserAccept)
			state := cookieOf(rec, "sid_state")
			rec, err := hr.serve(t, http.MethodGet, "/oauth/callback?"+tt.query(state.Value), browserAccept, state)
			body := rec.Body.String()
			if err != nil || rec.Code != tt.status || !strings.Contains(body, tt.text) || !strings.Contains(body, tt.link) {
				t.Fatalf("%d %v\n%s", rec.Code, err, body)
			}
			if strings.Contains(body, "<script>") {
				t.Fatal("the page reflects markup from the query")
			}
			if rec.Header().Get("Content-Security-Policy") == "" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
				t.Fatalf("page headers %v", rec.Header())
			}
			if hr.lastEvent() != tt.event {
				t.Fatalf("event %v, want %v", hr.lastEvent(), tt.event)
			}
			if cookieOf(rec, "sid") != nil {
				t.Fatal("a session cookie was given")
			}
		})
	}
}

func TestHandlerExchangeUnreachable(t *testing.T) {
	hr := newHandlerRig(t, nil)
	rec, _ := hr.serve(t, http.MethodGet, "/", browserAccept)
	state := cookieOf(rec, "sid_state")
	code, back := hr.approve(t, rec.Header().Get("Location"), "approve")
	hr.fail.Store(true)
	rec, _ = hr.serve(t, http.MethodGet, "/oauth/callback?code="+code+"&state="+back, browserAccept, state)
	// The token endpoint answered (502): the page says so, rather than
	// that the service could not be reached.
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "The service answered 502 when asked to finish signing you in.") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var refused *RefusedError
	if hr.lastEvent() != LoginFailed || hr.errs[len(hr.errs)-1] == nil || errors.As(hr.errs[len(hr.errs)-1], &refused) {
		t.Fatalf("event %v error %v", hr.lastEvent(), hr.errs[len(hr.errs)-1])
	}
}

func TestHandlerBackToUsedCallback(t *testing.T) {
	hr := newHandlerRig(t, nil)
	session := hr.signIn(t, "/a")
	rec, _ := hr.serve(t, http.MethodGet, "/oauth/callback?code=c&state=used", browserAccept, session)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Fatalf("a signed-in browser back at a used callback: %d %q", rec.Code, rec.Header().Get("Location"))
	}
}

func TestHandlerLogoutAndEndedSession(t *testing.T) {
	hr := newHandlerRig(t, func(c *HandlerConfig) { c.CookieDomain = "app.example"; c.CookiePath = "/app" })
	session := hr.signIn(t, "/app/x")
	hr.header = http.Header{"Origin": {"https://app.example"}}
	rec, _ := hr.serve(t, http.MethodPost, "/oauth/logout", browserAccept, session)
	hr.header = nil
	cleared := cookieOf(rec, "sid")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/bye" || cleared == nil || cleared.MaxAge != -1 ||
		cleared.Domain != "app.example" || cleared.Path != "/app" || hr.lastEvent() != Logout {
		t.Fatalf("logout: %d %q %+v", rec.Code, rec.Header().Get("Location"), cleared)
	}
	// The session is gone: the browser is sent to sign in, the cookie dropped.
	rec, _ = hr.serve(t, http.MethodGet, "/app/x", browserAccept, session)
	if rec.Code != http.StatusFound || cookieOf(rec, "sid") == nil || cookieOf(rec, "sid").MaxAge != -1 || hr.seen != nil {
		t.Fatalf("after logout: %d %v", rec.Code, rec.Result().Cookies())
	}

	// A refused refresh ends the session.
	session = hr.signIn(t, "/app/y")
	hr.clock.Advance(DefaultSessionLifetime / 2)
	hr.refuse.Store(true)
	rec, _ = hr.serve(t, http.MethodGet, "/app/y", "application/json", session)
	if rec.Code != http.StatusUnauthorized || cookieOf(rec, "sid") == nil || cookieOf(rec, "sid").MaxAge != -1 {
		t.Fatalf("refused refresh: %d %v", rec.Code, rec.Result().Cookies())
	}
	if !hasEvent(hr, SessionEnded) {
		t.Fatalf("events %v", hr.events)
	}
}

func hasEvent(hr *handlerRig, ev Event) bool {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	for _, e := range hr.events {
		if e == ev {
			return true
		}
	}
	return false
}

func TestHandlerWrap(t *testing.T) {
	hr := newHandlerRig(t, nil)
	session := hr.signIn(t, "/")
	app := hr.h.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Header.Get("X-Service-Domain")))
	}))
	r := httptest.NewRequest(http.MethodGet, "https://app.example/", nil)
	r.AddCookie(session)
	rec := httptest.NewRecorder()
	app.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK || rec.Body.String() != "acme.example" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	app.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://app.example/", nil))
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("without a session: %d %v", rec.Code, rec.Header())
	}
}

func TestNewHandlerRefuses(t *testing.T) {
	r := newRig(t)
	valid := func() HandlerConfig {
		return HandlerConfig{Manager: r.m, CallbackPath: "/cb", LogoutPath: "/out", CookieName: "sid", RedirectURI: testRedirect}
	}
	tests := []struct {
		name   string
		change func(*HandlerConfig)
		want   string
	}{
		{"no manager", func(c *HandlerConfig) { c.Manager = nil }, "Manager"},
		{"relative callback", func(c *HandlerConfig) { c.CallbackPath = "cb" }, "start with /"},
		{"same paths", func(c *HandlerConfig) { c.LogoutPath = "/cb" }, "must differ"},
		{"empty cookie name", func(c *HandlerConfig) { c.CookieName = "" }, "not valid"},
		{"cookie name with a separator", func(c *HandlerConfig) { c.CookieName = "a;b" }, "not valid"},
		{"cookie path with a semicolon", func(c *HandlerConfig) { c.CookiePath = "/a;b" }, "not valid"},
		{"cookie domain", func(c *HandlerConfig) { c.CookieDomain = "bad domain" }, "not valid"},
		{"callback path unfit for a cookie", func(c *HandlerConfig) { c.CallbackPath = "/cb;x" }, "state cookie"},
		{"neither redirect_uri nor origin", func(c *HandlerConfig) { c.RedirectURI = "" }, "Host header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.change(&cfg)
			if _, err := NewHandler(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewHandler(valid()); err != nil {
		t.Fatal(err)
	}
}

func TestEventString(t *testing.T) {
	for ev := range NumEvents {
		if s := ev.String(); s == "" || strings.HasPrefix(s, "event ") {
			t.Errorf("event %d has no text", ev)
		}
	}
	if NumEvents.String() != "event 10" {
		t.Errorf("out of range: %q", NumEvents.String())
	}
}

func TestSafeReturn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/", "/"},
		{"/reports?year=2026", "/reports?year=2026"},
		{"/a/b#frag", "/a/b#frag"},
		{"", "/"},
		{"//evil.example", "/"},
		{"///evil.example", "/"},
		{"/\\evil.example", "/"},
		{"/a\\b", "/"},
		{"https://evil.example/", "/"},
		{"evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"/\t/evil.example", "/"},
		{"/a\r\nSet-Cookie: x", "/"},
		{"/%2F%2Fevil.example", "/%2F%2Fevil.example"},
	}
	for _, tt := range tests {
		if got := safeReturn(tt.in); got != tt.want {
			t.Errorf("safeReturn(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/", "//evil.example", "/\\x", "/ok?a=b", "https://x", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := safeReturn(in)
		if got != "/" && got != in {
			t.Fatalf("safeReturn changed %q into %q", in, got)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\r\n\t") {
			t.Fatalf("safeReturn(%q) = %q is not a same-site path", in, got)
		}
	})
}

func TestStripCookies(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"none of ours", []string{"theme=dark; lang=en"}, []string{"theme=dark; lang=en"}},
		{"only ours", []string{"sid=abc; sid_state=def"}, nil},
		{"mixed", []string{"theme=dark; sid=abc; lang=en"}, []string{"theme=dark; lang=en"}},
		{"several lines", []string{"sid=abc", "theme=dark"}, []string{"theme=dark"}},
		{"prefix is not ours", []string{"sidebar=1; sid=2"}, []string{"sidebar=1"}},
		{"no header", nil, nil},
		{"spaces and empty parts", []string{" theme=dark ;; sid=abc ;"}, []string{"theme=dark"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.in != nil {
				h["Cookie"] = tt.in
			}
			stripCookies(h, "sid", "sid_state")
			if strings.Join(h["Cookie"], "|") != strings.Join(tt.want, "|") || (tt.want == nil && h["Cookie"] != nil) {
				t.Fatalf("Cookie %q, want %q", h["Cookie"], tt.want)
			}
		})
	}
}

func TestCookieValue(t *testing.T) {
	tests := []struct {
		lines []string
		want  string
	}{
		{[]string{"sid=abc"}, "abc"},
		{[]string{"theme=dark; sid=abc; lang=en"}, "abc"},
		{[]string{"theme=dark", "sid=abc"}, "abc"},
		{[]string{"sidebar=1; sid_state=2"}, ""},
		{[]string{`sid="abc"`}, "abc"},
		{[]string{"sid="}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := cookieValue(http.Header{"Cookie": tt.lines}, "sid"); got != tt.want {
			t.Errorf("cookieValue(%q) = %q, want %q", tt.lines, got, tt.want)
		}
	}
}

// BenchmarkHandlerSession is a request of a live session through Serve.
func BenchmarkHandlerSession(b *testing.B) {
	store := NewMemoryStore(10, nil)
	h, err := NewHandler(HandlerConfig{
		Manager:            &Manager{Client: &Client{}, Store: store},
		CallbackPath:       "/oauth/callback",
		LogoutPath:         "/oauth/logout",
		CookieName:         "sid",
		UserHeader:         "X-Service-User-Id",
		OrganizationHeader: "X-Service-Domain",
	})
	if err != nil {
		b.Fatal(err)
	}
	id := NewID()
	_ = store.Put(context.Background(), id, Session{
		Token:  Token{AccessToken: "eyJ.access.token", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)},
		UserID: "7", Organization: "acme.example", Expires: time.Now().Add(time.Hour),
	})
	next := nextFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	r := httptest.NewRequest(http.MethodGet, "/app", nil)
	cookies := []string{"sid=" + id}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		r.Header["Cookie"] = cookies
		if err := h.Serve(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
	if r.Header.Get("Authorization") != "Bearer eyJ.access.token" {
		b.Fatal("the token was not passed on")
	}
}

// TestHandlerLogoutNeedsSameSitePost: a GET to the logout path (a link, an
// image or a redirect from another site) shows a page with a button and
// ends nothing; only a POST from the site's own pages ends the session.
func TestHandlerLogoutNeedsSameSitePost(t *testing.T) {
	hr := newHandlerRig(t, nil)
	session := hr.signIn(t, "/x")
	alive := func(what string) {
		t.Helper()
		hr.seen = nil
		hr.header = nil
		if rec, _ := hr.serve(t, http.MethodGet, "/x", browserAccept, session); rec.Code != http.StatusOK || hr.seen == nil {
			t.Fatalf("after %s the session ended: %d", what, rec.Code)
		}
	}

	rec, _ := hr.serve(t, http.MethodGet, "/oauth/logout", browserAccept, session)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `<form method="post" action="/oauth/logout"><button type="submit">Sign out</button></form>`) ||
		cookieOf(rec, "sid") != nil {
		t.Fatalf("GET: %d %v %s", rec.Code, rec.Result().Cookies(), rec.Body)
	}
	alive("a GET")

	for name, c := range map[string]struct {
		header http.Header
		accept string
	}{
		"cross-site":             {http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://app.example"}}, browserAccept},
		"same-site sibling":      {http.Header{"Sec-Fetch-Site": {"same-site"}}, browserAccept},
		"another Origin":         {http.Header{"Origin": {"https://evil.example"}}, browserAccept},
		"another Referer":        {http.Header{"Referer": {"https://evil.example/app.example"}}, "application/json"},
		"an opaque Origin":       {http.Header{"Origin": {"null"}}, browserAccept},
		"a look-alike Origin":    {http.Header{"Origin": {"https://app.example.evil.example"}}, browserAccept},
		"no header saying where": {nil, "application/json"},
	} {
		hr.header = c.header
		rec, _ := hr.serve(t, http.MethodPost, "/oauth/logout", c.accept, session)
		if rec.Code != http.StatusForbidden || cookieOf(rec, "sid") != nil {
			t.Fatalf("POST %s: %d %v", name, rec.Code, rec.Result().Cookies())
		}
		if c.accept == browserAccept && !strings.Contains(rec.Body.String(), `<form method="post"`) {
			t.Errorf("POST %s: the page has no button to sign out: %s", name, rec.Body)
		}
		alive("a POST " + name)
	}

	for name, h := range map[string]http.Header{
		"Sec-Fetch-Site same-origin": {"Sec-Fetch-Site": {"same-origin"}},
		"its own Origin":             {"Origin": {"https://APP.example"}},
		"its own Referer":            {"Referer": {"https://app.example/x?y=1"}},
	} {
		session := hr.signIn(t, "/x")
		hr.header = h
		rec, _ := hr.serve(t, http.MethodPost, "/oauth/logout", browserAccept, session)
		if rec.Code != http.StatusSeeOther || cookieOf(rec, "sid") == nil || cookieOf(rec, "sid").MaxAge != -1 {
			t.Fatalf("POST with %s: %d %v", name, rec.Code, rec.Result().Cookies())
		}
		hr.header = nil
		if rec, _ := hr.serve(t, http.MethodGet, "/x", browserAccept, session); rec.Code != http.StatusFound {
			t.Fatalf("after a POST with %s the session lives on: %d", name, rec.Code)
		}
	}
}

// TestHandlerRedirectURIFromOrigin: without RedirectURI the redirect_uri
// is built from Origin, never from the Host header; an Origin that fails
// refuses the sign-in with its message.
func TestHandlerRedirectURIFromOrigin(t *testing.T) {
	fail := false
	hr := newHandlerRig(t, func(c *HandlerConfig) {
		c.RedirectURI = ""
		c.Origin = func(*http.Request) (string, error) {
			if fail {
				return "", errors.New("no host name for this site")
			}
			return "https://app.example/", nil
		}
	})
	rec, _ := hr.serve(t, http.MethodGet, "/x", browserAccept)
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusFound || loc.Query().Get("redirect_uri") != "https://app.example/oauth/callback" {
		t.Fatalf("%d %s", rec.Code, rec.Header().Get("Location"))
	}
	fail = true
	rec, _ = hr.serve(t, http.MethodGet, "/x", browserAccept)
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "no host name for this site") || hr.lastEvent() != LoginUnavailable {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestParseRedirectURI(t *testing.T) {
	for _, tt := range []struct{ uri, path, absolute, err string }{
		{"/oauth/callback", "/oauth/callback", "", ""},
		{"https://app.example/cb?x=1", "/cb", "https://app.example/cb?x=1", ""},
		{"https://app.example", "", "", "needs a path"},
		{"cb", "", "", "must be a path or an absolute"},
		{"ftp://app.example/cb", "", "", "must be a path or an absolute"},
		{"https://app.example/cb#x", "", "", "must be a path or an absolute"},
	} {
		path, absolute, err := ParseRedirectURI(tt.uri)
		if path != tt.path || absolute != tt.absolute || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: %q, %q, %v", tt.uri, path, absolute, err)
		}
	}
}
