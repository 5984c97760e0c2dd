package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// tenantsService is the emulated service of the tenant isolation tests:
// acme, globex and initech paid, unpaid.example not, and a count of the
// token requests it answered.
type tenantsService struct {
	*emulator.Server
	URL      string
	clientID string // the test's own, so that its installations file is its own
	tokens   atomic.Int64
}

func newTenantsService(t *testing.T) *tenantsService {
	t.Helper()
	paid := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	clientID := "client-" + strings.ReplaceAll(t.Name(), "/", "-")
	svc, err := emulator.New(emulator.Config{
		ClientID: clientID, ClientSecret: "demo-client-secret", RedirectURIs: []string{"http://localhost/oauth/callback"},
		Organizations: []emulator.Organization{
			{Domain: "acme.example", ID: 1, ActiveUntil: paid},
			{Domain: "globex.example", ID: 2, ActiveUntil: paid},
			{Domain: "initech.example", ID: 3, ActiveUntil: paid},
			{Domain: "unpaid.example", ID: 4, SubscribeLink: "https://service.example/checkout"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &tenantsService{Server: svc, clientID: clientID}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			s.tokens.Add(1)
		}
		svc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// site is the Caddyfile of the app at upstream, installed through this
// service.
func (s *tenantsService) site(t *testing.T, upstream string) string {
	return strings.Replace(installationsSite(t, s.URL, upstream), "client_id demo-client", "client_id "+s.clientID, 1)
}

// body is a lifecycle call of this service's client, naming org and
// domain, with secret.
func (s *tenantsService) body(org, domain, secret string) string {
	return fmt.Sprintf(`{"appId":"demo-app","appSecret":%q,"clientId":%q,"userId":7,"organizationId":%s,"domain":%q,"baseUrl":"https://forged.example"}`,
		secret, s.clientID, org, domain)
}

// install installs the app for domain through the gateway, as the service
// does, and returns the installation's app secret.
func (s *tenantsService) install(t *testing.T, domain string) string {
	t.Helper()
	call, err := s.InstallApp(context.Background(), nil, e2eURL("/installed"), domain, s.URL)
	if err != nil || !call.OK() {
		t.Fatalf("install %s: %+v %v", domain, call, err)
	}
	secret, _ := s.AppSecret(domain)
	return secret
}

// lifecycleCall posts a lifecycle call to the gateway as a client would.
func lifecycleCall(t *testing.T, path string, body string, header map[string]string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, answer := request(t, client, "POST", path, header, []byte(body))
	return resp.StatusCode, answer
}

// adminCall is a request of Caddy's admin API.
func adminCall(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", e2eAdminPort, path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTenantCannotTakeOverAnotherInstallation: an organization that knows
// its own app secret cannot install under another organization's id, nor
// under its domain used as an id, nor make phantom installations: the
// installation is stored under the organization the service's app token
// names.
func TestTenantCannotTakeOverAnotherInstallation(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, svc.site(t, app.URL))
	acme, globex := svc.install(t, "acme.example"), svc.install(t, "globex.example")
	told := app.count("/installed")

	for _, org := range []string{"1", `"acme.example"`, `"4242"`} {
		status, body := lifecycleCall(t, "/installed", svc.body(org, "globex.example", globex), nil)
		if status != http.StatusForbidden || !strings.Contains(body, "not for the organization the call names") {
			t.Fatalf("globex's secret naming organization %s: %d %s", org, status, body)
		}
	}
	for i := range 50 {
		lifecycleCall(t, "/installed", svc.body(fmt.Sprint(1000+i), "globex.example", globex), nil)
	}
	if n := app.count("/installed"); n != told {
		t.Fatalf("the app was told of %d unproved installations", n-told)
	}
	status, list := adminCall(t, "GET", "/service/installations", "")
	if status != 200 || strings.Count(list, `"organization_id"`) != 2 || strings.Contains(list, `"organization_id":"acme.example"`) {
		t.Fatalf("the installations after the attack: %s", list)
	}

	// acme's deliveries are acme's, with acme's app token; globex's secret
	// does not pass as acme.
	if status, body := deliverFor(t, "acme.example", acme, nil); status != 200 || issuedFor(t, app.last().token) != "acme.example" {
		t.Fatalf("acme's delivery: %d %s", status, body)
	}
	if status, _ := deliverFor(t, "acme.example", globex, nil); status != http.StatusUnauthorized {
		t.Fatalf("globex signing as acme: %d", status)
	}
	// An id is not a domain: globex's secret under X-Service-Domain 2.
	if status, _ := deliverFor(t, "2", globex, nil); status != http.StatusForbidden {
		t.Fatalf("globex's id sent as a domain: %d", status)
	}
	// The admin's removal by domain removes acme itself.
	if status, body := adminCall(t, "DELETE", "/service/installations?organization=acme.example", ""); status != 200 {
		t.Fatalf("delete acme: %d %s", status, body)
	}
	if status, _ := deliverFor(t, "acme.example", acme, nil); status != http.StatusForbidden {
		t.Fatalf("acme's delivery after its removal: %d", status)
	}
}

// TestForgedSubscriptionPaidIsNotBelieved: a subscription_paid is acted on
// and told to the app only when the service's subscription query confirms
// it, and the app reads the gateway's body, never the caller's.
func TestForgedSubscriptionPaidIsNotBelieved(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, svc.site(t, app.URL))
	svc.install(t, "acme.example")
	svc.install(t, "unpaid.example")
	forged := map[string]string{"X-Service-User-Id": "666", "X-Service-Domain": "globex.example", "X-Service-Signature": "sha256=00"}

	// Unpaid: refused every time, the app never told.
	for range 5 {
		status, body := lifecycleCall(t, "/subscription-paid", `{"appId":"demo-app","organizationId":4,"domain":"unpaid.example"}`, forged)
		if status != http.StatusForbidden && status != http.StatusTooManyRequests {
			t.Fatalf("forged paid of an unpaid organization: %d %s", status, body)
		}
	}
	// Made up: answered, nothing told.
	for i := range 300 {
		lifecycleCall(t, "/subscription-paid", fmt.Sprintf(`{"appId":"x","organizationId":%d,"domain":"nobody.example"}`, 5000+i), forged)
	}
	if n := app.count("/subscription-paid"); n != 0 {
		t.Fatalf("the app was told %d forged subscription_paid calls", n)
	}
	// Paid, with a forged body: the app is told once, in the gateway's
	// words, whatever the caller wrote.
	for range 5 {
		lifecycleCall(t, "/subscription-paid", `{"appId":"made-up","organizationId":1,"domain":"acme.example","plan":"forged"}`, forged)
	}
	if n := app.count("/subscription-paid"); n != 1 {
		t.Fatalf("the app was told %d times, want once", n)
	}
	seen := app.last()
	if strings.Contains(seen.body, "forged") || strings.Contains(seen.body, "made-up") || !strings.Contains(seen.body, `"appId":"demo-app"`) ||
		!strings.Contains(seen.body, `"expires":"2099-01-01T00:00:00Z"`) || !strings.Contains(seen.body, `"organizationId":1,"domain":"acme.example"`) {
		t.Fatalf("the app was told %s", seen.body)
	}
	if seen.header.Get("X-Service-User-Id") != "" || seen.header.Get("X-Service-Signature") != "" || seen.header.Get("X-Service-Domain") == "globex.example" {
		t.Fatalf("the app got the caller's headers: %v", seen.header)
	}
}

// TestLifecycleCallsToldFromWhatWasStored: an uninstall with one
// organization's real secret cannot name another's domain, and bodies
// with keys in two cases or twice are refused.
func TestLifecycleCallsToldFromWhatWasStored(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, svc.site(t, app.URL))
	acme, globex := svc.install(t, "acme.example"), svc.install(t, "globex.example")

	uninstall := `{"appId":"demo-app","appSecret":"` + globex + `","clientId":"` + svc.clientID + `","organizationId":2,"domain":"acme.example","baseUrl":"x"}`
	if status, body := lifecycleCall(t, "/uninstall", uninstall, nil); status != http.StatusForbidden {
		t.Fatalf("globex's uninstall naming acme's domain: %d %s", status, body)
	}
	if app.count("/uninstall") != 0 {
		t.Fatal("the app was told of a refused uninstall")
	}
	for _, org := range []string{"acme.example", "globex.example"} {
		secret := map[string]string{"acme.example": acme, "globex.example": globex}[org]
		if status, _ := deliverFor(t, org, secret, nil); status != 200 {
			t.Fatalf("%s lost its installation to a refused uninstall", org)
		}
	}
	for _, body := range []string{
		strings.Replace(svc.body("2", "globex.example", globex), `{`, `{"organizationid":1,`, 1),
		strings.Replace(svc.body("2", "globex.example", globex), `{`, `{"organizationId":1,`, 1),
	} {
		if status, answer := lifecycleCall(t, "/installed", body, nil); status != http.StatusBadRequest || !strings.Contains(answer, "message") {
			t.Fatalf("ambiguous keys: %d %s", status, answer)
		}
	}
	// The service's own uninstall: the app reads the stored installation.
	if call, err := svc.UninstallApp(context.Background(), nil, e2eURL("/uninstall"), "globex.example", svc.URL); err != nil || !call.OK() {
		t.Fatalf("uninstall: %+v %v", call, err)
	}
	want := `{"event":"uninstall","appId":"demo-app","clientId":"` + svc.clientID + `","organizationId":2,"domain":"globex.example","baseUrl":"` + svc.URL + `"}`
	if seen := app.last(); seen.path != "/uninstall" || seen.body != want {
		t.Fatalf("the app was told %q, want %q", seen.body, want)
	}
}

// TestUnprovedLifecycleCallsAreBudgeted: a flood of forged installed calls
// makes at most the source's budget of token requests, and the service's
// own installation goes through afterwards.
func TestUnprovedLifecycleCallsAreBudgeted(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, svc.site(t, app.URL))
	var wg sync.WaitGroup
	var limited atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			status, _ := lifecycleCall(t, "/installed", svc.body(fmt.Sprint(100+i), "acme.example", "forged-secret-0123456789"), nil)
			if status == http.StatusTooManyRequests {
				limited.Add(1)
			}
		})
	}
	wg.Wait()
	if n := svc.tokens.Load(); n > 10 {
		t.Fatalf("200 forged installed calls made %d token requests, want at most 10", n)
	}
	if limited.Load() < 190 {
		t.Fatalf("%d of 200 forged calls were answered 429", limited.Load())
	}
	resp, body := request(t, &http.Client{}, "POST", "/installed", nil, []byte(svc.body("1", "acme.example", "forged-secret-0123456789")))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many") {
		t.Fatalf("a spent budget: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// A client cannot name another source: without trusted_proxies, its
	// X-Forwarded-For is not its address.
	before := svc.tokens.Load()
	req, _ := http.NewRequest("POST", e2eURL("/installed"), strings.NewReader(svc.body("1", "acme.example", "x")))
	req.Header.Set("X-Forwarded-For", "192.0.2.1") // not trusted: the source stays loopback
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a client's X-Forwarded-For changed its source: %v %v", resp, err)
	}
	if svc.tokens.Load() != before {
		t.Fatal("a limited call made a token request")
	}
}

// TestLifecycleCommittedWhenTheAppAcknowledges: with the app failing or
// gone, an installed call stores nothing and an uninstall removes
// nothing, so the gateway holds what the service holds.
func TestLifecycleCommittedWhenTheAppAcknowledges(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, svc.site(t, app.URL))
	ctx := context.Background()

	for _, mode := range []*atomic.Bool{&app.failing, &app.gone} {
		mode.Store(true)
		call, err := svc.InstallApp(ctx, nil, e2eURL("/installed"), "acme.example", svc.URL)
		mode.Store(false)
		if err != nil || call.OK() {
			t.Fatalf("install with the app down: %+v %v", call, err)
		}
		if _, ok := svc.AppSecret("acme.example"); ok {
			t.Fatal("the emulator kept an installation the app did not acknowledge")
		}
		if status, body := adminCall(t, "POST", "/service/installations/token", `{"organization":"acme.example"}`); status != http.StatusNotFound {
			t.Fatalf("the gateway kept an installation the app did not acknowledge: %d %s", status, body)
		}
	}
	acme := svc.install(t, "acme.example")
	uninstall := `{"appId":"demo-app","appSecret":"` + acme + `","clientId":"` + svc.clientID + `","organizationId":1,"domain":"acme.example","baseUrl":"x"}`
	app.failing.Store(true)
	if status, _ := lifecycleCall(t, "/uninstall", uninstall, nil); status != http.StatusServiceUnavailable {
		t.Fatalf("uninstall with the app failing: %d", status)
	}
	app.failing.Store(false)
	if status, _ := deliverFor(t, "acme.example", acme, nil); status != 200 {
		t.Fatal("an uninstall the app did not acknowledge removed the installation")
	}
	// The service's retry finds the record and the app is told.
	if status, body := lifecycleCall(t, "/uninstall", uninstall, nil); status != 200 || app.last().path != "/uninstall" {
		t.Fatalf("the retried uninstall: %d %s", status, body)
	}
	if status, _ := deliverFor(t, "acme.example", acme, nil); status != http.StatusForbidden {
		t.Fatal("the retried uninstall left the installation")
	}
}

// TestLifecycleSaysWhichSideIsWrong: a wrong client_secret in service_app
// is reported as such, not as a refused app secret.
func TestLifecycleSaysWhichSideIsWrong(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	site := strings.Replace(svc.site(t, app.URL), "client_secret demo-client-secret", "client_secret not-the-client-secret", 1)
	startCaddy(t, site)
	call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", svc.URL)
	if err != nil || call.Status != http.StatusServiceUnavailable || !strings.Contains(string(call.Body), "refused service_app's client_id/client_secret") ||
		strings.Contains(string(call.Body), "app secret") {
		t.Fatalf("a wrong client_secret: %d %s %v", call.Status, call.Body, err)
	}
}
