package emulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/examples/formatapp"
	"github.com/servicegate/servicegate/signature"
)

// consoleDescriptor is the app the console's tests talk to.
const consoleDescriptor = `{
  "identifier": "demo-app",
  "modules": {
    "custom-file-format": [
      {"key": "kv-format", "type": "kv", "url": "/file-format", "signaturePatterns": {"fileName": "\\.kv$"}},
      {"key": "other-format", "type": "other", "url": "/other-format", "signaturePatterns": {"fileName": "\\.other$"}}
    ],
    "file-pre-export": [{"key": "shout", "url": "/pre-export"}],
    "webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated", "project.approved"]}]
  },
  "events": {"installed": "/installed", "uninstall": "/uninstall", "subscription_paid": "/subscription-paid"}
}`

// fakeGateway stands in for a gateway and its app in one: it serves the
// descriptor, keeps the app secret of each installed call, checks the
// signature of deliveries with it, and tells the emulator its verdict
// through Verdicts, as servicegate's gateway does in the same process.
type fakeGateway struct {
	*httptest.Server
	verdicts *Verdicts
	mu       sync.Mutex
	secrets  map[string]string
	// headers are the requests' headers as the app got them.
	headers []http.Header
}

func newFakeGateway(t testing.TB) *fakeGateway {
	g := &fakeGateway{verdicts: &Verdicts{}, secrets: map[string]string{}}
	formats := formatapp.Handler()
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := g.verdicts.Take(r)
		before := r.Header.Clone()
		refuse := func(status int, msg string) {
			call.Refused(msg)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
		}
		pass := func() {
			r.Header.Set("X-Service-App-Token", "an-app-token")
			call.Passed(before, r.Header)
			g.mu.Lock()
			g.headers = append(g.headers, r.Header.Clone())
			g.mu.Unlock()
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch r.URL.Path {
		case "/manifest.json":
			io.WriteString(w, consoleDescriptor)
		case "/installed", "/uninstall":
			var ev struct {
				AppSecret string `json:"appSecret"`
				Domain    string `json:"domain"`
			}
			json.Unmarshal(body, &ev)
			g.mu.Lock()
			if r.URL.Path == "/installed" {
				g.secrets[ev.Domain] = ev.AppSecret
			} else {
				delete(g.secrets, ev.Domain)
			}
			g.mu.Unlock()
			pass()
			io.WriteString(w, `{"ok":true}`)
		case "/subscription-paid":
			pass()
			io.WriteString(w, `{"ok":true}`)
		case "/webhooks":
			g.mu.Lock()
			secret, ok := g.secrets[r.Header.Get("X-Service-Domain")]
			g.mu.Unlock()
			switch {
			case r.Header.Get("X-Service-Signature") == "":
				refuse(http.StatusUnauthorized, "The delivery is not signed: its X-Service-Signature header is missing.")
			case !ok:
				refuse(http.StatusForbidden, "The app is not installed for the organization of this delivery.")
			case signature.Verify(body, r.Header.Get("X-Service-Signature"), secret) != nil:
				refuse(http.StatusUnauthorized, "The signature of the delivery does not match its body.")
			default:
				pass()
				io.WriteString(w, `{"received":1}`)
			}
		case "/pre-export":
			pass()
			// Shouts: every text in capitals, so the console shows changes.
			var job struct {
				Strings []map[string]any `json:"strings"`
			}
			json.Unmarshal(body, &job)
			for _, s := range job.Strings {
				if text, ok := s["text"].(string); ok && text != strings.ToUpper(text) {
					s["text"] = strings.ToUpper(text)
				}
			}
			json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"strings": job.Strings}})
		default:
			pass()
			r.URL.Path = strings.Replace(r.URL.Path, "/other-format", "/file-format", 1)
			formats.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(g.Close)
	return g
}

// newConsoleServer is an emulator whose console calls the fake gateway.
func newConsoleServer(t testing.TB, g *fakeGateway, keep int) *Server {
	t.Helper()
	c := &clock{now: testStart}
	cfg := testConfig(c)
	cfg.Console = ConsoleConfig{App: g.URL, Gateway: g.verdicts, Keep: keep}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// api sends one request to the console's API as the page would (from
// localhost, same origin) and decodes the JSON answer into out when it
// is given.
func api(t testing.TB, s *Server, method, path, body string, out any, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	rec := do(s, r)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/") &&
		!strings.HasPrefix(ct, "application/octet-stream") && ct != "application/x-ndjson" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %s is not the JSON expected: %v", method, path, rec.Code, rec.Body, err)
		}
	}
	return rec
}

// mustAPI is api that fails the test unless the status is want.
func mustAPI(t testing.TB, s *Server, want int, method, path, body string, out any) {
	t.Helper()
	if rec := api(t, s, method, path, body, out); rec.Code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, want)
	}
}

func orgOf(t testing.TB, s *Server, domain string) orgItem {
	t.Helper()
	var orgs []orgItem
	mustAPI(t, s, 200, "GET", "/emulator/api/organizations", "", &orgs)
	for _, o := range orgs {
		if o.Domain == domain {
			return o
		}
	}
	t.Fatalf("no organization %s in %+v", domain, orgs)
	return orgItem{}
}

func calls(t *testing.T, s *Server, query string) []callItem {
	t.Helper()
	var items []callItem
	mustAPI(t, s, 200, "GET", "/emulator/api/calls"+query, "", &items)
	return items
}

func TestConsoleOrganizations(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	var raw []map[string]any
	mustAPI(t, s, 200, "GET", "/emulator/api/organizations", "", &raw)
	if len(raw) != 3 {
		t.Fatalf("%d organizations", len(raw))
	}
	want := []struct {
		domain              string
		id                  float64
		subscription, state string
	}{{"acme.example", 1, "paid", "not_installed"}, {"unpaid.example", 2, "unpaid", "not_installed"}, {"missing.example", 3, "missing", "not_installed"}}
	for i, w := range want {
		o := raw[i]
		if o["domain"] != w.domain || o["id"] != w.id || o["subscription"].(map[string]any)["state"] != w.subscription ||
			o["installation"].(map[string]any)["state"] != w.state {
			t.Errorf("organization %d: %v, want %+v", i, o, w)
		}
	}
}

func TestConsoleInstallMakesTheCallThroughTheGateway(t *testing.T) {
	g := newFakeGateway(t)
	s := newConsoleServer(t, g, 0)
	var answer actionAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", &answer)
	if answer.Organization.Installation.State != "installed" || answer.Organization.Installation.Since == "" {
		t.Fatalf("after install: %+v", answer.Organization)
	}
	call := answer.Call
	if call == nil || call.Kind != "installed" || call.Organization != "acme.example" || call.Status != 200 ||
		call.Method != "POST" || call.URL != g.URL+"/installed" || call.Direction != "sent" {
		t.Fatalf("the installed call: %+v", call)
	}
	if v := call.Gateway; v.Outcome != OutcomeAccepted || v.From != "gateway" || len(v.Added) != 1 || v.Added[0] != "X-Service-App-Token" {
		t.Fatalf("verdict %+v, want accepted by the gateway with X-Service-App-Token added", v)
	}
	// The correlation header never reached the app.
	for _, h := range g.headers {
		if h.Get(CallHeader) != "" {
			t.Fatalf("the app got %s", CallHeader)
		}
	}
	if list := calls(t, s, ""); len(list) != 1 || list[0].ID != call.ID {
		t.Fatalf("the calls: %+v", list)
	}
	// An installation the emulator does not know is refused, and changes nothing.
	if rec := api(t, s, "POST", "/emulator/api/organizations/nobody.example/install", "", nil); rec.Code != 404 || !strings.Contains(rec.Body.String(), "nobody.example") {
		t.Fatalf("an unknown organization: %d %s", rec.Code, rec.Body)
	}
	if n := len(calls(t, s, "")); n != 1 {
		t.Fatalf("%d calls after a refused action", n)
	}
}

func TestConsoleSecretMaskedUntilAsked(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	secret, _ := s.AppSecret("acme.example")
	org := orgOf(t, s, "acme.example")
	if strings.Contains(org.Secret, secret[:len(secret)-4]) || !strings.HasSuffix(org.Secret, secret[len(secret)-4:]) ||
		len([]rune(strings.Trim(org.Secret, "•"))) > 4 {
		t.Fatalf("the masked secret %q shows more than the last 4 characters of the secret", org.Secret)
	}
	// Nothing else shows it: not the list, not the installed call's detail.
	var list []callItem
	rec := api(t, s, "GET", "/emulator/api/calls", "", &list)
	detail := api(t, s, "GET", "/emulator/api/calls/"+strconv.FormatInt(list[0].ID, 10), "", nil)
	for _, body := range []string{rec.Body.String(), detail.Body.String()} {
		if strings.Contains(body, secret) {
			t.Fatalf("the API shows the secret: %s", body)
		}
	}
	var d callDetail
	json.Unmarshal(detail.Body.Bytes(), &d)
	if !strings.Contains(d.Request.Body, `"appSecret": "••••`) {
		t.Fatalf("the installed call's body does not show appSecret masked: %s", d.Request.Body)
	}
	var revealed map[string]string
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/secret", "", &revealed)
	if revealed["secret"] != secret {
		t.Fatalf("revealed %v", revealed)
	}
	// Another site's page cannot ask for it.
	if rec := api(t, s, "POST", "/emulator/api/organizations/acme.example/secret", "", nil, "Sec-Fetch-Site", "cross-site"); rec.Code != 403 || strings.Contains(rec.Body.String(), secret) {
		t.Fatalf("a cross-site reveal: %d %s", rec.Code, rec.Body)
	}
	if rec := api(t, s, "POST", "/emulator/api/organizations/unpaid.example/secret", "", nil); rec.Code != 409 {
		t.Fatalf("the secret of an organization without installation: %d", rec.Code)
	}
}

func TestConsoleDeliveries(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	// Never installed: 409, and no call.
	if rec := api(t, s, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.translated"}`, nil); rec.Code != 409 ||
		!strings.Contains(rec.Body.String(), "never installed") {
		t.Fatalf("a delivery of an organization never installed: %d %s", rec.Code, rec.Body)
	}
	if n := len(calls(t, s, "")); n != 0 {
		t.Fatalf("%d calls after a refused delivery", n)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	var item callItem
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.translated"}`, &item)
	if item.Kind != "delivery" || item.Status != 200 || item.Gateway.Outcome != OutcomeAccepted || item.Module != "events-hook" {
		t.Fatalf("the delivery: %+v", item)
	}
	var detail callDetail
	mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+strconv.FormatInt(item.ID, 10), "", &detail)
	if sig := detail.Request.Headers["X-Service-Signature"]; len(sig) != 1 || !strings.HasPrefix(sig[0], "••••") || len(sig[0]) > len("••••")+4 {
		t.Fatalf("the signature is not masked: %v", sig)
	}
	if !detail.Request.JSON || !strings.Contains(detail.Request.Body, "\n  \"events\": [") || !strings.Contains(detail.Request.Body, `"project.translated"`) {
		t.Fatalf("the delivery's body is not pretty JSON: %q", detail.Request.Body)
	}
	// An edited body is sent as written.
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"x","body":"{\"events\":[{\"event\":\"project.approved\"}]}"}`, &item)
	mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+strconv.FormatInt(item.ID, 10), "", &detail)
	if item.Status != 200 || !strings.Contains(detail.Request.Body, "project.approved") {
		t.Fatalf("an edited delivery: %+v %s", item, detail.Request.Body)
	}
	// Uninstalled: signed with the last secret, as a stale sender would, and refused.
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/uninstall", "", nil)
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.translated"}`, &item)
	if item.Status != 403 || item.Gateway.Outcome != OutcomeRefused || item.Gateway.Reason != "The app is not installed for the organization of this delivery." {
		t.Fatalf("a stale delivery: %+v", item)
	}
}

func TestConsoleResendTampered(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	var first callItem
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.translated"}`, &first)
	resend := "/emulator/api/calls/" + strconv.FormatInt(first.ID, 10) + "/resend"
	for tamper, reason := range map[string]string{
		"unsigned":     "The delivery is not signed: its X-Service-Signature header is missing.",
		"wrong_secret": "The signature of the delivery does not match its body.",
		"body":         "The signature of the delivery does not match its body.",
	} {
		var item callItem
		mustAPI(t, s, 200, "POST", resend, `{"tamper":"`+tamper+`"}`, &item)
		if item.Status == 200 || item.Gateway.Outcome != OutcomeRefused || item.Gateway.Reason != reason || item.Gateway.From != "gateway" ||
			item.ReplayOf != first.ID || item.Tamper != tamper || item.Kind != "delivery" {
			t.Errorf("tamper %s: %+v", tamper, item)
		}
	}
	// Another organization's secret: only once another organization has one.
	if rec := api(t, s, "POST", resend, `{"tamper":"other_org"}`, nil); rec.Code != 409 {
		t.Fatalf("other_org without another installation: %d %s", rec.Code, rec.Body)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/install", "", nil)
	var item callItem
	mustAPI(t, s, 200, "POST", resend, `{"tamper":"other_org"}`, &item)
	if item.Gateway.Outcome != OutcomeRefused || item.Gateway.Reason != "The signature of the delivery does not match its body." {
		t.Fatalf("other_org: %+v", item)
	}
	// An edited body is signed again with the organization's secret.
	mustAPI(t, s, 200, "POST", resend, `{"body":"{\"events\":[{\"event\":\"project.approved\"}]}"}`, &item)
	if item.Status != 200 || item.Gateway.Outcome != OutcomeAccepted {
		t.Fatalf("an edited resend: %+v", item)
	}
	// Tamper applies to deliveries alone, and takes known values only.
	installed := calls(t, s, "?kind=installed")[0]
	for path, body := range map[string]string{
		"/emulator/api/calls/" + strconv.FormatInt(installed.ID, 10) + "/resend": `{"tamper":"unsigned"}`,
		resend: `{"tamper":"flip"}`,
	} {
		n := len(calls(t, s, ""))
		if rec := api(t, s, "POST", path, body, nil); rec.Code != 400 {
			t.Errorf("%s %s: %d %s", path, body, rec.Code, rec.Body)
		}
		if len(calls(t, s, "")) != n {
			t.Errorf("%s %s made a call", path, body)
		}
	}
}

func TestConsoleReplay(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	var first, again callItem
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.translated"}`, &first)
	mustAPI(t, s, 200, "POST", "/emulator/api/calls/"+strconv.FormatInt(first.ID, 10)+"/replay", "", &again)
	if again.ID <= first.ID || again.ReplayOf != first.ID || again.Kind != "delivery" || again.Status != 200 || again.Organization != "acme.example" {
		t.Fatalf("the replay: %+v of %+v", again, first)
	}
	if list := calls(t, s, ""); list[0].ID != again.ID {
		t.Fatalf("the replay is not the newest call: %+v", list[0])
	}
	var curl map[string]string
	mustAPI(t, s, 200, "POST", "/emulator/api/calls/"+strconv.FormatInt(first.ID, 10)+"/curl", "", &curl)
	e := s.console.log.get(first.ID)
	if want := "-H 'X-Service-Signature: " + SignDelivery(e.reqBody.data, mustSecret(t, s, "acme.example")) + "'"; !strings.Contains(curl["curl"], want) ||
		!strings.HasPrefix(curl["curl"], "curl -X POST '") || !strings.Contains(curl["curl"], "--data-binary '{") {
		t.Fatalf("curl %s lacks %s", curl["curl"], want)
	}
	// What the emulator answered cannot be replayed; unknown ids are not found.
	tok := do(s, tokenRequestOf(`{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"demo-client-secret","refresh_token":"x"}`))
	if tok.Code != 400 {
		t.Fatalf("token: %d", tok.Code)
	}
	token := calls(t, s, "?kind=token")[0]
	for path, want := range map[string]int{
		"/emulator/api/calls/" + strconv.FormatInt(token.ID, 10) + "/replay": 409,
		"/emulator/api/calls/999/replay":                                     404,
		"/emulator/api/calls/0/replay":                                       400,
		"/emulator/api/calls/01/replay":                                      400,
		"/emulator/api/calls/x/replay":                                       400,
		"/emulator/api/calls/1/delete":                                       404,
	} {
		if rec := api(t, s, "POST", path, "", nil); rec.Code != want {
			t.Errorf("%s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
	if rec := api(t, s, "GET", "/emulator/api/calls/999", "", nil); rec.Code != 404 || !strings.Contains(rec.Body.String(), "no call 999") {
		t.Errorf("an unknown call: %d %s", rec.Code, rec.Body)
	}
}

func mustSecret(t *testing.T, s *Server, domain string) string {
	t.Helper()
	secret, ok := s.AppSecret(domain)
	if !ok {
		t.Fatalf("%s is not installed", domain)
	}
	return secret
}

func TestConsoleAnsweredCallsAreMasked(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	code := approve(t, s, nil)
	status, out := exchange(t, s, codeGrantRequest(code))
	if status != 200 {
		t.Fatalf("token: %d", status)
	}
	list := calls(t, s, "")
	if len(list) != 2 || list[0].Kind != "token" || list[1].Kind != "authorize" || list[0].Organization != "acme.example" ||
		list[0].Direction != "answered" || list[0].Gateway.Outcome != OutcomeUnknown {
		t.Fatalf("the calls: %+v", list)
	}
	for _, item := range list {
		rec := api(t, s, "GET", "/emulator/api/calls/"+strconv.FormatInt(item.ID, 10), "", nil)
		for _, secret := range []string{out["access_token"].(string), out["refresh_token"].(string), code, testSecret} {
			if strings.Contains(rec.Body.String(), secret) {
				t.Errorf("the detail of %s shows a secret: %s", item.Kind, rec.Body)
			}
		}
	}
	var detail callDetail
	mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+strconv.FormatInt(list[0].ID, 10), "", &detail)
	if !strings.Contains(detail.Answer.Body, `"access_token": "••••`) || !strings.Contains(detail.Request.Body, `"client_secret": "••••`) {
		t.Fatalf("the token call: %s / %s", detail.Request.Body, detail.Answer.Body)
	}
}

func TestConsoleCutsLargeBodies(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	big := `{"events":[{"event":"project.translated","pad":"` + strings.Repeat("x", 100<<10) + `"}]}`
	body, _ := json.Marshal(map[string]string{"organization": "acme.example", "body": big})
	var item callItem
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", string(body), &item)
	var detail callDetail
	mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+strconv.FormatInt(item.ID, 10), "", &detail)
	if !detail.Request.Cut || detail.Request.Size != int64(len(big)) || len(detail.Request.Body) != maxKeptBody || detail.Replayable {
		t.Fatalf("a large body: cut %v, size %d, %d bytes shown, replayable %v", detail.Request.Cut, detail.Request.Size, len(detail.Request.Body), detail.Replayable)
	}
	if rec := api(t, s, "POST", "/emulator/api/calls/"+strconv.FormatInt(item.ID, 10)+"/replay", "", nil); rec.Code != 409 {
		t.Fatalf("the replay of a cut body: %d", rec.Code)
	}
}

func TestConsoleSubscriptionActions(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	var answer actionAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/paid", "", &answer)
	if answer.Organization.Subscription.State != "paid" || answer.Call == nil || answer.Call.Kind != "subscription_paid" || answer.Call.Status != 200 {
		t.Fatalf("paid: %+v %+v", answer.Organization, answer.Call)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/unpaid", "", &answer)
	if answer.Organization.Subscription.State != "unpaid" || answer.Organization.Subscription.SubscribeLink != "http://localhost/checkout/demo-app" || answer.Call != nil {
		t.Fatalf("unpaid: %+v", answer)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/missing", "", &answer)
	if answer.Organization.Subscription.State != "missing" {
		t.Fatalf("missing: %+v", answer.Organization)
	}
	// The subscription query answers what the console set.
	tok, _ := MintToken(testSecret, Token{Issuer: DefaultIssuer, Audience: testClientID, UserID: 7, OrganizationID: 2, Domain: "unpaid.example", IssuedAt: testStart, Lifetime: time.Hour})
	if rec := do(s, subscriptionRequest("demo-app", "Bearer "+tok)); rec.Code != 404 {
		t.Fatalf("the query of a missing subscription: %d", rec.Code)
	}
	// Reinstall: uninstall then install, a new secret.
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	old := mustSecret(t, s, "acme.example")
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/reinstall", "", &answer)
	if len(answer.Calls) != 2 || answer.Calls[0].Kind != "uninstall" || answer.Calls[1].Kind != "installed" || mustSecret(t, s, "acme.example") == old {
		t.Fatalf("reinstall: %+v", answer.Calls)
	}
	if rec := api(t, s, "POST", "/emulator/api/organizations/missing.example/uninstall", "", nil); rec.Code != 409 {
		t.Fatalf("uninstall of an organization without installation: %d", rec.Code)
	}
	if rec := api(t, s, "POST", "/emulator/api/organizations/acme.example/explode", "", nil); rec.Code != 404 {
		t.Fatalf("an unknown action: %d", rec.Code)
	}
}

func TestConsoleAddOrganization(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	var item orgItem
	mustAPI(t, s, 201, "POST", "/emulator/api/organizations", `{"domain":"new.example","subscription":"paid"}`, &item)
	if item.Domain != "new.example" || item.ID != 4 || item.Subscription.State != "paid" {
		t.Fatalf("added %+v", item)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/new.example/install", "", nil)
	for body, want := range map[string]int{
		`{"domain":"new.example"}`:                    409,
		`{"domain":"other.example","id":1}`:           409,
		`{"domain":"Bad Domain"}`:                     400,
		`{"domain":"x.example","subscription":"no"}`:  400,
		`{"Domain":"x.example"}`:                      400,
		`{"domain":"x.example","domain":"y.example"}`: 400,
		`{"domain":"x.example"} {}`:                   400,
		`{"domain":"x.example","color":"red"}`:        400,
		`{"domain":7}`:                                400,
		`[`:                                           400,
		``:                                            400,
	} {
		rec := api(t, s, "POST", "/emulator/api/organizations", body, nil)
		var msg map[string]string
		if rec.Code != want || json.Unmarshal(rec.Body.Bytes(), &msg) != nil || msg["message"] == "" {
			t.Errorf("%s: %d %s, want %d with a message", body, rec.Code, rec.Body, want)
		}
	}
	if n := len(s.Organizations()); n != 4 {
		t.Fatalf("%d organizations after refused additions", n)
	}
}

// TestConsoleRefusesBadInputWithAMessage: each bad request gets a JSON
// 4xx whose message says what is wrong, and changes nothing.
func TestConsoleRefusesBadInputWithAMessage(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	before := len(calls(t, s, ""))
	tests := []struct {
		method, path, body string
		status             int
		says               string
	}{
		{"POST", "/emulator/api/deliveries", `{"organization":"nobody.example","event":"e"}`, 404, "no organization"},
		{"POST", "/emulator/api/deliveries", `{"Organization":"acme.example","event":"e"}`, 400, `"Organization" where "organization" is meant`},
		{"POST", "/emulator/api/deliveries", `{"organization":"acme.example","organization":"acme.example"}`, 400, "twice"},
		{"POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"e","evenT":"f"}`, 400, "differ only by case"},
		{"POST", "/emulator/api/deliveries", `{"organization":"acme.example"`, 400, "not valid JSON"},
		{"POST", "/emulator/api/deliveries", `{"organization":"acme.example"}`, 400, "event"},
		{"POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"e","module":"nope"}`, 400, "no webhook module"},
		{"POST", "/emulator/api/deliveries", `{"organization":["acme.example"],"event":"e"}`, 400, `member "organization" has the wrong type: a string is meant`},
		{"GET", "/emulator/api/deliveries", ``, 405, "takes POST"},
		{"DELETE", "/emulator/api/organizations", ``, 405, "takes GET, HEAD, POST"},
		{"GE", "/emulator/api/organizations", ``, 405, "takes GET, HEAD, POST"},
		{"GET", "/emulator/api/calls?after=-1", ``, 400, "after"},
		{"GET", "/emulator/api/calls?status=200", ``, 400, "status"},
		{"GET", "/emulator/api/nothing", ``, 404, "no \"/emulator/api/nothing\""},
		{"PUT", "/emulator/api/faults", `{"token":{"status":200}}`, 400, "from 400 to 599"},
		{"PUT", "/emulator/api/faults", `{"token":{"delay":"3m"}}`, 400, "from 0s to 2m0s"},
		{"PUT", "/emulator/api/faults", `{"token":{"delay":5}}`, 400, "duration"},
		{"PUT", "/emulator/api/faults", `{"token":{"delay":"soon"}}`, 400, "not a duration"},
		{"PUT", "/emulator/api/faults", `{"token":{"status":500,"outage":true}}`, 400, "without a status"},
		{"PUT", "/emulator/api/faults", `{"token":{}}`, 400, "needs a status"},
		{"PUT", "/emulator/api/faults", `{"token":{"Status":500}}`, 400, "differ by case"},
		{"PUT", "/emulator/api/faults", `{"subscription":{"status":503},"token":{"status":1000}}`, 400, "not 1000"},
		{"POST", "/emulator/api/files?name=a.kv", strings.Repeat("x", MaxFileSize+1), 413, "5 MB"},
		{"POST", "/emulator/api/files", `a = b`, 400, "?name="},
		{"POST", "/emulator/api/files/nope/build", `{}`, 404, "no upload"},
	}
	for _, tt := range tests {
		rec := api(t, s, tt.method, tt.path, tt.body, nil)
		var msg map[string]string
		if rec.Code != tt.status || json.Unmarshal(rec.Body.Bytes(), &msg) != nil || !strings.Contains(msg["message"], tt.says) {
			t.Errorf("%s %s %.60s: %d %s, want %d saying %q", tt.method, tt.path, tt.body, rec.Code, rec.Body, tt.status, tt.says)
		}
	}
	if after := len(calls(t, s, "")); after != before {
		t.Errorf("bad requests made %d calls", after-before)
	}
	if f := s.Faults(); f.Token != nil || f.Subscription != nil {
		t.Errorf("bad requests set faults: %+v", f)
	}
}

func TestConsoleFaults(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	srv := httptest.NewServer(s)
	defer srv.Close()
	var out map[string]any
	mustAPI(t, s, 200, "PUT", "/emulator/api/faults", `{"token":{"status":500},"subscription":{"delay":"5s"}}`, &out)
	if jsonBody(t, out) != `{"subscription":{"delay":"5s"},"token":{"status":500}}` {
		t.Fatalf("faults %s", jsonBody(t, out))
	}
	resp, err := http.Post(srv.URL+"/oauth/token", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "server_error") {
		t.Fatalf("the token endpoint with a fault: %d %s", resp.StatusCode, body)
	}
	// An outage closes the connection with no answer, and the call shows status 0.
	mustAPI(t, s, 200, "PUT", "/emulator/api/faults", `{"token":{"outage":true},"subscription":null}`, &out)
	if jsonBody(t, out) != `{"subscription":null,"token":{"outage":true}}` {
		t.Fatalf("faults %s", jsonBody(t, out))
	}
	if resp, err := http.Post(srv.URL+"/oauth/token", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Fatalf("the token endpoint in an outage answered %d", resp.StatusCode)
	}
	tokenCalls := calls(t, s, "?kind=token")
	if len(tokenCalls) != 2 || tokenCalls[0].Status != 0 || !strings.Contains(tokenCalls[0].Error, "no answer") || tokenCalls[1].Status != 500 {
		t.Fatalf("the token calls: %+v", tokenCalls)
	}
	if got := calls(t, s, "?status=none"); len(got) != 1 || got[0].ID != tokenCalls[0].ID {
		t.Fatalf("?status=none: %+v", got)
	}
	mustAPI(t, s, 200, "PUT", "/emulator/api/faults", `{"token":null}`, &out)
	if jsonBody(t, out) != `{"subscription":null,"token":null}` {
		t.Fatalf("faults %s", jsonBody(t, out))
	}
}

func TestConsoleFileRoundTrip(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/install", "", nil)
	file := "greeting = Hello\nfarewell = Goodbye\n"
	var up fileAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/files?name=strings.kv", file, &up)
	if up.Module != "kv-format" || len(up.Matches) != 1 || up.Matches[0] != "kv-format" || up.Organization != "unpaid.example" ||
		up.Call == nil || up.Call.Kind != "parse-file" || up.Error != "" {
		t.Fatalf("the upload: %+v", up)
	}
	if len(up.Strings) != 2 || up.Strings[0]["identifier"] != "greeting" || up.Strings[1]["text"] != "Goodbye" {
		t.Fatalf("the strings: %v", up.Strings)
	}
	var b buildAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/files/"+up.Upload.ID+"/build", `{}`, &b)
	if b.Identical == nil || !*b.Identical || b.Build == nil || b.Call.Kind != "build-file" {
		t.Fatalf("the build of unchanged strings: %+v", b)
	}
	rec := api(t, s, "GET", b.Build.Download, "", nil)
	if rec.Code != 200 || rec.Body.String() != file || !strings.Contains(rec.Header().Get("Content-Disposition"), `filename="strings.kv"`) {
		t.Fatalf("the download: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/files/"+up.Upload.ID+"/build", `{"pseudo":true}`, &b)
	if b.Identical != nil || b.Build == nil {
		t.Fatalf("a pseudo build: %+v", b)
	}
	pseudoFile := api(t, s, "GET", b.Build.Download, "", nil).Body.String()
	if !strings.Contains(pseudoFile, "greeting = [Hélló ~~]") && !strings.Contains(pseudoFile, "greeting = [Héllö ~~]") {
		t.Fatalf("the pseudo build: %q", pseudoFile)
	}
	// A file the app does not build back as it came: the first difference.
	var up2 fileAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/files?name=spaced.kv", "# a comment\ngreeting=Hello\n", &up2)
	mustAPI(t, s, 200, "POST", "/emulator/api/files/"+up2.Upload.ID+"/build", `{}`, &b)
	if b.Identical == nil || *b.Identical || b.Difference == nil || b.Difference.Offset != 0 || b.Difference.Line != 1 ||
		b.Difference.Expected != "# a comment\n" || b.Difference.Got != "greeting = Hello\n" {
		t.Fatalf("a build that differs: %+v %+v", b, b.Difference)
	}
	// Pre-export: the strings the module changed.
	var pre preExportAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/files/"+up.Upload.ID+"/pre-export", `{}`, &pre)
	if pre.Call == nil || pre.Call.Kind != "file-pre-export" || len(pre.Changed) != 2 || pre.Changed[0].Identifier != "greeting" ||
		pre.Changed[0].After.(map[string]any)["text"] != "HELLO" {
		t.Fatalf("pre-export: %+v", pre)
	}
	// Another module by name; the organization by name.
	mustAPI(t, s, 200, "POST", "/emulator/api/files?name=strings.kv&module=other-format&organization=acme.example", file, &up)
	if up.Module != "other-format" || up.Organization != "acme.example" || len(up.Strings) != 2 {
		t.Fatalf("a chosen module: %+v", up)
	}
	// No match: the first module.
	mustAPI(t, s, 200, "POST", "/emulator/api/files?name=strings.txt", file, &up)
	if up.Module != "kv-format" || len(up.Matches) != 0 {
		t.Fatalf("a file no pattern matches: %+v", up)
	}
}

func TestConsoleCallLogIsBounded(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 3)
	for range 5 {
		do(s, tokenRequestOf(`{}`))
	}
	list := calls(t, s, "")
	if len(list) != 3 || list[0].ID != 5 || list[2].ID != 3 {
		t.Fatalf("the log of keep 3 after 5 calls: %+v", list)
	}
	if after := calls(t, s, "?after=4"); len(after) != 1 || after[0].ID != 5 {
		t.Fatalf("?after=4: %+v", after)
	}
	if after := calls(t, s, "?after=1"); len(after) != 3 {
		t.Fatalf("?after of a dropped call: %+v", after)
	}
	if rec := api(t, s, "GET", "/emulator/api/calls/2", "", nil); rec.Code != 404 {
		t.Fatalf("a dropped call: %d", rec.Code)
	}
}

func TestConsoleKeepIsChecked(t *testing.T) {
	cfg := testConfig(&clock{now: testStart})
	for _, keep := range []int{-1, MaxKeep + 1} {
		cfg.Console.Keep = keep
		if _, err := New(cfg); err == nil {
			t.Errorf("keep %d accepted", keep)
		}
	}
	cfg.Console = ConsoleConfig{Off: true}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec := do(s, httptest.NewRequest("GET", "http://localhost/emulator/api/calls", nil)); rec.Code != 404 {
		t.Fatalf("the API of a console turned off: %d", rec.Code)
	}
}

func TestConsoleAnswersItsOwnHostsOnly(t *testing.T) {
	g := newFakeGateway(t)
	c := &clock{now: testStart}
	cfg := testConfig(c)
	cfg.Console = ConsoleConfig{App: g.URL, SiteHosts: func(*http.Request) []string { return []string{"emulator.test", "*.dev.test"} }}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]int{
		"localhost": 200, "localhost:8081": 200, "127.0.0.1:8081": 200, "[::1]:8081": 200, "app.localhost": 200,
		"emulator.test": 200, "EMULATOR.TEST.:80": 200, "a.dev.test": 200,
		"rebound.example": 421, "127.0.0.1.example": 421, "a.b.dev.test": 421, "": 421,
	} {
		r := httptest.NewRequest("GET", "/emulator/api/organizations", nil)
		r.Host = host
		rec := do(s, r)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
		if want == 421 && !strings.Contains(rec.Body.String(), `"message"`) {
			t.Errorf("Host %q: %s", host, rec.Body)
		}
	}
}

func TestConsoleSameOrigin(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	for _, tt := range []struct {
		header []string
		want   int
	}{
		{nil, 201},
		{[]string{"Sec-Fetch-Site", "same-origin"}, 201},
		{[]string{"Sec-Fetch-Site", "none"}, 201},
		{[]string{"Sec-Fetch-Site", "same-site"}, 403},
		{[]string{"Sec-Fetch-Site", "cross-site"}, 403},
		{[]string{"Sec-Fetch-Site", "cross-site", "Origin", "http://localhost"}, 403},
		{[]string{"Origin", "http://localhost"}, 201},
		{[]string{"Origin", "http://evil.example"}, 403},
		{[]string{"Origin", "null"}, 403},
		{[]string{"Origin", "http://localhost:8080"}, 403},
	} {
		n := len(s.Organizations())
		rec := api(t, s, "POST", "/emulator/api/organizations", `{"domain":"o`+strconv.Itoa(n)+`.example"}`, nil, tt.header...)
		if rec.Code != tt.want {
			t.Errorf("%v: %d %s, want %d", tt.header, rec.Code, rec.Body, tt.want)
		}
		if added := len(s.Organizations()) - n; (added == 1) != (tt.want == 201) {
			t.Errorf("%v: %d organizations added", tt.header, added)
		}
	}
	// A GET needs no origin: a page of another site cannot read the answer anyway.
	if rec := api(t, s, "GET", "/emulator/api/organizations", "", nil, "Sec-Fetch-Site", "cross-site"); rec.Code != 200 {
		t.Errorf("a cross-site GET: %d", rec.Code)
	}
}

func TestConsolePage(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	nonceIn := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]{20,})'`)
	var nonces []string
	for range 2 {
		rec := api(t, s, "GET", "/emulator/console", "", nil)
		csp := rec.Header().Get("Content-Security-Policy")
		m := nonceIn.FindStringSubmatch(csp)
		if rec.Code != 200 || m == nil || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
			!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "style-src 'self' 'nonce-"+m[1]+"'") {
			t.Fatalf("the page: %d, CSP %q", rec.Code, csp)
		}
		page := rec.Body.String()
		if !strings.Contains(page, `<script type="module" nonce="`+m[1]+`" src="/emulator/console/console.js">`) || strings.Contains(page, nonceMark) {
			t.Fatalf("the page's script does not carry the nonce %s", m[1])
		}
		if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).MatchString(page) || strings.Contains(page, "javascript:") {
			t.Fatal("the page has an inline handler")
		}
		if regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).MatchString(page) {
			t.Fatal("the page loads something from another host")
		}
		nonces = append(nonces, m[1])
	}
	if nonces[0] == nonces[1] {
		t.Fatal("the nonce is the same on two loads")
	}
	for name, kind := range map[string]string{"console.js": "text/javascript", "console.css": "text/css"} {
		rec := api(t, s, "GET", "/emulator/console/"+name, "", nil)
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), kind) || rec.Body.Len() == 0 {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	js := api(t, s, "GET", "/emulator/console/console.js", "", nil).Body.String()
	if regexp.MustCompile(`https?://|\beval\(|new Function|innerHTML\s*=`).MatchString(js) {
		t.Error("the script loads from another host, evaluates strings, or writes HTML")
	}
	if rec := api(t, s, "GET", "/emulator/console/secrets.txt", "", nil); rec.Code != 404 {
		t.Errorf("an unknown file: %d", rec.Code)
	}
	// The emulator's root points to the console.
	rec := api(t, s, "GET", "/", "", nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `href="/emulator/console"`) {
		t.Errorf("/: %d %s", rec.Code, rec.Body)
	}
}

// sseEvent is one event of the stream.
type sseEvent struct{ id, event, data string }

// readEvents reads n events (comments left out) from a stream.
func readEvents(t *testing.T, r *bufio.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %d events: %v", len(out), err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

func openEvents(t *testing.T, url string, lastID string) (*bufio.Reader, func()) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/emulator/api/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return bufio.NewReader(resp.Body), func() { resp.Body.Close() }
}

func TestConsoleEvents(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 3)
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func() { do(s, tokenRequestOf(`{}`)) }
	post()
	post()

	// Without Last-Event-ID nothing is replayed: the first event after
	// "ready" is the next call.
	live, stop := openEvents(t, srv.URL, "")
	if ev := readEvents(t, live, 1); ev[0].event != "ready" {
		t.Fatalf("first event %+v", ev)
	}
	post()
	ev := readEvents(t, live, 1)[0]
	var item callItem
	if ev.event != "call" || ev.id != "3" || json.Unmarshal([]byte(ev.data), &item) != nil || item.ID != 3 || item.Kind != "token" {
		t.Fatalf("live event %+v", ev)
	}
	stop()

	// With Last-Event-ID, what was missed.
	replay, stop := openEvents(t, srv.URL, "1")
	got := readEvents(t, replay, 3)
	if got[1].id != "2" || got[2].id != "3" {
		t.Fatalf("replay after 1: %+v", got)
	}
	stop()

	// With an id the log dropped: the whole log.
	post()
	post() // ids 4 and 5: the log (keep 3) holds 3, 4, 5
	whole, stop := openEvents(t, srv.URL, "1")
	got = readEvents(t, whole, 4)
	if got[1].id != "3" || got[2].id != "4" || got[3].id != "5" {
		t.Fatalf("replay after a dropped id: %+v", got)
	}
	stop()
	// An id that is not one of ours: the whole log too.
	other, stop := openEvents(t, srv.URL, "x")
	if got = readEvents(t, other, 4); got[1].id != "3" {
		t.Fatalf("replay after a foreign id: %+v", got)
	}
	stop()
}

func TestConsoleEventsKeepalive(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	if s.console.keepalive > 15*time.Second {
		t.Fatalf("keepalive every %s, more than 15 s", s.console.keepalive)
	}
	s.console.keepalive = time.Millisecond
	srv := httptest.NewServer(s)
	defer srv.Close()
	r, stop := openEvents(t, srv.URL, "")
	defer stop()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": keepalive\n" {
			return
		}
	}
}

func TestConsoleSendThroughTheEmulator(t *testing.T) {
	g := newFakeGateway(t)
	s := newConsoleServer(t, g, 0)
	req := map[string]any{"descriptor": json.RawMessage(consoleDescriptor), "app": g.URL, "organization": "acme.example",
		"organization_id": 99, "secret": "not-the-installation-secret",
		"file": map[string]any{"name": "a.kv", "content": []byte("a = b\n")}}
	var answer SendAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/send", jsonBody(t, req), &answer)
	// Not installed: signed with the secret given, which the gateway does not know.
	if len(answer.Calls) != 6 || answer.Calls[0].Job != "webhook" || answer.Calls[0].Status != 403 || answer.Calls[0].ID == 0 {
		t.Fatalf("send: %+v", answer.Calls)
	}
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	mustAPI(t, s, 200, "POST", "/emulator/api/send", jsonBody(t, req), &answer)
	if answer.Calls[0].Status != 200 {
		t.Fatalf("send once installed: the delivery %+v", answer.Calls[0])
	}
	for _, c := range answer.Calls {
		if item := s.console.log.get(c.ID); item == nil || item.org != "acme.example" || item.kind != map[string]string{"webhook": "delivery"}[c.Job]+map[bool]string{true: c.Job}[c.Job != "webhook"] {
			t.Errorf("call %+v is not in the log as it was made", c)
		}
	}
}

func TestTamperBodyKeepsJSONValid(t *testing.T) {
	in := []byte(`{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`)
	out := TamperBody(in)
	diff := 0
	for i := range in {
		if in[i] != out[i] {
			diff++
		}
	}
	if diff != 1 || !json.Valid(out) {
		t.Fatalf("tampered %s: %d bytes differ", out, diff)
	}
	if got := TamperBody([]byte("{}")); string(got) != "{|" {
		t.Fatalf("without letters: %q", got)
	}
}
