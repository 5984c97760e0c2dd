package installations

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// app records what the app behind the handler is told.
type app struct {
	mu     sync.Mutex
	bodies []string
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	body, _ := io.ReadAll(r.Body)
	if r.ContentLength != int64(len(body)) {
		w.WriteHeader(http.StatusBadRequest)
		return nil
	}
	a.mu.Lock()
	a.bodies = append(a.bodies, r.URL.Path+" "+string(body))
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *app) told() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

type lifecycle struct {
	h       *Handler
	book    *Book
	svc     *fakeService
	app     *app
	clock   *clock
	purged  []string
	reports []string
}

func newLifecycle(t *testing.T, forward bool) *lifecycle {
	t.Helper()
	l := &lifecycle{app: &app{}, clock: newClock()}
	l.svc = newFakeService(l.clock.now)
	l.book = newTestBook(t, NewMemoryStore(), l.svc, l.clock)
	h, err := NewHandler(HandlerConfig{
		Book:     l.book,
		ClientID: "client-1",
		Paths:    [NumKinds]string{Installed: "/installed", Uninstall: "/uninstall", SubscriptionPaid: "/subscription-paid"},
		Forward:  forward,
		Purge:    func(id, domain string) { l.purged = append(l.purged, id+"/"+domain) },
		Report: func(o Outcome, org string, err error) {
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("a reported error holds the secret: %v", err)
			}
			l.reports = append(l.reports, o.String())
		},
		Now: l.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	l.h = h
	return l
}

func (l *lifecycle) call(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if err := l.h.Serve(w, r, l.app); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(w.Body.String(), "s3cret") {
		t.Errorf("the answer holds the secret: %s", w.Body)
	}
	return w
}

func lifecycleBody(org, domain, secret string, drop ...string) string {
	m := map[string]any{"appId": "demo-app", "appSecret": secret, "clientId": "client-1", "userId": 7,
		"organizationId": org, "domain": domain, "baseUrl": "https://" + domain + ".service.example", "code": "c0de"}
	for _, k := range drop {
		delete(m, k)
	}
	out, _ := json.Marshal(m)
	return string(out)
}

func TestHandlerInstalled(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")

	w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42"))
	if w.Code != http.StatusNoContent {
		t.Fatalf("installed: %d %s", w.Code, w.Body)
	}
	if s, ok := l.book.Secret("acme"); !ok || s != "s3cret-42" {
		t.Fatal("the installation was not stored")
	}
	in, _ := l.book.Get("42")
	if in.Token.AccessToken == "" || in.UserID != "7" || in.BaseURL != "https://acme.service.example" {
		t.Fatalf("stored %+v", in)
	}
	told := l.app.told()
	if len(told) != 1 || !strings.HasPrefix(told[0], "/installed ") || strings.Contains(told[0], "s3cret") || strings.Contains(told[0], "c0de") ||
		!strings.Contains(told[0], `"organizationId":"42"`) {
		t.Fatalf("the app was told %q", told)
	}

	// A made-up secret: the service refuses it, nothing is stored.
	w = l.call(t, "POST", "/installed", lifecycleBody("43", "globex", "s3cret-made-up"))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "does not confirm") {
		t.Fatalf("made-up installation: %d %s", w.Code, w.Body)
	}
	if _, ok := l.book.Secret("43"); ok {
		t.Fatal("a made-up installation was stored")
	}

	// A made-up secret for an installed organization leaves it alone.
	w = l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-overwrite"))
	if s, _ := l.book.Secret("42"); w.Code != http.StatusForbidden || s != "s3cret-42" {
		t.Fatalf("overwrite attempt: %d, secret kept %v", w.Code, s == "s3cret-42")
	}

	// The service unreachable: 503 with Retry-After, nothing stored.
	l.svc.give("44", "s3cret-44")
	l.svc.down.Store(true)
	w = l.call(t, "POST", "/installed", lifecycleBody("44", "initech", "s3cret-44"))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("service down: %d %v", w.Code, w.Header())
	}
	if _, ok := l.book.Secret("44"); ok {
		t.Fatal("an unproved installation was stored")
	}
	if len(l.app.told()) != 1 {
		t.Fatal("the app was told of a refused installation")
	}
	if got := strings.Join(l.reports, ","); got != "stored,refused,refused,service_unreachable" {
		t.Errorf("reports = %s", got)
	}
}

func TestHandlerRefusesMalformedCalls(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	other := strings.Replace(lifecycleBody("42", "acme", "s3cret-42"), "client-1", "client-2", 1)
	cases := []struct {
		method, path, body string
		status             int
		message            string
	}{
		{"GET", "/installed", "", http.StatusMethodNotAllowed, "is a POST"},
		{"POST", "/installed", "{", http.StatusBadRequest, "not a JSON object"},
		{"POST", "/installed", lifecycleBody("42", "acme", "s3cret-42", "appSecret"), http.StatusBadRequest, "lacks appSecret"},
		{"POST", "/installed", other, http.StatusForbidden, "another app"},
		{"POST", "/uninstall", strings.Replace(other, `"userId":7,`, "", 1), http.StatusForbidden, "another app"},
		{"POST", "/installed", strings.Repeat(" ", MaxEventBody+1), http.StatusRequestEntityTooLarge, "64 KiB"},
	}
	for _, c := range cases {
		w := l.call(t, c.method, c.path, c.body)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.message) {
			t.Errorf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
	if l.svc.requests.Load() != 0 || l.book.Len() != 0 || len(l.app.told()) != 0 {
		t.Error("a malformed call reached the service, the store or the app")
	}
	// Other paths pass through untouched.
	if w := l.call(t, "GET", "/api/projects", ""); w.Code != http.StatusNoContent {
		t.Errorf("other path: %d", w.Code)
	}
}

func TestHandlerUninstall(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	if w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42")); w.Code != http.StatusNoContent {
		t.Fatal(w.Code)
	}
	uninstall := func(secret string) string { return lifecycleBody("42", "acme", secret, "userId", "code") }

	w := l.call(t, "POST", "/uninstall", uninstall("s3cret-wrong"))
	if w.Code != http.StatusForbidden || l.book.Len() != 1 || len(l.purged) != 0 {
		t.Fatalf("wrong secret: %d, %d held", w.Code, l.book.Len())
	}
	w = l.call(t, "POST", "/uninstall", uninstall("s3cret-42"))
	if w.Code != http.StatusNoContent || l.book.Len() != 0 {
		t.Fatalf("right secret: %d, %d held", w.Code, l.book.Len())
	}
	if _, err := l.book.Get("42"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the installation is still stored")
	}
	if len(l.purged) != 1 || l.purged[0] != "42/acme" {
		t.Errorf("purged %v", l.purged)
	}
	told := l.app.told()
	if len(told) != 2 || !strings.HasPrefix(told[1], "/uninstall ") || strings.Contains(told[1], "s3cret") {
		t.Fatalf("the app was told %q", told)
	}
	// Again: nothing to remove, 2xx, the app not told.
	w = l.call(t, "POST", "/uninstall", uninstall("anything"))
	if w.Code != http.StatusOK || len(l.app.told()) != 2 {
		t.Fatalf("uninstall of nothing: %d", w.Code)
	}
}

func TestHandlerSubscriptionPaid(t *testing.T) {
	l := newLifecycle(t, false)
	l.svc.give("42", "s3cret-42")
	if w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42")); w.Code != http.StatusOK {
		t.Fatalf("installed without forward: %d", w.Code)
	}
	paid := func(org string) *httptest.ResponseRecorder {
		return l.call(t, "POST", "/subscription-paid", `{"appId":"demo-app","organizationId":"`+org+`","domain":null}`)
	}
	for range 5 {
		if w := paid("42"); w.Code != http.StatusOK {
			t.Fatalf("paid: %d %s", w.Code, w.Body)
		}
	}
	if len(l.purged) != 1 {
		t.Fatalf("5 calls at once purged %d times, want 1", len(l.purged))
	}
	l.clock.advance(DefaultPaidInterval)
	paid("42")
	if len(l.purged) != 2 {
		t.Fatalf("a call after the interval purged: %v", l.purged)
	}
	// A made-up organization: answered, nothing purged.
	if w := paid("999"); w.Code != http.StatusOK || len(l.purged) != 2 {
		t.Fatalf("made-up organization: %d, purged %v", w.Code, l.purged)
	}
	if len(l.app.told()) != 0 {
		t.Error("the app was told with forward off")
	}
}

func TestSameSecret(t *testing.T) {
	if !SameSecret("abc", "abc") || SameSecret("abc", "abd") || SameSecret("abc", "abcd") || SameSecret("", "x") {
		t.Fatal("SameSecret is wrong")
	}
}
