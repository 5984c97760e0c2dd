package emulator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/servicegate/servicegate/signature"
)

// lifecycleApp records the lifecycle calls it receives and answers status.
type lifecycleApp struct {
	mu     sync.Mutex
	calls  []map[string]any
	status int
}

func (a *lifecycleApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	m["path"] = r.URL.Path
	a.mu.Lock()
	a.calls = append(a.calls, m)
	status := a.status
	a.mu.Unlock()
	w.WriteHeader(status)
}

func appGrantRequest(secret, domain string) map[string]string {
	return map[string]string{"grant_type": "service_app", "client_id": testClientID, "client_secret": testSecret,
		"app_id": DefaultAppIdentifier, "app_secret": secret, "domain": domain, "user_id": "7"}
}

func TestInstallAppAndServiceAppGrant(t *testing.T) {
	s, _ := newTestServer(t)
	app := &lifecycleApp{status: http.StatusOK}
	srv := httptest.NewServer(app)
	defer srv.Close()
	ctx := context.Background()

	call, err := s.InstallApp(ctx, srv.Client(), srv.URL+"/installed", "acme.example", "https://service.example")
	if err != nil || !call.OK() {
		t.Fatalf("InstallApp = %+v, %v", call, err)
	}
	got := app.calls[0]
	secret, ok := s.AppSecret("acme.example")
	if !ok || got["appSecret"] != secret || got["path"] != "/installed" || got["organizationId"] != float64(1) ||
		got["domain"] != "acme.example" || got["clientId"] != testClientID || got["userId"] != float64(DefaultUserID) ||
		got["appId"] != DefaultAppIdentifier || got["code"] == "" || got["baseUrl"] != "https://service.example" {
		t.Fatalf("installed call %v", got)
	}

	// The grant answers the installation's secret, for its organization.
	status, out := exchange(t, s, appGrantRequest(secret, "acme.example"))
	if status != http.StatusOK {
		t.Fatalf("grant: %d %v", status, out)
	}
	claims := decodeClaims(t, out["access_token"].(string))
	if claims["domain"] != "acme.example" {
		t.Errorf("claims %v", claims)
	}
	for name, req := range map[string]map[string]string{
		"made-up secret":      appGrantRequest("made-up", "acme.example"),
		"other organization":  appGrantRequest(secret, "unpaid.example"),
		"wrong client secret": func() map[string]string { r := appGrantRequest(secret, ""); r["client_secret"] = "x"; return r }(),
	} {
		if status, out := exchange(t, s, req); status < 400 {
			t.Errorf("%s: %d %v", name, status, out)
		}
	}

	// Another installation gets another secret; deliveries are signed with it.
	if _, err := s.InstallApp(ctx, srv.Client(), srv.URL+"/installed", "unpaid.example", "https://service.example"); err != nil {
		t.Fatal(err)
	}
	other, _ := s.AppSecret("unpaid.example")
	if other == secret || len(other) < 20 {
		t.Fatal("two installations share a secret, or it is short")
	}
	if err := signature.Verify([]byte("{}"), SignDelivery([]byte("{}"), other), other); err != nil {
		t.Fatal(err)
	}

	// Paid, then uninstalled: the secret gets no more tokens.
	if call, err := s.SubscriptionPaid(ctx, srv.Client(), srv.URL+"/subscription-paid", "acme.example"); err != nil || !call.OK() {
		t.Fatalf("paid %+v %v", call, err)
	}
	if got := app.calls[2]; got["path"] != "/subscription-paid" || got["organizationId"] != float64(1) || got["appSecret"] != nil {
		t.Fatalf("paid call %v", got)
	}
	if call, err := s.UninstallApp(ctx, srv.Client(), srv.URL+"/uninstall", "acme.example", "https://service.example"); err != nil || !call.OK() {
		t.Fatalf("uninstall %+v %v", call, err)
	}
	if got := app.calls[3]; got["appSecret"] != secret || got["userId"] != nil || got["code"] != nil {
		t.Fatalf("uninstall call %v", got)
	}
	if status, _ := exchange(t, s, appGrantRequest(secret, "acme.example")); status != http.StatusBadRequest {
		t.Errorf("grant after uninstall: %d", status)
	}
	if _, err := s.UninstallApp(ctx, srv.Client(), srv.URL+"/uninstall", "acme.example", ""); err == nil {
		t.Error("uninstalled twice")
	}
}

func TestInstallAppNotAcknowledgedIsUndone(t *testing.T) {
	s, _ := newTestServer(t)
	app := &lifecycleApp{status: http.StatusForbidden}
	srv := httptest.NewServer(app)
	defer srv.Close()
	call, err := s.InstallApp(context.Background(), srv.Client(), srv.URL+"/installed", "acme.example", "")
	if err != nil || call.OK() {
		t.Fatalf("InstallApp = %+v, %v", call, err)
	}
	secret := app.calls[0]["appSecret"].(string)
	if _, ok := s.AppSecret("acme.example"); ok {
		t.Fatal("an installation the app refused is kept")
	}
	if status, _ := exchange(t, s, appGrantRequest(secret, "acme.example")); status != http.StatusBadRequest {
		t.Errorf("grant of a refused installation: %d", status)
	}
	if _, err := s.InstallApp(context.Background(), nil, srv.URL, "nobody.example", ""); err == nil {
		t.Error("installed for an unknown organization")
	}
}

func TestLifecycleEndpointRefusals(t *testing.T) {
	s, _ := newTestServer(t)
	post := func(body string) int {
		r := httptest.NewRequest(http.MethodPost, "http://localhost"+LifecyclePath, strings.NewReader(body))
		return do(s, r).Code
	}
	if code := do(s, httptest.NewRequest(http.MethodGet, "http://localhost"+LifecyclePath, nil)).Code; code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", code)
	}
	// A page whose name was rebound to this machine cannot use it.
	if code := do(s, httptest.NewRequest(http.MethodPost, LifecyclePath, strings.NewReader(`{}`))).Code; code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host: %d", code)
	}
	for body, want := range map[string]int{
		`{`: http.StatusBadRequest,
		`{"event":"installed","organization":"acme.example","url":"file:///etc/passwd"}`:      http.StatusBadRequest,
		`{"event":"deleted","organization":"acme.example","url":"http://127.0.0.1:1/x"}`:      http.StatusBadRequest,
		`{"event":"installed","organization":"nobody.example","url":"http://127.0.0.1:1/x"}`:  http.StatusNotFound,
		`{"event":"delivery","organization":"acme.example","url":"http://127.0.0.1:1/hooks"}`: http.StatusConflict, // never installed
	} {
		if code := post(body); code != want {
			t.Errorf("%s: %d, want %d", body, code, want)
		}
	}
}
