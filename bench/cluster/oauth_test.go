package cluster

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/emulator"
)

// TestClusterSignInAlternatingInstances: a browser's sign-in whose steps
// go to the two instances in turn (round robin) works, and the session is
// then served by both; logins and sessions live in Redis only.
func TestClusterSignInAlternatingInstances(t *testing.T) {
	srv := startRedis(t)
	if testing.Short() {
		t.Skip("cluster test: skipped in -short mode")
	}
	lbPort := freePort(t)
	lbURL := fmt.Sprintf("http://127.0.0.1:%d", lbPort)
	emu, err := emulator.New(emulator.Config{
		ClientID:      "cluster-client",
		ClientSecret:  "cluster-secret",
		RedirectURIs:  []string{lbURL + "/oauth/callback"},
		Organizations: []emulator.Organization{{Domain: "acme.example", ID: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := httptest.NewServer(emu)
	t.Cleanup(svc.Close)

	var ports [2]int
	for i := range ports {
		ports[i] = freePort(t)
		startCaddy(t, fmt.Sprintf("oauth-instance-%d", i+1), fmt.Sprintf(`	servicegate {
		%s
		timeout 1s
	}
}
:%d {
	bind 127.0.0.1
	route {
		header X-Instance %d
		service_oauth {
			client_id cluster-client
			client_secret cluster-secret
			auth_url %s
			scopes project
			cookie_secure off
			redirect_uri %s/oauth/callback
		}
		respond "user {http.request.header.X-Service-User-Id}" 200
	}
}
`, srv.ServicegateOption(), ports[i], i+1, svc.URL, lbURL), ports[i])
	}
	startCaddy(t, "oauth-balancer", fmt.Sprintf(`}
:%d {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:%d 127.0.0.1:%d {
		lb_policy round_robin
	}
}
`, lbPort, ports[0], ports[1]), lbPort)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(rawURL string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	// 1. The page, through the balancer: sent to the service to sign in.
	resp, body := get(lbURL + "/reports")
	begun := resp.Header.Get("X-Instance")
	authorize := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(authorize, svc.URL+"/oauth/authorize?") {
		t.Fatalf("first request: %d %q %s", resp.StatusCode, authorize, body)
	}
	// 2. The user approves at the service.
	resp, _ = get(authorize + "&decision=approve")
	callback := resp.Header.Get("Location")
	if u, err := url.Parse(callback); err != nil || resp.StatusCode != http.StatusFound || u.Query().Get("code") == "" {
		t.Fatalf("consent: %d %q", resp.StatusCode, callback)
	}
	// 3. The callback, through the balancer: to the other instance.
	resp, body = get(callback)
	if got := resp.Header.Get("X-Instance"); got == begun || got == "" {
		t.Fatalf("the callback went to instance %q, as did the login (%q): the steps do not alternate", got, begun)
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/reports" {
		t.Fatalf("callback on the other instance: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	// 4. The session is served by both instances.
	seen := map[string]bool{}
	for range 4 {
		resp, body = get(lbURL + "/reports")
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "user ") || body == "user " {
			t.Fatalf("a request of the session: %d %s", resp.StatusCode, body)
		}
		seen[resp.Header.Get("X-Instance")] = true
	}
	if !seen["1"] || !seen["2"] {
		t.Fatalf("the session was served by instances %v, want both", seen)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:oauth-session:*"); keys == "" || strings.Contains(keys, "\n") {
		t.Fatalf("session keys in Redis %q, want one", keys)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:oauth-login:*"); keys != "" {
		t.Fatalf("login keys left in Redis: %q", keys)
	}
}
