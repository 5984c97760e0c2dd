package emulator

import (
	"strings"
	"testing"
)

// TestConsoleRequestAsUser: a request as a user of an organization goes
// to the app through the gateway with a token of that organization's
// user, is recorded as a call of kind user with its answer, and shows the
// token masked; bad requests are refused with a message.
func TestConsoleRequestAsUser(t *testing.T) {
	g := newFakeGateway(t)
	s := newConsoleServer(t, g, 0)
	var out actionAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/request", `{"path":"/api/projects?page=2","method":"post","user":42}`, &out)
	if out.Call == nil || out.Call.Kind != kindUser || out.Call.Organization != "unpaid.example" || out.Call.Method != "POST" ||
		out.Call.URL != g.URL+"/api/projects?page=2" || out.Call.Gateway.Outcome != OutcomeAccepted || out.GatewayCache != nil {
		t.Fatalf("the call: %+v", out)
	}
	g.mu.Lock()
	auth := g.headers[len(g.headers)-1].Get("Authorization")
	g.mu.Unlock()
	org, err := s.verifyToken(strings.TrimPrefix(auth, "Bearer "))
	if err != nil || org.domain != "unpaid.example" || org.id != 2 {
		t.Fatalf("the token the app got: %v %+v", err, org)
	}
	var d callDetail
	mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+itoa(out.Call.ID), "", &d)
	if got := d.Request.Headers["Authorization"]; len(got) != 1 || !strings.HasPrefix(got[0], "Bearer ••••") || strings.Contains(got[0], auth[10:]) {
		t.Fatalf("the token as the console shows it: %q", got)
	}
	if items := calls(t, s, "?kind=user"); len(items) != 1 || items[0].ID != out.Call.ID {
		t.Fatalf("the calls of kind user: %+v", items)
	}
	for _, tc := range []struct{ body, want string }{
		{`{}`, "path must be"},
		{`{"path":"api"}`, "path must be"},
		{`{"path":"//evil.example/x"}`, "path must be"},
		{`{"path":"/a b"}`, "path must be"},
		{`{"path":"/","method":"TRACE"}`, "method must be"},
		{`{"path":"/","user":-1}`, "user must be"},
		{`{"path":"/","other":1}`, "no member"},
	} {
		rec := api(t, s, "POST", "/emulator/api/organizations/acme.example/request", tc.body, nil)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
	if rec := api(t, s, "POST", "/emulator/api/organizations/nowhere.example/request", `{"path":"/"}`, nil); rec.Code != 404 {
		t.Errorf("an unknown organization: %d %s", rec.Code, rec.Body)
	}
}

// TestConsoleSubscriptionChangeForgets: a change of a subscription asks
// the gateway of the process to forget the organization's answers, under
// its domain and its id, and says so; without a gateway's cache it says
// that the gateway keeps its answer, and gives the purge.
func TestConsoleSubscriptionChangeForgets(t *testing.T) {
	g := newFakeGateway(t)
	c := &clock{now: testStart}
	cfg := testConfig(c)
	var forgotten []string
	cached := true
	cfg.Console = ConsoleConfig{App: g.URL, Gateway: g.verdicts, ForgetSubscription: func(keys ...string) bool {
		forgotten = append(forgotten, keys...)
		return cached
	}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"unpaid", "missing", "paid"} {
		forgotten = nil
		var out actionAnswer
		mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/"+action, "", &out)
		if out.GatewayCache == nil || out.GatewayCache.State != "forgotten" || strings.Join(forgotten, " ") != "acme.example 1" {
			t.Fatalf("%s: %+v, forgot %v", action, out.GatewayCache, forgotten)
		}
	}
	cached = false
	var out actionAnswer
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/unpaid", "", &out)
	if out.GatewayCache == nil || out.GatewayCache.State != "kept" ||
		out.GatewayCache.Purge != "curl -X DELETE 'http://localhost:2019/service/subscription/cache?organization=acme.example'" {
		t.Fatalf("with no cache in the process: %+v", out.GatewayCache)
	}
}
