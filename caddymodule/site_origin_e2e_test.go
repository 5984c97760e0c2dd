package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// requestWithHost sends a GET for path to the test Caddy with the Host
// header host, as a client that chooses it would.
func requestWithHost(t *testing.T, host, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodGet, e2eURL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// baseURLSite is a site at address whose service_app reads the descriptor
// at path, with extra settings (base_url, say), followed by then.
func baseURLSite(address, path, extra, then string) string {
	return address + ` {
	service_app {
		descriptor ` + path + `
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		` + extra + `
	}
	` + then + `
}
`
}

// TestServiceAppBaseURLNeverFromHost: the served descriptor's baseUrl is
// base_url, else the site's own host name and the port the request came
// in on; a Host header of the client's choosing is never written into it,
// and a site without a host name and without base_url refuses to guess.
func TestServiceAppBaseURLNeverFromHost(t *testing.T) {
	path := appDescriptorFile(t)
	site := func(address, extra string) string { return baseURLSite(address, path, extra, `respond "the app"`) }
	baseURL := func(t *testing.T, host string) string {
		t.Helper()
		resp, body := requestWithHost(t, host, "/manifest.json", nil)
		var d map[string]any
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &d) != nil {
			t.Fatalf("Host %s: %d %s", host, resp.StatusCode, body)
		}
		s, _ := d["baseUrl"].(string)
		return s
	}

	t.Run("a site with a host name", func(t *testing.T) {
		startCaddy(t, site("http://localhost:{port}", ""))
		for _, host := range []string{fmt.Sprintf("localhost:%d", e2eHTTPPort), "LOCALHOST:1", "localhost"} {
			if got := baseURL(t, host); got != e2eBase() {
				t.Errorf("Host %s: baseUrl %q, want %q", host, got, e2eBase())
			}
		}
	})
	t.Run("a site without a host name and base_url", func(t *testing.T) {
		startCaddy(t, site(":{port}", "base_url https://app.example.com/"))
		if got := baseURL(t, "evil.example"); got != "https://app.example.com" {
			t.Errorf("baseUrl %q", got)
		}
	})
	t.Run("a site without a host name and without base_url", func(t *testing.T) {
		startCaddy(t, site(":{port}", ""))
		resp, body := requestWithHost(t, "evil.example", "/manifest.json", nil)
		if resp.StatusCode != http.StatusInternalServerError || strings.Contains(body, "evil.example") || !strings.Contains(body, "base_url") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
}

// TestServiceOAuthRedirectURINeverFromHost: a relative redirect_uri is
// made absolute with the site's own host name, never with the request's
// Host header; a site without a host name refuses to guess.
func TestServiceOAuthRedirectURINeverFromHost(t *testing.T) {
	rig := newOAuthRig(t)
	browser := map[string]string{"Accept": "text/html"}
	redirectURI := func(t *testing.T, resp *http.Response, body string) string {
		t.Helper()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || err != nil {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return loc.Query().Get("redirect_uri")
	}

	startCaddy(t, rig.site(""))
	resp, body := requestWithHost(t, "localhost:1", "/", browser)
	if got := redirectURI(t, resp, body); got != e2eURL("/oauth/callback") {
		t.Errorf("redirect_uri %q, want %q", got, e2eURL("/oauth/callback"))
	}

	startCaddy(t, strings.Replace(rig.site(""), "http://localhost:{port} {", ":{port} {", 1))
	resp, body = requestWithHost(t, "evil.example", "/", browser)
	if resp.StatusCode != http.StatusInternalServerError || strings.Contains(body, "evil.example") || !strings.Contains(body, "redirect_uri") {
		t.Errorf("a site without a host name: %d %s", resp.StatusCode, body)
	}
}

// hostClient sends every request with the Host header host, as a client
// that chooses it would, on a connection of its own.
func hostClient(host string) *http.Client {
	return &http.Client{
		Timeout:       60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     hostTransport{host, &http.Transport{DisableKeepAlives: true}},
	}
}

type hostTransport struct {
	host string
	next http.RoundTripper
}

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.next.RoundTrip(r)
}

// TestServiceLimitsSpillLinkNeverFromHost: a spill link is on
// spill_base_url, else service_app's base_url, else the site's own host
// name and the port the request came in on; a Host header of the
// client's choosing is never written into it, and a site without a host
// name and without spill_base_url refuses the answer rather than guess.
func TestServiceLimitsSpillLinkNeverFromHost(t *testing.T) {
	bigAnswer := []byte(`{"data":{"content":"` + b64(pattern(6<<20)) + `"}}`)
	app := otherApp(t, map[string][]byte{"big": bigAnswer, "file-format": bigAnswer})
	upstream := strings.TrimPrefix(app.URL, "http://")
	job := formatJob("build-file", map[string]any{"strings": []any{}})
	spill := func(address, extra string) string {
		return address + ` {
	service_limits {
		contract custom-file-format
		spill
		spill_dir ` + t.TempDir() + `
		` + extra + `
	}
	reverse_proxy ` + upstream + `
}
`
	}
	contentURL := func(t *testing.T, host, path string) string {
		t.Helper()
		resp, body := request(t, hostClient(host), http.MethodPost, path, map[string]string{"Content-Type": "application/json"}, job)
		var a moduleAnswer
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Data.ContentURL == "" {
			t.Fatalf("Host %s: %d %.300s", host, resp.StatusCode, body)
		}
		return a.Data.ContentURL
	}

	t.Run("a site with a host name", func(t *testing.T) {
		startCaddy(t, spill("http://localhost:{port}", ""))
		for _, host := range []string{"localhost:1", "LOCALHOST", fmt.Sprintf("localhost:%d", e2eHTTPPort)} {
			if got := contentURL(t, host, "/big"); !strings.HasPrefix(got, e2eBase()+"/servicegate/spill/") {
				t.Errorf("Host %s: contentUrl %q, want it under %s", host, got, e2eBase())
			}
		}
	})
	t.Run("spill_base_url", func(t *testing.T) {
		startCaddy(t, spill(":{port}", "spill_base_url https://app.example.com/"))
		if got := contentURL(t, "evil.example", "/big"); !strings.HasPrefix(got, "https://app.example.com/servicegate/spill/") {
			t.Errorf("contentUrl %q", got)
		}
	})
	t.Run("a site without a host name and without spill_base_url", func(t *testing.T) {
		logFile := filepath.Join(t.TempDir(), "caddy.log")
		startCaddyWithGlobal(t, "\tlog {\n\t\toutput file "+logFile+"\n\t}", spill(":{port}", ""))
		resp, body := request(t, hostClient("evil.example"), http.MethodPost, "/big", map[string]string{"Content-Type": "application/json"}, job)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "evil.example") {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
		wantJSONError(t, resp.Header, []byte(body), "too large")
		// The config load said so, and the refusal's log line says what to set.
		logged, _ := os.ReadFile(logFile)
		if n := strings.Count(string(logged), "spill_base_url"); n < 2 || strings.Contains(string(logged), "evil.example") {
			t.Errorf("spill_base_url named %d times in the log, want the load's warning and the refusal:\n%s", n, logged)
		}
	})
	t.Run("under service_app", func(t *testing.T) {
		path := appDescriptorFile(t)
		site := func(address, extra string) string {
			return baseURLSite(address, path, extra, "reverse_proxy "+upstream)
		}
		startCaddy(t, site("http://localhost:{port}", ""))
		if got := contentURL(t, "localhost:1", "/file-format"); !strings.HasPrefix(got, e2eBase()+"/servicegate/spill/") {
			t.Errorf("contentUrl %q, want it under %s", got, e2eBase())
		}
		startCaddy(t, site(":{port}", "base_url https://app.example.com/gate"))
		if got := contentURL(t, "evil.example", "/file-format"); !strings.HasPrefix(got, "https://app.example.com/gate/servicegate/spill/") {
			t.Errorf("contentUrl %q", got)
		}
	})
}

// TestWebhookQueueHostNeverFromHost: a queued delivery reaches the app
// with the site's own host (service_app's base_url under it) as its Host
// and X-Forwarded-Host, never the Host header the delivery came with; on
// a site without a host name it carries no X-Forwarded-Host.
func TestWebhookQueueHostNeverFromHost(t *testing.T) {
	app := newQueueApp(t)
	app.up(t)
	deliver := func(t *testing.T, host, path string, n int) (string, http.Header) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		status, answer, err := emulator.SendDelivery(ctx, hostClient(host), e2eURL(path), emulator.Delivery{
			Body: []byte(queuedDelivery(n)), Secret: "demo-app-secret", OrganizationID: "1", Domain: "acme.example", ModuleKey: "events-hook",
		})
		if err != nil || status != http.StatusAccepted {
			t.Fatalf("Host %s: %d %s %v", host, status, answer, err)
		}
		waitUntil(t, "the delivery", func() bool { return app.distinct() == n })
		app.mu.Lock()
		defer app.mu.Unlock()
		return app.host, app.header
	}

	startCaddy(t, queueSite(app, t.TempDir(), ""))
	site := fmt.Sprintf("localhost:%d", e2eHTTPPort)
	if host, h := deliver(t, "localhost:1", "/webhooks/x", 1); host != site || h.Get("X-Forwarded-Host") != site || h.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("a site with a host name: Host %q, X-Forwarded-Host %q, X-Forwarded-Proto %q; want %s", host, h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"), site)
	}

	startCaddy(t, strings.Replace(queueSite(app, t.TempDir(), ""), "localhost:{port} {", ":{port} {", 1))
	if host, h := deliver(t, "evil.example", "/webhooks/x", 2); host != app.addr || h.Values("X-Forwarded-Host") != nil {
		t.Errorf("a site without a host name: Host %q, X-Forwarded-Host %q; want %s and none", host, h.Values("X-Forwarded-Host"), app.addr)
	}

	path := appDescriptorFile(t)
	startCaddy(t, `:{port} {
	service_app {
		descriptor `+path+`
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		base_url https://app.example.com/gate
		webhook {
			queue {
				to http://`+app.addr+`
				dir `+t.TempDir()+`
			}
		}
	}
	respond "the app"
}
`)
	if host, h := deliver(t, "evil.example", "/webhooks", 3); host != "app.example.com" || h.Get("X-Forwarded-Host") != "app.example.com" || h.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("service_app with base_url: Host %q, X-Forwarded-Host %q, X-Forwarded-Proto %q", host, h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"))
	}
}
