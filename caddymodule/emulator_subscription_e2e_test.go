package caddymodule

import (
	"strconv"
	"strings"
	"testing"
)

// userAnswer is the answer of a request as a user, or of a change of a
// subscription.
type userAnswer struct {
	Call         *consoleItem `json:"call"`
	GatewayCache *struct {
		State string `json:"state"`
		Purge string `json:"purge"`
	} `json:"gateway_cache"`
}

// asUser sends a request to the app as a user of the organization through
// the console, and returns the call.
func asUser(t *testing.T, domain, path string) consoleItem {
	t.Helper()
	var out userAnswer
	if code := consoleCall(t, "POST", "organizations/"+domain+"/request", `{"path":"`+path+`"}`, &out); code != 200 || out.Call == nil {
		t.Fatalf("a request as a user of %s: %d %+v", domain, code, out)
	}
	if out.Call.Kind != "user" || out.Call.Organization != domain || out.Call.Direction != "sent" {
		t.Fatalf("the request as a user: %+v", out.Call)
	}
	return *out.Call
}

// TestEmulatorConsoleSubscriptionChangesTakeEffect: with the gateway in
// the emulator's process, Make unpaid, Remove subscription and Mark paid
// change what the gateway answers the organization's next request, with
// no purge by hand; the console's request as a user shows each answer.
func TestEmulatorConsoleSubscriptionChangesTakeEffect(t *testing.T) {
	app := newConsoleApp(t)
	sites := strings.Replace(consoleSites(t, app.URL, ""), "\t\tinstallations {", "\t\tsubscription\n\t\tinstallations {", 1)
	startCaddy(t, sites)
	if c := asUser(t, "acme.example", "/api/projects?page=1"); c.Status != 200 || c.Gateway.Outcome != "accepted" {
		t.Fatalf("a paid organization's request: %+v", c)
	}
	change := func(action, state string) {
		t.Helper()
		var out userAnswer
		if code := consoleCall(t, "POST", "organizations/acme.example/"+action, "", &out); code != 200 || out.GatewayCache == nil ||
			out.GatewayCache.State != state {
			t.Fatalf("%s: %d %+v", action, code, out.GatewayCache)
		}
	}
	change("unpaid", "forgotten")
	c := asUser(t, "acme.example", "/api/projects")
	var d struct {
		Answer struct {
			Headers map[string][]string `json:"headers"`
			Body    string              `json:"body"`
		} `json:"answer"`
		Request struct {
			Headers map[string][]string `json:"headers"`
		} `json:"request"`
	}
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(c.ID, 10), "", &d)
	if c.Status != 402 || !strings.Contains(d.Answer.Body, "subscribe_link") || len(d.Answer.Headers["Location"]) != 1 {
		t.Fatalf("after Make unpaid: %d %s %v", c.Status, d.Answer.Body, d.Answer.Headers)
	}
	if auth := d.Request.Headers["Authorization"]; len(auth) != 1 || !strings.HasPrefix(auth[0], "Bearer ••••") || len(auth[0]) > 30 {
		t.Fatalf("the user's token, as the console shows it: %q", auth)
	}
	change("missing", "forgotten")
	if c := asUser(t, "acme.example", "/api/projects"); c.Status != 403 {
		t.Fatalf("after Remove subscription: %+v", c)
	}
	change("paid", "forgotten")
	if c := asUser(t, "acme.example", "/api/projects"); c.Status != 200 {
		t.Fatalf("after Mark paid: %+v", c)
	}
	// Another organization's cached answer stays.
	if c := asUser(t, "globex.example", "/api/projects"); c.Status != 200 {
		t.Fatalf("globex: %+v", c)
	}
}

// TestEmulatorConsoleSubscriptionGatewayElsewhere: with no gateway in the
// emulator's process, a change of a subscription says that the gateway
// keeps its cached answer, and gives the purge.
func TestEmulatorConsoleSubscriptionGatewayElsewhere(t *testing.T) {
	app := newConsoleApp(t)
	sites := consoleSites(t, app.URL, "")
	startCaddy(t, sites[:strings.Index(sites, "\nhttp://localhost:{port}")])
	var out userAnswer
	if code := consoleCall(t, "POST", "organizations/globex.example/unpaid", "", &out); code != 200 || out.GatewayCache == nil ||
		out.GatewayCache.State != "kept" || !strings.Contains(out.GatewayCache.Purge, "/service/subscription/cache?organization=globex.example") {
		t.Fatalf("unpaid with the gateway elsewhere: %d %+v", code, out.GatewayCache)
	}
}
