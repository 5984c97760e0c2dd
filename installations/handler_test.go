package installations

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
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
	unpaid  bool // the fake subscription query answers unpaid
	queries int  // subscription queries asked
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
		Prove:    l.svc.prove,
		BaseURL:  "https://service.example",
		Confirm: func(_ context.Context, in *Installation, tok string) (Confirmation, error) {
			l.queries++
			if l.svc.down.Load() {
				return Confirmation{}, errors.New("dial tcp: connection refused")
			}
			if ok, _ := l.svc.prove(context.Background(), tok); ok.ID != in.OrganizationID {
				t.Errorf("the subscription query was asked with a token of %s for %s", ok.ID, in.OrganizationID)
			}
			return Confirmation{Paid: !l.unpaid, Expires: l.clock.now().Add(30 * 24 * time.Hour)}, nil
		},
		Purge: func(id, domain string) { l.purged = append(l.purged, id+"/"+domain) },
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
	if s, ok := l.book.Secret(Org{Domain: "acme"}); !ok || s != "s3cret-42" {
		t.Fatal("the installation was not stored")
	}
	in, _ := l.book.Get("42")
	if in.Token.AccessToken == "" || in.UserID != "7" || in.BaseURL != "https://service.example" {
		t.Fatalf("stored %+v", in)
	}
	told := l.app.told()
	want := `/installed {"event":"installed","appId":"demo-app","clientId":"client-1","organizationId":42,"domain":"acme",` +
		`"baseUrl":"https://service.example","userId":7,"installedAt":"2026-03-01T12:00:00Z"}`
	if len(told) != 1 || told[0] != want {
		t.Fatalf("the app was told %q, want %q", told, want)
	}

	// A made-up secret: the service refuses it, nothing is stored.
	w = l.call(t, "POST", "/installed", lifecycleBody("43", "globex", "s3cret-made-up"))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "does not confirm") {
		t.Fatalf("made-up installation: %d %s", w.Code, w.Body)
	}
	if _, ok := l.book.Secret(Org{ID: "43"}); ok {
		t.Fatal("a made-up installation was stored")
	}

	// A made-up secret for an installed organization leaves it alone.
	w = l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-overwrite"))
	if s, _ := l.book.Secret(Org{ID: "42"}); w.Code != http.StatusForbidden || s != "s3cret-42" {
		t.Fatalf("overwrite attempt: %d, secret kept %v", w.Code, s == "s3cret-42")
	}

	// The service unreachable: 503 with Retry-After, nothing stored.
	l.svc.give("44", "s3cret-44")
	l.svc.down.Store(true)
	w = l.call(t, "POST", "/installed", lifecycleBody("44", "initech", "s3cret-44"))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("service down: %d %v", w.Code, w.Header())
	}
	if _, ok := l.book.Secret(Org{ID: "44"}); ok {
		t.Fatal("an unproved installation was stored")
	}
	if len(l.app.told()) != 1 {
		t.Fatal("the app was told of a refused installation")
	}
	if got := strings.Join(l.reports, ","); got != "stored,refused,refused,service_unreachable" {
		t.Errorf("reports = %s", got)
	}
}

// TestHandlerStoresOnlyWhatTheServiceProves: one tenant, with its own app
// secret, cannot install under another organization's id or domain.
func TestHandlerStoresOnlyWhatTheServiceProves(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	l.svc.give("43", "s3cret-43")
	if w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42")); w.Code != http.StatusNoContent {
		t.Fatal(w.Code)
	}
	for _, c := range []struct{ name, org, domain string }{
		{"acme's id with globex's domain", "42", "globex"},
		{"acme's domain as the id", "acme", "globex"},
		{"a made-up id", "4242", "globex"},
	} {
		w := l.call(t, "POST", "/installed", lifecycleBody(c.org, c.domain, "s3cret-43"))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "not for the organization the call names") {
			t.Errorf("%s: %d %s", c.name, w.Code, w.Body)
		}
	}
	if s, _ := l.book.Secret(Org{ID: "42"}); s != "s3cret-42" || l.book.Len() != 1 {
		t.Fatalf("acme's installation was replaced or shadowed: %d held", l.book.Len())
	}
	if _, ok := l.book.Secret(Org{ID: "acme"}); ok {
		t.Fatal("a phantom installation under acme's domain as an id was stored")
	}
	if len(l.app.told()) != 1 {
		t.Fatalf("the app was told of unproved calls: %q", l.app.told())
	}
}

// TestHandlerRepeatAsksTheServiceOnce: the service's retry of a proved
// installed call is answered from what is stored.
func TestHandlerRepeatAsksTheServiceOnce(t *testing.T) {
	l := newLifecycle(t, false)
	l.svc.give("42", "s3cret-42")
	for range 5 {
		if w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42")); w.Code != http.StatusOK {
			t.Fatal(w.Code)
		}
	}
	if n := l.svc.requests.Load(); n != 1 {
		t.Fatalf("5 repeats of one installed call made %d token requests, want 1", n)
	}
}

// TestHandlerBudgetsUnprovedCalls: unproved calls from one source make at
// most its budget of token requests; the service's own calls are never
// limited.
func TestHandlerBudgetsUnprovedCalls(t *testing.T) {
	l := newLifecycle(t, true)
	l.h.cfg.Budget = NewBudget(3, 100, time.Minute, l.clock.now)
	l.svc.give("42", "s3cret-42")
	forged := func(from string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("43", "globex", "s3cret-forged")))
		r.RemoteAddr = from + ":4000"
		if err := l.h.Serve(w, r, l.app); err != nil {
			t.Fatal(err)
		}
		return w
	}
	codes := map[int]int{}
	for range 20 {
		codes[forged("192.0.2.1").Code]++
	}
	if codes[http.StatusForbidden] != 3 || codes[http.StatusTooManyRequests] != 17 || l.svc.requests.Load() != 3 {
		t.Fatalf("20 forged calls: %v, %d token requests", codes, l.svc.requests.Load())
	}
	w := forged("192.0.2.1")
	if w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "Too many") {
		t.Fatalf("a limited call: %v %s", w.Header(), w.Body)
	}
	// Another source, and proved calls from the spent one, go on.
	if w := forged("192.0.2.2"); w.Code != http.StatusForbidden {
		t.Fatalf("another source: %d", w.Code)
	}
	for range 10 {
		r := httptest.NewRequest("POST", "/installed", strings.NewReader(lifecycleBody("42", "acme", "s3cret-42")))
		r.RemoteAddr = "192.0.2.3:4000"
		w := httptest.NewRecorder()
		if err := l.h.Serve(w, r, l.app); err != nil || w.Code != http.StatusNoContent {
			t.Fatalf("the service's own call: %d %v", w.Code, err)
		}
		l.call(t, "POST", "/uninstall", lifecycleBody("42", "acme", "s3cret-42", "userId", "code"))
	}
	// The budget fills up again.
	l.clock.advance(time.Minute)
	if w := forged("192.0.2.1"); w.Code != http.StatusForbidden {
		t.Fatalf("after a minute: %d", w.Code)
	}
}

// TestHandlerCommitsWhenTheAppAcknowledges: a call the app does not
// acknowledge changes nothing, so the service's retry finds the same
// state.
func TestHandlerCommitsWhenTheAppAcknowledges(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	down := failingApp{status: http.StatusBadGateway}
	serve := func(path, body string, next Next) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		if err := l.h.Serve(w, httptest.NewRequest("POST", path, strings.NewReader(body)), next); err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := serve("/installed", lifecycleBody("42", "acme", "s3cret-42"), down); w.Code != http.StatusBadGateway || l.book.Len() != 0 {
		t.Fatalf("installed the app did not acknowledge: %d, %d held", w.Code, l.book.Len())
	}
	if w := serve("/installed", lifecycleBody("42", "acme", "s3cret-42"), l.app); w.Code != http.StatusNoContent || l.book.Len() != 1 {
		t.Fatalf("the retry: %d, %d held", w.Code, l.book.Len())
	}
	uninstall := lifecycleBody("42", "acme", "s3cret-42", "userId", "code")
	if w := serve("/uninstall", uninstall, down); w.Code != http.StatusBadGateway || l.book.Len() != 1 {
		t.Fatalf("uninstall the app did not acknowledge: %d, %d held", w.Code, l.book.Len())
	}
	if w := serve("/uninstall", uninstall, l.app); w.Code != http.StatusNoContent || l.book.Len() != 0 {
		t.Fatalf("the retry: %d, %d held", w.Code, l.book.Len())
	}
	got := strings.Join(l.reports, ",")
	if got != "not_acknowledged,stored,not_acknowledged,uninstalled" {
		t.Errorf("reports = %s", got)
	}
	// A store that fails once the app acknowledged: 503 with Retry-After,
	// the app's answer dropped, nothing held.
	l.book.cfg.Store = failingStore{l.book.cfg.Store}
	w := serve("/installed", lifecycleBody("42", "acme", "s3cret-42"), failingApp{status: http.StatusOK})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || strings.Contains(w.Body.String(), "app failed") ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") || l.book.Len() != 0 {
		t.Fatalf("store failed: %d %v %s, %d held", w.Code, w.Header(), w.Body, l.book.Len())
	}
}

// failingStore fails every write.
type failingStore struct{ Store }

func (failingStore) Put(string, []byte) error { return errors.New("disk full") }

// failingApp answers every request with status.
type failingApp struct{ status int }

func (f failingApp) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(f.status)
	_, _ = w.Write([]byte("app failed"))
	return nil
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
		{"POST", "/installed", strings.Replace(lifecycleBody("42", "acme", "s3cret-42"), `{`, `{"organizationid":43,`, 1), http.StatusBadRequest, "differ"},
		{"POST", "/installed", strings.Replace(lifecycleBody("42", "acme", "s3cret-42"), `{`, `{"domain":"globex",`, 1), http.StatusBadRequest, "twice"},
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
	l.svc.give("43", "s3cret-43")
	for _, b := range []string{lifecycleBody("42", "acme", "s3cret-42"), lifecycleBody("43", "globex", "s3cret-43")} {
		if w := l.call(t, "POST", "/installed", b); w.Code != http.StatusNoContent {
			t.Fatal(w.Code)
		}
	}
	uninstall := func(domain, secret string) string { return lifecycleBody("42", domain, secret, "userId", "code") }

	w := l.call(t, "POST", "/uninstall", uninstall("acme", "s3cret-wrong"))
	if w.Code != http.StatusForbidden || l.book.Len() != 2 || len(l.purged) != 0 {
		t.Fatalf("wrong secret: %d, %d held", w.Code, l.book.Len())
	}
	w = l.call(t, "POST", "/uninstall", uninstall("globex", "s3cret-42"))
	if w.Code != http.StatusForbidden || l.book.Len() != 2 {
		t.Fatalf("another organization's domain: %d, %d held", w.Code, l.book.Len())
	}
	w = l.call(t, "POST", "/uninstall", uninstall("acme", "s3cret-42"))
	if w.Code != http.StatusNoContent || l.book.Len() != 1 {
		t.Fatalf("right secret: %d, %d held", w.Code, l.book.Len())
	}
	if _, err := l.book.Get("42"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the installation is still stored")
	}
	if len(l.purged) != 1 || l.purged[0] != "42/acme" {
		t.Errorf("purged %v", l.purged)
	}
	told := l.app.told()
	want := `/uninstall {"event":"uninstall","appId":"demo-app","clientId":"client-1","organizationId":42,"domain":"acme","baseUrl":"https://service.example"}`
	if len(told) != 3 || told[2] != want {
		t.Fatalf("the app was told %q", told)
	}
	// Again: nothing to remove, 2xx, the app not told.
	w = l.call(t, "POST", "/uninstall", uninstall("acme", "anything"))
	if w.Code != http.StatusOK || len(l.app.told()) != 3 {
		t.Fatalf("uninstall of nothing: %d", w.Code)
	}
}

func TestHandlerSubscriptionPaid(t *testing.T) {
	l := newLifecycle(t, false)
	l.svc.give("42", "s3cret-42")
	if w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42")); w.Code != http.StatusOK {
		t.Fatalf("installed without forward: %d", w.Code)
	}
	paid := func(org, domain string) *httptest.ResponseRecorder {
		return l.call(t, "POST", "/subscription-paid", `{"appId":"demo-app","organizationId":"`+org+`","domain":"`+domain+`"}`)
	}
	for range 5 {
		if w := paid("42", "acme"); w.Code != http.StatusOK {
			t.Fatalf("paid: %d %s", w.Code, w.Body)
		}
	}
	if len(l.purged) != 1 || l.queries != 1 {
		t.Fatalf("5 calls at once purged %d times and asked %d, want 1", len(l.purged), l.queries)
	}
	l.clock.advance(DefaultPaidInterval)
	paid("42", "acme")
	if len(l.purged) != 2 || l.queries != 2 {
		t.Fatalf("a call after the interval purged: %v", l.purged)
	}
	// A made-up organization, or acme's id with another domain: answered,
	// nothing asked or purged.
	if w := paid("999", "acme"); w.Code != http.StatusOK || len(l.purged) != 2 || l.queries != 2 {
		t.Fatalf("made-up organization: %d, purged %v", w.Code, l.purged)
	}
	if w := paid("42", "globex"); w.Code != http.StatusOK || len(l.purged) != 2 || l.queries != 2 {
		t.Fatalf("another domain: %d, purged %v", w.Code, l.purged)
	}
	// The service does not confirm it: refused, nothing purged.
	l.clock.advance(DefaultPaidInterval)
	l.unpaid = true
	if w := paid("42", "acme"); w.Code != http.StatusForbidden || len(l.purged) != 2 || !strings.Contains(w.Body.String(), "does not confirm") {
		t.Fatalf("unpaid: %d %s, purged %v", w.Code, w.Body, l.purged)
	}
	if len(l.app.told()) != 0 {
		t.Error("the app was told with forward off")
	}
}

func TestHandlerSubscriptionPaidToldFromTheService(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42"))
	w := l.call(t, "POST", "/subscription-paid", `{"appId":"made-up","organizationId":42,"domain":"acme","plan":"forged"}`)
	if w.Code != http.StatusNoContent {
		t.Fatalf("paid: %d %s", w.Code, w.Body)
	}
	told := l.app.told()
	want := `/subscription-paid {"event":"subscription_paid","appId":"demo-app","clientId":"client-1","organizationId":42,"domain":"acme",` +
		`"baseUrl":"https://service.example","expires":"2026-03-31T12:00:00Z"}`
	if len(told) != 2 || told[1] != want {
		t.Fatalf("the app was told %q, want %q", told, want)
	}
}

func TestHandlerClientRefused(t *testing.T) {
	l := newLifecycle(t, true)
	l.svc.give("42", "s3cret-42")
	l.svc.badClient.Store(true)
	w := l.call(t, "POST", "/installed", lifecycleBody("42", "acme", "s3cret-42"))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "client_id/client_secret") || strings.Contains(w.Body.String(), "app secret") {
		t.Fatalf("invalid_client: %d %s", w.Code, w.Body)
	}
}

func TestSameSecret(t *testing.T) {
	if !SameSecret("abc", "abc") || SameSecret("abc", "abd") || SameSecret("abc", "abcd") || SameSecret("", "x") {
		t.Fatal("SameSecret is wrong")
	}
}
