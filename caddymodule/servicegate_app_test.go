package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/servicegate/servicegate/cluster"
	"github.com/servicegate/servicegate/cluster/redistest"
)

func adaptServicegate(t *testing.T, global string) (map[string]json.RawMessage, error) {
	t.Helper()
	input := "{\n" + global + "\n}\n:8080 {\n\trespond ok\n}\n"
	out, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(input), nil)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Apps, nil
}

func TestServicegateGlobalOption(t *testing.T) {
	apps, err := adaptServicegate(t, "\tservicegate {\n\t\tredis rediss://:{env.REDIS_PASSWORD}@redis.internal:6380/2\n\t\tkey_prefix app1:\n\t\ttimeout 100ms\n\t}")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"redis":"rediss://:{env.REDIS_PASSWORD}@redis.internal:6380/2","key_prefix":"app1:","timeout":100000000}`
	if got := string(apps["servicegate"]); got != want {
		t.Errorf("servicegate app\n got %s\nwant %s", got, want)
	}

	apps, err = adaptServicegate(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := apps["servicegate"]; ok {
		t.Error("a Caddyfile without the option configures the servicegate app")
	}

	for name, global := range map[string]string{
		"no redis":       "servicegate {\n}",
		"unknown option": "servicegate {\n redis redis://x:6379\n cluster yes\n}",
		"two URLs":       "servicegate {\n redis redis://x:6379 redis://y:6379\n}",
		"bad timeout":    "servicegate {\n redis redis://x:6379\n timeout soon\n}",
		"given twice":    "servicegate {\n redis redis://x:6379\n}\nservicegate {\n redis redis://y:6379\n}",
	} {
		if _, err := adaptServicegate(t, global); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestServicegateAppRefusesBadURLsWithoutQuotingThem(t *testing.T) {
	t.Setenv("SERVICEGATE_TEST_REDIS_PASSWORD", "")
	for _, u := range []string{
		"http://user:hunter2@redis:6379",
		"redis://:hunter2@",
		"redis://:{env.SERVICEGATE_TEST_REDIS_PASSWORD}@redis:6379", // empty secret
	} {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
		err := (&Servicegate{Redis: u}).Provision(ctx)
		cancel()
		if err == nil {
			t.Errorf("%s accepted", u)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error quotes the password: %v", err)
		}
	}
}

func TestSubscriptionWithoutTheAppSharesNothing(t *testing.T) {
	svc := newSubscriptionService(t, 200, `{"expires":"2099-01-01 00:00:00"}`)
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	provisionSubscription(t, h)
	if h.shared != nil {
		t.Fatal("service_subscription shares answers without the servicegate app")
	}
}

// startCaddyWithGlobal is startCaddy with more global options.
func startCaddyWithGlobal(t *testing.T, global, sites string) *caddytest.Tester {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	sites = strings.ReplaceAll(sites, "{port}", fmt.Sprint(e2eHTTPPort))
	g := strings.TrimSuffix(e2eGlobal(), "}\n") + global + "\n}\n"
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, g+sites)
	return tester
}

// sharedSubscriptionSite is a site whose subscription answers are kept per
// the X-Test-Organization header.
func sharedSubscriptionSite(svc, app string) string {
	return fmt.Sprintf(`
localhost:{port} {
	route /api/* {
		subscription_test_verify
		service_subscription {
			app_identifier my-app
			base_url %s
			negative_ttl 1h
		}
		reverse_proxy %s
	}
}
`, svc, strings.TrimPrefix(app, "http://"))
}

func TestE2ESubscriptionLocalHitMakesNoRedisCall(t *testing.T) {
	srv := redistest.Start(t)
	svc := newSubscriptionTokenService(t)
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)
	app, _ := subscriptionApp(t)
	tester := startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\ttimeout 2s\n\t}", sharedSubscriptionSite(svc.URL, app.URL))

	if resp, body := subscriptionGet(t, tester.Client, "/api/x", "member", "X-Test-Organization", "hooli"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	calls := srv.CommandCalls()
	if calls["get"] == 0 || calls["set"] == 0 {
		t.Fatalf("the first request (a local miss) did not go through Redis: %v", calls)
	}
	if n := srv.Dbsize(t); n != 1 {
		t.Errorf("%d keys in Redis after one answer, want 1", n)
	}

	srv.ResetStats()
	for i := range 200 {
		if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", "X-Test-Organization", "hooli"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	for cmd, n := range srv.WorkCalls() {
		if n > 0 {
			t.Errorf("200 local hits made %d Redis %s calls, want none", n, cmd)
		}
	}
	if n := svc.queries.Load(); n != 1 {
		t.Errorf("%d subscription queries, want 1", n)
	}
}

func TestE2ESubscriptionPurgeReachesThisInstance(t *testing.T) {
	srv := redistest.Start(t)
	svc := newSubscriptionTokenService(t)
	svc.set("member", 402, `{"subscribe_link":"https://service.example/pay"}`)
	app, _ := subscriptionApp(t)
	tester := startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\tkey_prefix e2e:\n\t\ttimeout 2s\n\t}", sharedSubscriptionSite(svc.URL, app.URL))
	org := "X-Test-Organization"

	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", org, "globex"); resp.StatusCode != 402 {
		t.Fatalf("unpaid: %d", resp.StatusCode)
	}
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)

	// Another instance purges: it deletes the shared answer and publishes.
	waitChannel(t, srv, "e2e:subscription-forget")
	if out, err := srv.Do("KEYS", "e2e:subscription:*"); err != nil || out == "" {
		t.Fatalf("no shared answer under the key prefix: %q %v", out, err)
	} else if _, err := srv.Do("DEL", out); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("PUBLISH", "e2e:subscription-forget", "globex"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", org, "globex")
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d a second after another instance's purge", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A purge through this instance's admin API deletes the shared answer.
	admin := fmt.Sprintf("http://localhost:%d/service/subscription/cache?organization=globex", e2eAdminPort)
	resp, err := tester.Client.Do(subscriptionAdminRequest(t, http.MethodDelete, admin, ""))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "{\"organization\":\"globex\",\"forgotten\":1,\"shared\":1}\n" {
		t.Fatalf("purge: %d %s", resp.StatusCode, body)
	}
	if n := srv.Dbsize(t); n != 0 {
		t.Errorf("%d keys left in Redis after the purge", n)
	}
}

func TestE2ESubscriptionRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	svc := newSubscriptionTokenService(t)
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)
	svc.set("unpaid", 402, `{"subscribe_link":"https://service.example/pay"}`)
	app, _ := subscriptionApp(t)
	tester := startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\ttimeout 100ms\n\t}", sharedSubscriptionSite(svc.URL, app.URL))
	org := "X-Test-Organization"
	srv.Stop()

	// Local misses go to the service directly: no 402, no 503 for a paid
	// organization, and an unpaid one still gets its 402.
	for i := range 5 {
		start := time.Now()
		resp, body := subscriptionGet(t, tester.Client, "/api/x", "member", org, fmt.Sprintf("down-%d", i))
		if resp.StatusCode != 200 {
			t.Fatalf("paid organization with Redis down: %d %s", resp.StatusCode, body)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("request took %v with Redis down", d)
		}
	}
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "unpaid", org, "down-unpaid"); resp.StatusCode != 402 {
		t.Errorf("unpaid organization with Redis down: %d", resp.StatusCode)
	}
	metrics := adminMetrics(t, tester)
	if !strings.Contains(metrics, `servicegate_redis_errors_total{op="get"}`) {
		t.Errorf("no servicegate_redis_errors_total{op=\"get\"} on /metrics")
	}

	// A purge cannot reach the others: the endpoint says so.
	admin := fmt.Sprintf("http://localhost:%d/service/subscription/cache?organization=down-0", e2eAdminPort)
	resp, err := tester.Client.Do(subscriptionAdminRequest(t, http.MethodDelete, admin, ""))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "forgot 1 answers of this instance") {
		t.Errorf("purge with Redis down: %d %s", resp.StatusCode, body)
	}

	// Redis is back: answers are shared again without a restart.
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", org, fmt.Sprintf("back-%d", i)); resp.StatusCode != 200 {
			t.Fatalf("after Redis came back: %d", resp.StatusCode)
		}
		if srv.Dbsize(t) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("answers not shared within 5s of Redis' return")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitChannel waits until an instance listens on channel.
func waitChannel(t *testing.T, srv *redistest.Server, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if out, err := srv.Do("PUBSUB", "NUMSUB", channel); err == nil && out != channel+"\n0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody listens on %s", channel)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func adminMetrics(t *testing.T, tester *caddytest.Tester) string {
	t.Helper()
	resp, err := tester.Client.Get(fmt.Sprintf("http://localhost:%d/metrics", e2eAdminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// BenchmarkSubscriptionHitShared is the hot path with the servicegate app
// configured: a local hit, which must cost what it costs without Redis.
func BenchmarkSubscriptionHitShared(b *testing.B) {
	srv := redistest.Start(b)
	c, err := cluster.New(cluster.Options{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	svc := newSubscriptionService(&testing.T{}, 200, `{"expires":"2099-01-01 00:00:00"}`)
	defer svc.Close()
	h := &ServiceSubscription{AppIdentifier: "my-app", BaseURL: svc.URL}
	h.shared = c.Subscriptions()
	provisionSubscription(b, h)
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()
	r := subscriptionRequest("", "")
	setVerified(r, &Verified{Token: "token", Organization: "acme-shared"})
	if err := h.ServeHTTP(w, r, next); err != nil {
		b.Fatal(err)
	}
	srv.ResetStats()
	b.ReportAllocs()
	for b.Loop() {
		_ = h.ServeHTTP(w, r, next)
	}
	b.StopTimer()
	for cmd, n := range srv.WorkCalls() {
		if n > 0 {
			b.Errorf("%d Redis %s calls on local hits", n, cmd)
		}
	}
}

func TestE2ERedisConnectionsSurviveReload(t *testing.T) {
	srv := redistest.Start(t)
	svc := newSubscriptionTokenService(t)
	svc.set("member", 200, `{"expires":"2099-01-01 00:00:00"}`)
	app, _ := subscriptionApp(t)
	global := "\tservicegate {\n\t\tredis " + srv.URL() + "\n\t\ttimeout 2s\n\t}"
	tester := startCaddyWithGlobal(t, global, sharedSubscriptionSite(svc.URL, app.URL))
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", "X-Test-Organization", "reload-1"); resp.StatusCode != 200 {
		t.Fatalf("before the reload: %d", resp.StatusCode)
	}
	before := connectionsReceived(t, srv)

	// A reload with another site config but the same Redis option.
	tester = startCaddyWithGlobal(t, global, sharedSubscriptionSite(svc.URL, app.URL)+"\nlocalhost:1 {\n\trespond ok\n}\n")
	if resp, _ := subscriptionGet(t, tester.Client, "/api/x", "member", "X-Test-Organization", "reload-2"); resp.StatusCode != 200 {
		t.Fatalf("after the reload: %d", resp.StatusCode)
	}
	// The one new connection is this check's own.
	if extra := connectionsReceived(t, srv) - before - 1; extra != 0 {
		t.Errorf("Redis received %d new connections across a reload, want 0: the client was not kept", extra)
	}
	if srv.Dbsize(t) != 2 {
		t.Errorf("%d answers in Redis, want 2", srv.Dbsize(t))
	}
}

// connectionsReceived is Redis' total_connections_received, the
// connection of this call included.
func connectionsReceived(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

func TestServicegateAppSentinelAndClusterFormsShareOneClient(t *testing.T) {
	for name, cfg := range map[string]Servicegate{
		"sentinel": {RedisSentinel: &RedisSentinel{Master: "mymaster", Addresses: []string{"127.0.0.1:1", "127.0.0.1:2"}}, Password: "hunter2", Replicas: 1},
		"cluster":  {RedisCluster: []string{"127.0.0.1:1", "127.0.0.1:2"}, Password: "hunter2"},
	} {
		t.Run(name, func(t *testing.T) {
			var clients []*cluster.Client
			for range 2 {
				ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
				a := cfg
				if err := a.Provision(ctx); err != nil {
					t.Fatal(err)
				}
				clients = append(clients, a.Client())
				defer cancel()
				defer func() { _ = a.Cleanup() }()
			}
			if clients[0] != clients[1] {
				t.Error("two configs naming the same Redis the same way have two clients, want one shared")
			}
			if addr := clients[0].Addr(); !strings.HasPrefix(addr, name+" ") || strings.Contains(addr, "hunter2") {
				t.Errorf("Addr() = %q, want the %s form's nodes and no password", addr, name)
			}
		})
	}
}

func TestRedisPrimaryGaugeFollowsThePromotion(t *testing.T) {
	reportRedisPrimary("", "10.0.0.1:6379")
	reportRedisPrimary("10.0.0.1:6379", "10.0.0.2:6379")
	defer redisPrimary.Reset()
	if n := testutil.CollectAndCount(redisPrimary); n != 1 {
		t.Errorf("%d series, want one: the former primary's is removed", n)
	}
	if v := testutil.ToFloat64(redisPrimary.WithLabelValues("10.0.0.2:6379")); v != 1 {
		t.Errorf("servicegate_redis_primary{address=10.0.0.2:6379} = %v, want 1", v)
	}
}

// TestE2ERedisAddressWithoutSchemeRefusedAtAdapt: a running Caddy asked to
// load servicegate { redis localhost:9 } refuses the Caddyfile at the
// redis line, in the words of every other address without its scheme,
// and keeps serving the config it had; a redis URL's password is never
// quoted.
func TestE2ERedisAddressWithoutSchemeRefusedAtAdapt(t *testing.T) {
	tester := startCaddy(t, ":{port} {\n\trespond \"still here\"\n}\n")
	for _, tt := range []struct{ address, want string }{
		{"localhost:9", `servicegate redis "localhost:9" has no scheme: write redis://localhost:9 (or rediss:// for TLS), at Caddyfile:3`},
		{":hunter2@localhost:9", `servicegate redis "…@localhost:9" has no scheme`},
		{"http://localhost:9", `servicegate redis "http://localhost:9" is not a Redis URL (its scheme is "http")`},
		{"localhost:{env.REDIS_PORT}", `servicegate redis "localhost:{env.REDIS_PORT}" has no scheme`},
	} {
		caddyfile := strings.Replace(e2eGlobal(), "{\n", "{\n\tservicegate {\n\t\tredis "+tt.address+"\n\t}\n", 1) +
			fmt.Sprintf(":%d {\n\trespond ok\n}\n", e2eHTTPPort)
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://localhost:%d/load", e2eAdminPort), strings.NewReader(caddyfile))
		req.Header.Set("Content-Type", "text/caddyfile")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var refusal struct{ Error string }
		err = json.NewDecoder(res.Body).Decode(&refusal)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusBadRequest || !strings.Contains(refusal.Error, tt.want) || strings.Contains(refusal.Error, "hunter2") {
			t.Errorf("redis %s: %d %q %v\nwant 400 with %s", tt.address, res.StatusCode, refusal.Error, err, tt.want)
		}
	}
	tester.AssertGetResponse(e2eURL("/"), http.StatusOK, "still here")
	for _, ok := range []string{"redis://localhost:9", "REDISS://:{env.P}@localhost:9/1", "{env.REDIS_URL}"} {
		if _, err := adaptServicegate(t, "servicegate {\n redis "+ok+"\n}"); err != nil {
			t.Errorf("redis %s: %v", ok, err)
		}
	}
}
