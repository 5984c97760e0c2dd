package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// lifecycleApp is an app that records everything a request brings it:
// method, full URL, Host, every header, body and trailers. Its answer is
// set by answer: "ok" (200), "switch" (101 Switching Protocols to
// websocket, then the connection is closed) or "silent" (the connection
// is closed with no answer).
type lifecycleApp struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []recorded
	answer string
}

// recorded is one request as the app received it.
type recorded struct {
	method, uri, host, body string
	header, trailer         http.Header
}

func newLifecycleApp(t *testing.T) *lifecycleApp {
	a := &lifecycleApp{answer: "ok"}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body) // the trailers are there once the body is read
		a.mu.Lock()
		a.seen = append(a.seen, recorded{r.Method, r.RequestURI, r.Host, string(body), r.Header.Clone(), r.Trailer.Clone()})
		answer := a.answer
		a.mu.Unlock()
		switch answer {
		case "switch", "silent":
			c, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("the app could not take the connection: %v", err)
				return
			}
			if answer == "switch" {
				_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
				_ = buf.Flush()
			}
			c.Close()
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// answers sets how the app answers from now on.
func (a *lifecycleApp) answers(answer string) {
	a.mu.Lock()
	a.answer = answer
	a.mu.Unlock()
}

// last is the last request the app received.
func (a *lifecycleApp) last() recorded {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return recorded{}
	}
	return a.seen[len(a.seen)-1]
}

// received is how many requests the app received.
func (a *lifecycleApp) received() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

// forging sends every request with extra headers, and with query as its
// query when it is set.
type forging struct {
	header map[string]string
	query  string
}

func (f forging) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range f.header {
		r.Header.Set(k, v)
	}
	if f.query != "" {
		r.URL.RawQuery = f.query
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		// The connection is the caller's now, with no end: reading it
		// would wait for ever.
		resp.Body.Close()
		return nil, errors.New("the gateway answered 101 Switching Protocols")
	}
	return resp, err
}

// forgedQuery and forgedHeaders are what a caller adds to a lifecycle
// call, as the attacker did: none of it may reach the app.
const forgedQuery = "appSecret=forged-secret&userId=666&code=forged-code&organizationId=1"

var forgedHeaders = map[string]string{
	"Authorization":          "Bearer forged",
	"Cookie":                 "session=forged",
	"Forwarded":              "for=10.0.0.1;host=forged.example",
	"X-Http-Method-Override": "DELETE",
	"X-Forwarded-For":        "10.0.0.66",
	"X-Forwarded-Host":       "forged.example",
	"X-Service-Domain":       "forged.example",
	"X-Service-App-Token":    "forged",
	"X-Custom":               "forged",
	"Accept-Language":        "forged",
	"User-Agent":             "forged",
	"Origin":                 "http://forged.example",
	"Te":                     "trailers",
}

// lifecycleAllowed are the only headers a lifecycle call may bring the
// app: the gateway's (Content-Type, Content-Length, the app token), the
// trace context, and what reverse_proxy adds (X-Forwarded-*, Via, and
// its transport's Accept-Encoding).
var lifecycleAllowed = []string{"Content-Type", "Content-Length", appDefaultTokenHeader, "Traceparent", "Tracestate",
	"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Via", "Accept-Encoding"}

// checkGatewaysRequest checks that the app received the lifecycle call at
// path as a request of the gateway's: POST, no query, the allowed headers
// only with none of the forged values, no trailer, and a body that names
// organization 1 without its secret.
func checkGatewaysRequest(t *testing.T, got recorded, path string, token bool) {
	t.Helper()
	if got.method != http.MethodPost || got.uri != path {
		t.Errorf("the app got %s %s, want POST %s", got.method, got.uri, path)
	}
	for name, values := range got.header {
		if !slices.Contains(lifecycleAllowed, name) {
			t.Errorf("the app got the header %s: %q", name, values)
		}
		for _, v := range values {
			if strings.Contains(v, "forged") || strings.Contains(v, "10.0.0.") {
				t.Errorf("the app got the caller's %s: %q", name, v)
			}
		}
	}
	if v := got.header.Get("X-Forwarded-For"); v != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want reverse_proxy's own 127.0.0.1", v)
	}
	if tok := got.header.Get(appDefaultTokenHeader); (tok != "") != token || token && issuedFor(t, tok) != "acme.example" {
		t.Errorf("app token %q (want one: %v)", tok, token)
	}
	if len(got.trailer) != 0 {
		t.Errorf("the app got trailers %v", got.trailer)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(got.body), &body); err != nil || body["organizationId"] != float64(1) ||
		body["domain"] != "acme.example" || body["appSecret"] != nil || body["code"] != nil || body["userId"] == float64(666) {
		t.Errorf("the app was told %s (%v)", got.body, err)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" || got.header.Get("Content-Length") != strconv.Itoa(len(got.body)) {
		t.Errorf("Content-Type %q, Content-Length %q for %d bytes", ct, got.header.Get("Content-Length"), len(got.body))
	}
}

// installedOrganizations lists the domains the admin API holds.
func installedOrganizations(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/service/installations", e2eAdminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestE2ELifecycleCallIsTheGatewaysRequest: a lifecycle call reaches the
// app as a request the gateway builds. The service's calls come with a
// forged query and forged headers (Authorization, Cookie, Forwarded,
// X-HTTP-Method-Override, X-Forwarded-*, the identity headers, others),
// at another spelling of the paths: the app gets each at the descriptor's
// path with no query, the gateway's body and only the allowed headers.
// The same holds for the exact subscription_paid, for a repeated
// installed sent by a caller that knows the secret, and for uninstall.
// On the code before, the app got the query and every forged header.
func TestE2ELifecycleCallIsTheGatewaysRequest(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleApp(t)
	startCaddy(t, installationsSite(t, service, app.URL))
	ctx := context.Background()
	client := &http.Client{Timeout: 20 * time.Second, Transport: forging{header: forgedHeaders}}

	// installed, proved by the service.
	call, err := svc.InstallApp(ctx, client, e2eURL("/Installed/?"+forgedQuery), "acme.example", service)
	if err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	checkGatewaysRequest(t, app.last(), "/installed", true)

	// The subscription_paid, with no secret at all.
	call, err = svc.SubscriptionPaid(ctx, client, e2eURL("/Subscription-Paid/?"+forgedQuery), "acme.example")
	if err != nil || !call.OK() {
		t.Fatalf("paid: %+v %v", call, err)
	}
	checkGatewaysRequest(t, app.last(), "/subscription-paid", true)

	// A repeated installed, answered from what is stored.
	secret, _ := svc.AppSecret("acme.example")
	repeat, _ := json.Marshal(map[string]any{"appId": "demo-app", "appSecret": secret, "clientId": "demo-client", "userId": 666,
		"organizationId": 1, "domain": "acme.example", "baseUrl": service, "code": "forged-code"})
	before := app.received()
	header := map[string]string{"Content-Type": "application/json"}
	for k, v := range forgedHeaders {
		header[k] = v
	}
	if resp, body := request(t, &http.Client{Timeout: 20 * time.Second}, "POST", "/installed/?"+forgedQuery, header, repeat); resp.StatusCode != http.StatusOK {
		t.Fatalf("repeated installed: %d %s", resp.StatusCode, body)
	}
	if app.received() != before+1 {
		t.Fatal("the repeated installed did not reach the app")
	}
	checkGatewaysRequest(t, app.last(), "/installed", true)

	// uninstall: no app token.
	call, err = svc.UninstallApp(ctx, client, e2eURL("/UNINSTALL?"+forgedQuery), "acme.example", service)
	if err != nil || !call.OK() {
		t.Fatalf("uninstall: %+v %v", call, err)
	}
	checkGatewaysRequest(t, app.last(), "/uninstall", false)
}

// TestE2ELifecycleInformationalAnswerIsNoAcknowledgement: only a final
// 2xx the app wrote acknowledges a lifecycle call. An app that answers 101
// Switching Protocols, or closes the connection with no answer, fails the
// call: the service gets 502 with a JSON message naming the app's failure,
// and nothing is committed. An uninstall whose caller asks for a websocket
// upgrade reaches the app without Connection and Upgrade, and a 101 of the
// app keeps the installation. On the code before, the 101 was taken for
// the app's 200: installations were stored and removed, and the caller of
// the uninstall got the 101.
func TestE2ELifecycleInformationalAnswerIsNoAcknowledgement(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleApp(t)
	startCaddy(t, installationsSite(t, service, app.URL))
	ctx := context.Background()
	client := &http.Client{Timeout: 20 * time.Second}
	failed := func(t *testing.T, call emulator.Call, kind, why string) {
		t.Helper()
		status, body := call.Status, call.Body
		var e errorBody
		if status != http.StatusBadGateway || json.Unmarshal(body, &e) != nil ||
			!strings.Contains(e.Error.Message, "The app did not acknowledge the "+kind+" call: "+why) ||
			!strings.Contains(e.Error.Message, "Nothing was changed") {
			t.Fatalf("%s: %d %s (%v), want 502 naming the app's failure (%s)", kind, status, body, call.Err, why)
		}
		t.Logf("%s: %d %s", kind, status, body)
	}

	app.answers("switch")
	call, err := svc.InstallApp(ctx, client, e2eURL("/installed"), "acme.example", service)
	if err != nil || app.received() != 1 {
		t.Fatalf("install: %+v %v, the app got %d requests", call, err, app.received())
	}
	failed(t, call, "installed", "it answered with no final status")
	if list := installedOrganizations(t); strings.Contains(list, "acme.example") {
		t.Fatalf("an installed answered 101 was stored: %s", list)
	}

	app.answers("ok")
	if call, err := svc.InstallApp(ctx, client, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}

	// The caller asks for a websocket; the app answers 101 anyway.
	app.answers("switch")
	upgrading := &http.Client{Timeout: 20 * time.Second, Transport: forging{header: map[string]string{
		"Connection": "Upgrade, Keep-Alive, X-Hop", "Upgrade": "websocket", "Keep-Alive": "timeout=5", "X-Hop": "forged",
		"Sec-Websocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-Websocket-Version": "13", "Proxy-Connection": "keep-alive"}}}
	call, err = svc.UninstallApp(ctx, upgrading, e2eURL("/uninstall"), "acme.example", service)
	if err != nil {
		t.Fatal(err)
	}
	failed(t, call, "uninstall", "it answered with no final status")
	for _, name := range []string{"Connection", "Upgrade", "Keep-Alive", "X-Hop", "Sec-Websocket-Key", "Sec-Websocket-Version", "Proxy-Connection"} {
		if v, ok := app.last().header[name]; ok {
			t.Errorf("the uninstall reached the app with the caller's %s: %q", name, v)
		}
	}
	if list := installedOrganizations(t); !strings.Contains(list, "acme.example") {
		t.Fatalf("an uninstall answered 101 removed the installation: %s", list)
	}

	// No answer at all.
	app.answers("silent")
	call, err = svc.SubscriptionPaid(ctx, client, e2eURL("/subscription-paid"), "acme.example")
	if err != nil {
		t.Fatal(err)
	}
	failed(t, call, "subscription_paid", "it closed the connection without an answer")
}

// chunkedWithTrailers sends a chunked request over a connection of its
// own, declaring the trailers of declared in its Trailer header and
// sending every one of trailers (declared or not), and returns the
// status and body of the answer.
func chunkedWithTrailers(t *testing.T, port int, method, path string, header map[string]string, body []byte, declared []string, trailers [][2]string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: localhost:%d\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n", method, path, port)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if len(declared) > 0 {
		fmt.Fprintf(&b, "Trailer: %s\r\n", strings.Join(declared, ", "))
	}
	b.WriteString("\r\n")
	if len(body) > 0 {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
	}
	b.WriteString("0\r\n")
	for _, tr := range trailers {
		fmt.Fprintf(&b, "%s: %s\r\n", tr[0], tr[1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// identityTrailers are trailers a client sends under the names of the
// identity headers (and one spelled with "_"), two of them declared, and
// a trailer of its own.
var (
	identityTrailers = [][2]string{{"X-Service-Domain", "evil.example"}, {"X-Service-App-Token", "forged"},
		{"X_Service_User_Id", "spoofed"}, {"x-service-id", "666"}, {"X-Checksum", "sha256=abc"}}
	identityDeclared = []string{"X-Service-Domain", "X-Service-App-Token", "X-Checksum"}
)

// noIdentityTrailer checks that no trailer under an identity header's
// name reached the app, and whether the client's own one did.
func noIdentityTrailer(t *testing.T, got recorded, ownKept bool) {
	t.Helper()
	for name, values := range got.trailer {
		if name != "X-Checksum" {
			t.Errorf("the trailer %s: %q reached the app", name, values)
		}
	}
	if kept := got.trailer.Get("X-Checksum") == "sha256=abc"; kept != ownKept {
		t.Errorf("the client's own trailer reached the app: %v, want %v", kept, ownKept)
	}
	for name, values := range got.header {
		for _, v := range values {
			if v == "evil.example" || v == "forged" || v == "spoofed" || v == "666" {
				t.Errorf("the header %s: %q reached the app", name, v)
			}
		}
	}
}

// TestE2EIdentityTrailersNeverReachTheApp: request trailers named as the
// headers the gateway sets (declared in the Trailer header or not, in any
// spelling) never reach the app, on any route service_app answers: a
// public path and a module url keep the client's other trailers; the API
// and a webhook delivery, where the app is told to trust headers, keep
// none; a lifecycle call carries none. On the code before, the trailers
// reached the app as they were sent.
func TestE2EIdentityTrailersNeverReachTheApp(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleApp(t)
	site := strings.Replace(installationsSite(t, service, app.URL), "\t\tinstallations {", "\t\tpublic /assets/*\n\t\tinstallations {", 1)
	startCaddy(t, site)
	if call, err := svc.InstallApp(context.Background(), nil, e2eURL("/installed"), "acme.example", service); err != nil || !call.OK() {
		t.Fatalf("install: %+v %v", call, err)
	}
	acme, _ := svc.AppSecret("acme.example")
	send := func(t *testing.T, method, path string, header map[string]string, body []byte) {
		t.Helper()
		before := app.received()
		if status, answer := chunkedWithTrailers(t, e2eHTTPPort, method, path, header, body, identityDeclared, identityTrailers); status/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, status, answer)
		}
		if app.received() != before+1 {
			t.Fatalf("%s %s did not reach the app", method, path)
		}
	}

	t.Run("public path", func(t *testing.T) {
		send(t, "POST", "/assets/upload", nil, []byte("some bytes"))
		noIdentityTrailer(t, app.last(), true)
	})
	t.Run("API with a token", func(t *testing.T) {
		user := mintUser(t, 1, "acme.example")
		send(t, "POST", "/api/projects", map[string]string{"Authorization": "Bearer " + user}, []byte(`{"name":"p"}`))
		noIdentityTrailer(t, app.last(), false)
		if got := app.last().header.Get(appDefaultTokenHeader); got == "" || issuedFor(t, got) != "acme.example" {
			t.Errorf("the API request lacks acme's app token: %q", got)
		}
	})
	t.Run("webhook delivery", func(t *testing.T) {
		body := []byte(`{"events":[{"event":"project.translated","project":{"id":1}}]}`)
		send(t, "POST", "/webhooks", map[string]string{"X-Service-Domain": "acme.example", "X-Module-Key": "events-hook",
			"X-Service-Signature": emulator.SignDelivery(body, acme)}, body)
		noIdentityTrailer(t, app.last(), false)
		if got := app.last().header.Get("X-Service-Domain"); got != "acme.example" {
			t.Errorf("the delivery's X-Service-Domain %q", got)
		}
	})
	t.Run("lifecycle call", func(t *testing.T) {
		body := []byte(`{"appId":"demo-app","organizationId":1,"domain":"acme.example"}`)
		send(t, "POST", "/subscription-paid", map[string]string{"Content-Type": "application/json"}, body)
		noIdentityTrailer(t, app.last(), false)
	})
}

// TestE2EClaimHeaderTrailersNeverReachTheApp: with service_auth's
// claim_header, no request trailer reaches the app, whatever its name: the
// app is told to trust headers there. On the code before, a trailer named
// as a claim header reached it.
func TestE2EClaimHeaderTrailersNeverReachTheApp(t *testing.T) {
	app := newLifecycleApp(t)
	startCaddy(t, `
http://localhost:{port} {
	service_auth {
		hs256_secret demo-client-secret
		claim_header X-Service-User-Id sub
		claim_header X-Service-Domain domain
	}
	reverse_proxy `+strings.TrimPrefix(app.URL, "http://")+`
}
`)
	user := mintUser(t, 1, "acme.example")
	status, answer := chunkedWithTrailers(t, e2eHTTPPort, "POST", "/api/projects", map[string]string{"Authorization": "Bearer " + user},
		[]byte(`{"name":"p"}`), []string{"X-Service-User-Id", "X-Checksum"},
		[][2]string{{"X-Service-User-Id", "spoofed"}, {"X_Service_Domain", "evil.example"}, {"X-Checksum", "sha256=abc"}})
	if status != http.StatusOK || app.received() != 1 {
		t.Fatalf("%d %s", status, answer)
	}
	got := app.last()
	if len(got.trailer) != 0 {
		t.Errorf("the app got trailers %v", got.trailer)
	}
	if got.header.Get("X-Service-User-Id") != "7" || got.header.Get("X-Service-Domain") != "acme.example" {
		t.Errorf("the claim headers: %v", got.header)
	}
}

// mintUser is a user token of user 7 of the organization, as the service
// issues them.
func mintUser(t *testing.T, org int64, domain string) string {
	t.Helper()
	tok, err := emulator.MintToken("demo-client-secret", emulator.Token{Issuer: "service-emulator", Audience: "demo-client",
		UserID: 7, OrganizationID: org, Domain: domain, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
