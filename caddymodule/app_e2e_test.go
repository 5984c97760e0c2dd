package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/examples/formatapp"
)

// appDescriptor is the descriptor of the app behind service_app in these
// tests: a format module, a buggy one, a pre-export and a webhook.
const appDescriptor = `{
  "identifier": "demo-app",
  "name": "Demo app",
  "modules": {
    "custom-file-format": [
      {"key": "kv-format", "type": "kv", "url": "/file-format"},
      {"key": "kv-buggy", "type": "kv-buggy", "url": "/file-format/buggy"}
    ],
    "file-pre-export": [{"key": "kv-pre-export", "url": "/pre-export"}],
    "webhook": [{"key": "events-hook", "url": "/webhooks", "events": ["project.translated", "project.approved"]}]
  }
}`

// appDescriptorFile writes appDescriptor to a file of the test's and
// returns its path.
func appDescriptorFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte(appDescriptor), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// appUpstream is the app: it serves its descriptor and its modules, and
// records what reaches it.
type appUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path" of every request that reached it
	last http.Header
}

func newAppUpstream(t *testing.T) *appUpstream {
	return newAppUpstreamOn(t, nil)
}

// newAppUpstreamOn is the app listening on ln (nil: a free port).
func newAppUpstreamOn(t *testing.T, ln net.Listener) *appUpstream {
	u := &appUpstream{}
	formats := formatapp.Handler()
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.URL.Path)
		u.last = r.Header.Clone()
		u.mu.Unlock()
		switch r.URL.Path {
		case "/manifest.json":
			io.WriteString(w, appDescriptor)
		case "/file-format", "/pre-export":
			formats.ServeHTTP(w, r)
		case "/file-format/buggy":
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data":{"strings":[{"identifier":"a","text":"A"},{"identifier":"a","text":"B"}]}}`)
		default:
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "the app: "+r.URL.RequestURI())
		}
	}))
	if ln != nil {
		u.Server.Listener.Close()
		u.Server.Listener = ln
	}
	u.Server.Start()
	t.Cleanup(u.Close)
	return u
}

func (u *appUpstream) reached(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, s := range u.seen {
		if strings.HasSuffix(s, " "+path) {
			n++
		}
	}
	return n
}

func (u *appUpstream) header() http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

// appSites is the service (the emulator, on 127.0.0.1) and the app behind
// service_app and reverse_proxy alone (on localhost).
func appSites(descriptor, upstream string) string {
	return `
http://127.0.0.1:{port} {
	service_emulator {
		client_id demo-client
		client_secret demo-client-secret
		redirect_uri http://localhost:{port}/oauth/callback
		organization acme.example {
			id 1
			active_until "2099-01-01 00:00:00"
		}
		organization unpaid.example {
			id 2
			unpaid http://127.0.0.1:{port}/checkout
		}
	}
}

http://localhost:{port} {
	service_app {
		descriptor ` + descriptor + `
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		service http://127.0.0.1:{port}
		subscription
		public /assets/*
	}
	reverse_proxy ` + upstream + `
}
`
}

func TestServiceAppE2E(t *testing.T) {
	app := newAppUpstream(t)
	upstream := strings.TrimPrefix(app.URL, "http://")
	startCaddy(t, appSites(app.URL+"/manifest.json", upstream))
	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, header map[string]string, body []byte) (*http.Response, string) {
		t.Helper()
		return request(t, client, method, path, header, body)
	}
	mint := func(domain string, orgID int64) string {
		tok, err := emulator.MintToken("demo-client-secret", emulator.Token{
			Issuer: "service-emulator", Audience: "demo-client", UserID: 7, OrganizationID: orgID, Domain: domain, Lifetime: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	message := func(t *testing.T, body string) string {
		t.Helper()
		var out struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil || out.Error.Message == "" {
			t.Fatalf("not a JSON error message: %s", body)
		}
		return out.Error.Message
	}

	t.Run("the descriptor is served with the base address filled in", func(t *testing.T) {
		resp, body := do("GET", "/manifest.json", nil, nil)
		var d map[string]any
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if d["identifier"] != "demo-app" || d["baseUrl"] != e2eBase() {
			t.Errorf("descriptor %s", body)
		}
		if auth, _ := d["authentication"].(map[string]any); auth["clientId"] != "demo-client" {
			t.Errorf("authentication %v", d["authentication"])
		}
		if resp, _ := do("POST", "/manifest.json", nil, []byte("{}")); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST to the descriptor: %d", resp.StatusCode)
		}
	})

	t.Run("the API needs a token, a paid subscription, and gets trusted headers", func(t *testing.T) {
		resp, body := do("GET", "/api/whoami", nil, nil)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("no token: %d %s", resp.StatusCode, body)
		}
		message(t, body)
		if app.reached("/api/whoami") != 0 {
			t.Fatal("a request without a token reached the app")
		}

		resp, body = do("GET", "/api/whoami", map[string]string{"Authorization": "Bearer " + mint("acme.example", 1), "X-Service-User-Id": "spoofed"}, nil)
		if resp.StatusCode != 200 || body != "the app: /api/whoami" {
			t.Fatalf("paid: %d %s", resp.StatusCode, body)
		}
		if h := app.header(); h.Get("X-Service-User-Id") != "7" || h.Get("X-Service-Domain") != "acme.example" {
			t.Errorf("trusted headers: %v", h)
		}

		// The token in the jwtToken query parameter works and never reaches the app.
		resp, body = do("GET", "/api/whoami?jwtToken="+mint("acme.example", 1)+"&x=1", nil, nil)
		if resp.StatusCode != 200 || body != "the app: /api/whoami?x=1" {
			t.Fatalf("query token: %d %s", resp.StatusCode, body)
		}

		resp, body = do("GET", "/api/whoami", map[string]string{"Authorization": "Bearer " + mint("unpaid.example", 2)}, nil)
		if resp.StatusCode != http.StatusPaymentRequired || resp.Header.Get("Location") != "http://127.0.0.1:"+strconv.Itoa(e2eHTTPPort)+"/checkout" {
			t.Fatalf("unpaid: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
		}
	})

	t.Run("public paths pass without a token", func(t *testing.T) {
		resp, body := do("GET", "/assets/app.css", nil, nil)
		if resp.StatusCode != 200 || body != "the app: /assets/app.css" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})

	t.Run("webhook deliveries are checked by module key and event", func(t *testing.T) {
		send := func(key, event string, secret string) (int, string) {
			body := []byte(`{"events":[{"event":"` + event + `","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			status, answer, err := emulator.SendDelivery(ctx, client, e2eURL("/webhooks"), emulator.Delivery{
				Body: body, Secret: secret, OrganizationID: "1", Domain: "acme.example", ModuleKey: key,
			})
			if err != nil {
				t.Fatal(err)
			}
			return status, string(answer)
		}
		if status, answer := send("events-hook", "project.translated", "demo-app-secret"); status != 200 {
			t.Fatalf("a good delivery: %d %s", status, answer)
		}
		reached := app.reached("/webhooks")
		for name, c := range map[string]struct {
			key, event, secret string
			status             int
		}{
			"another module key":  {"other-hook", "project.translated", "demo-app-secret", 403},
			"an undeclared event": {"events-hook", "project.deleted", "demo-app-secret", 403},
			"a wrong secret":      {"events-hook", "project.translated", "not-the-secret", 401},
		} {
			if status, answer := send(c.key, c.event, c.secret); status != c.status {
				t.Errorf("%s: %d %s, want %d", name, status, answer, c.status)
			}
		}
		if app.reached("/webhooks") != reached {
			t.Error("a refused delivery reached the app")
		}
	})

	t.Run("file modules are held to the limits and the contract", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), 5<<20+1)
		resp, body := do("POST", "/file-format", map[string]string{"Content-Type": "application/json"}, big)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("over the limit: %d %s", resp.StatusCode, body)
		}
		message(t, body)

		job := formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}})
		resp, body = do("POST", "/file-format", map[string]string{"Content-Type": "application/json"}, job)
		if resp.StatusCode != 200 || !strings.Contains(body, `"greeting"`) {
			t.Fatalf("a good job: %d %s", resp.StatusCode, body)
		}
		resp, body = do("POST", "/file-format/buggy", map[string]string{"Content-Type": "application/json"}, job)
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(message(t, body), "identifier") {
			t.Fatalf("a contract breach: %d %s", resp.StatusCode, body)
		}
		resp, body = do("POST", "/pre-export", map[string]string{"Content-Type": "application/json"}, []byte(`{"jobType":"parse-file"}`))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a parse-file job sent to the pre-export module: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("caddy service-app send calls every declared module through the gateway", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "demo.kv")
		if err := os.WriteFile(src, []byte("greeting = Hello\nfarewell = Bye\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		reached := app.reached("/webhooks")
		var out bytes.Buffer
		fl := parsedFlags(t, serviceAppSendFlags(), "--descriptor", app.URL+"/manifest.json", "--app", e2eBase(), "--file", src,
			"--emulator", "http://127.0.0.1:"+strconv.Itoa(e2eHTTPPort))
		code, err := runServiceAppSend(fl, &out)
		// The buggy module's answer breaks the contract: one call of five fails (its build-file job is not sent).
		if code == 0 || err != nil || !strings.HasSuffix(out.String(), "\n1 of 5 calls were not answered 2xx\n") {
			t.Errorf("exit %d, %v", code, err)
		}
		for _, want := range []string{
			"webhook            events-hook          webhook         " + e2eBase() + "/webhooks  200",
			"kv-format            parse-file      " + e2eBase() + "/file-format  200",
			"kv-format            build-file      " + e2eBase() + "/file-format  200",
			"kv-buggy             parse-file      " + e2eBase() + "/file-format/buggy  502",
			"kv-buggy             build-file",
			"kv-pre-export        file-pre-export " + e2eBase() + "/pre-export  200",
		} {
			if !strings.Contains(out.String(), want) == !strings.HasSuffix(want, "build-file") {
				t.Errorf("output lacks (or has) %q:\n%s", want, out.String())
			}
		}
		if app.reached("/webhooks") != reached+1 {
			t.Error("the delivery did not reach the app")
		}
	})
}

// TestServiceAppDescriptorDefectsE2E: a descriptor with several defects
// stops the config with one error naming every one of them.
func TestServiceAppDescriptorDefects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	doc := `{"modules":{"webhook":[{"key":"a","url":"https://evil.example/hook"},{"key":"a","url":"/hook","events":["e"],"environments":["moon"]}]}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := adaptCaddyfile(t, "localhost {\n\tservice_app {\n\t\tdescriptor "+path+"\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t}\n}\n")
	if err == nil {
		t.Fatal("a defective descriptor adapted")
	}
	msg := err.Error()
	for _, want := range []string{"4 defects", `url "https://evil.example/hook" is absolute`, "events is missing",
		`environments holds "moon"`, `key "a" is used by`, "Caddyfile:2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

// adaptCaddyfile adapts a Caddyfile as `caddy adapt` does.
func adaptCaddyfile(t *testing.T, input string) ([]byte, error) {
	t.Helper()
	adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
	out, _, err := adapter.Adapt([]byte(input), nil)
	return out, err
}

func TestServiceAppCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(appDescriptor), 0o600)
	os.WriteFile(bad, []byte(`{"modules":{"webhook":[{"key":"w","url":"/w"}],"file-pre-export":[{"url":"/p"}]}}`), 0o600)

	var out bytes.Buffer
	code, err := runServiceAppCheck(good, &out)
	if code != 0 || err != nil || !strings.Contains(out.String(), `no defects; app "demo-app", 2 file format, 1 pre-export and 1 webhook modules`) ||
		!strings.Contains(out.String(), "events-hook") {
		t.Errorf("good: %d %v\n%s", code, err, out.String())
	}
	out.Reset()
	code, err = runServiceAppCheck(bad, &out)
	if code != 1 || err != nil || !strings.Contains(out.String(), "2 defects") || !strings.Contains(out.String(), "events is missing") ||
		!strings.Contains(out.String(), "key is missing") {
		t.Errorf("bad: %d %v\n%s", code, err, out.String())
	}
	if code, err := runServiceAppCheck(filepath.Join(dir, "none.json"), &out); code != 1 || err == nil {
		t.Errorf("missing file: %d %v", code, err)
	}
}

// TestServiceAppSignInE2E: with sign_in, a browser without a token signs
// in through the service and reaches the app with its session's verified
// identity; an API client without a token gets 401, never a redirect.
func TestServiceAppSignInE2E(t *testing.T) {
	rig := newOAuthRig(t)
	path := appDescriptorFile(t)
	startCaddy(t, fmt.Sprintf(`http://localhost:{port} {
	service_app {
		descriptor %s
		client_id %s
		client_secret %s
		app_secret demo-app-secret
		service %s
		sign_in {
			cookie_secure off
		}
	}
	reverse_proxy %s
}
`, path, oauthTestClientID, oauthTestSecret, rig.svc.URL, strings.TrimPrefix(rig.app.URL, "http://")))

	if back := rig.login(rig.client, "/projects?x=1"); back != "/projects?x=1" {
		t.Fatalf("sent back to %q after signing in", back)
	}
	echo := rig.through(rig.client, "/projects", true)
	// The page's own API calls (no text/html) ride on the session cookie.
	if api := rig.through(rig.client, "/api/projects", false); api.Domain != "acme.example" {
		t.Errorf("an API call of the signed-in page: %+v", api)
	}
	if !strings.HasPrefix(echo.Authorization, "Bearer ") || echo.User == "" || echo.Domain != "acme.example" {
		t.Errorf("the app saw %+v", echo)
	}
	if resp, body := rig.get(newOAuthClient(t), e2eURL("/api/things"), false); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("an API client without a token: %d %s", resp.StatusCode, body)
	}
}

// TestServiceAppCaddyfile: nested blocks are read by the handlers' own
// parsers, with what service_app supplies left out of the settings; a
// mistake names the file and line.
func TestServiceAppCaddyfile(t *testing.T) {
	path := appDescriptorFile(t)
	head := "localhost {\n\tservice_app {\n\t\tdescriptor " + path + "\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t\tservice http://127.0.0.1:1\n"
	out, err := adaptCaddyfile(t, head+"\t\tsubscription {\n\t\t\ton_error allow\n\t\t}\n\t\tsign_in\n\t\tlimits kv-format {\n\t\t\ttimeout 5s\n\t\t}\n\t\twebhook {\n\t\t\tmax_size 1MiB\n\t\t}\n\t}\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"subscription":{"on_error":"allow"}`, `"sign_in":{}`, `"limits":{"kv-format":{"timeout":5000000000}}`, `"webhooks":{"*":{"max_size":1048576}}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted config lacks %s:\n%s", want, out)
		}
	}
	for name, c := range map[string]struct{ body, want string }{
		"unknown option":       {"\t\tcolour blue\n", `unrecognized service_app sub-directive "colour"`},
		"subscription twice":   {"\t\tsubscription\n\t\tsubscription\n", "subscription given twice"},
		"limits twice":         {"\t\tlimits a {\n\t\t\ttimeout 1s\n\t\t}\n\t\tlimits a {\n\t\t\ttimeout 2s\n\t\t}\n", `limits settings for "a" given twice`},
		"bad nested setting":   {"\t\tlimits {\n\t\t\ttimeout never\n\t\t}\n", "timeout"},
		"argument after block": {"\t\tsign_in now\n", "wrong argument count"},
		"webhook module gone":  {"\t\tlimits kv-format {\n\t\t\tmax_request_size lots\n\t\t}\n", "max_request_size"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := adaptCaddyfile(t, head+c.body+"\t}\n}\n")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Caddyfile:") {
				t.Errorf("error %v, want one naming %q and the line", err, c.want)
			}
		})
	}
}
