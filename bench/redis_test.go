package main

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// splitCaddyfile returns the global options block of a bench Caddyfile,
// and the lines of its site's route, trimmed.
func splitCaddyfile(t *testing.T, cfg string) (globalBlock string, route []string) {
	t.Helper()
	globalBlock, site, ok := strings.Cut(cfg, "\n}\n")
	if !ok {
		t.Fatalf("no global options block in\n%s", cfg)
	}
	_, r, ok := strings.Cut(site, "\troute {\n")
	if !ok {
		t.Fatalf("no route in\n%s", cfg)
	}
	r, _, _ = strings.Cut(r, "\n\t}\n")
	for _, line := range strings.Split(r, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			route = append(route, line)
		}
	}
	return globalBlock, route
}

// TestRedisChainCaddyfiles: auth-subscription-redis runs the same route on
// both sides, and only the chain side has the servicegate global option,
// on the bench's Redis port; every other chain keeps a plain side of
// reverse_proxy alone and no extra global options.
func TestRedisChainCaddyfiles(t *testing.T) {
	env := &benchEnv{out: "/tmp/bench-out", ports: newPorts(18000)}
	for _, c := range allChains {
		plain, chain, _ := c.caddyfiles(env)
		pg, pr := splitCaddyfile(t, plain)
		cg, cr := splitCaddyfile(t, chain)
		if c.name == "webhook-queue-redis-1k" || c.name == "webhook-queue-redis-replicas1-1k" {
			replicas := c.name == "webhook-queue-redis-replicas1-1k"
			if strings.Join(pr, "|") != "reverse_proxy 127.0.0.1:18001" || !c.redis || !c.durableRedis ||
				c.redisReplica != replicas || strings.Contains(cg, "replicas 1") != replicas ||
				!strings.Contains(cg, "redis redis://127.0.0.1:18093") || strings.Contains(pg, "servicegate") ||
				strings.Contains(strings.Join(cr, "\n"), "dir ") {
				t.Errorf("%s: plain route %q, chain globals\n%s\nchain route %q", c.name, pr, cg, cr)
			}
			continue
		}
		if c.name == "webhook-queue-redis-replicas-1k" {
			// replicas 1 against replicas 0, each side on its own Redis.
			if strings.Join(pr, "|") != strings.Join(cr, "|") || !strings.Contains(pg, "redis redis://127.0.0.1:18092") ||
				strings.Contains(pg, "replicas") || !strings.Contains(cg, "redis redis://127.0.0.1:18093\n\t\treplicas 1") ||
				!c.plainRedis || !c.redisReplica || !c.durableRedis || c.goal != goalAcks || c.drainHandlers != "" ||
				!strings.Contains(c.sidesNote(), "the plain side's `servicegate { redis redis://127.0.0.1:{plainredis} }`") {
				t.Errorf("%s: plain globals\n%s\nchain globals\n%s\nroutes %q %q, note %q", c.name, pg, cg, pr, cr, c.sidesNote())
			}
			continue
		}
		if c.noop {
			// The chain side is its chain's against plain reverse_proxy.
			ofName := strings.TrimSuffix(c.name, "-noop")
			i := len(allChains) - 1
			for i >= 0 && allChains[i].name != ofName {
				i--
			}
			if i < 0 {
				t.Errorf("%s: no chain %s", c.name, strings.TrimSuffix(c.name, "-noop"))
				continue
			}
			_, ofChain, _ := allChains[i].caddyfiles(env)
			_, ofRoute := splitCaddyfile(t, ofChain)
			if strings.Join(cr, "|") != strings.Join(ofRoute, "|") || !strings.HasPrefix(strings.Join(pr, "|"), "vars bench 1|") && !strings.HasPrefix(strings.Join(pr, "|"), "request_header X-Service-Domain ") {
				t.Errorf("%s: chain route %q, want %s's %q; plain route %q", c.name, cr, ofName, ofRoute, pr)
			}
			continue
		}
		if c.name != "auth-subscription-redis" {
			if c.sidesNote() != "" {
				t.Errorf("%s: sides note %q", c.name, c.sidesNote())
			}
			if strings.Join(pr, "|") != "reverse_proxy 127.0.0.1:18001" {
				t.Errorf("%s: plain side route %q, want reverse_proxy alone", c.name, pr)
			}
			if strings.Contains(cg, "servicegate") || c.redis {
				t.Errorf("%s: chain side has the servicegate option or a Redis:\n%s", c.name, cg)
			}
			continue
		}
		if !c.redis || c.load != loadWrk || c.goal != goalCPU || c.target != 0.97 || c.extraSite == nil {
			t.Errorf("%s: redis %v, load %v, goal %v %v, emulator %v", c.name, c.redis, c.load, c.goal, c.target, c.extraSite != nil)
		}
		if strings.Join(pr, "|") != strings.Join(cr, "|") {
			t.Errorf("%s: plain route\n%s\nchain route\n%s\nwant the same", c.name, strings.Join(pr, "\n"), strings.Join(cr, "\n"))
		}
		wantRoute := []string{"service_auth {", "hs256_secret " + benchSecret, "}", "service_subscription {",
			"app_identifier demo-app", "base_url http://127.0.0.1:18091", "}", "reverse_proxy 127.0.0.1:18001"}
		if strings.Join(cr, "|") != strings.Join(wantRoute, "|") {
			t.Errorf("%s: route %q, want %q", c.name, cr, wantRoute)
		}
		if !strings.Contains(cg+"\n", "\n\tservicegate {\n\t\tredis redis://127.0.0.1:18093\n\t}\n") {
			t.Errorf("%s: chain side's global options lack the servicegate redis option:\n%s", c.name, cg)
		}
		if strings.Contains(pg, "servicegate") || strings.Contains(pg, "redis") {
			t.Errorf("%s: plain side's global options name servicegate or redis:\n%s", c.name, pg)
		}
		if !strings.Contains(c.sidesNote(), "only the chain side has the global options `servicegate { redis redis://127.0.0.1:{redis} }`") {
			t.Errorf("%s: sides note %q", c.name, c.sidesNote())
		}
	}
}

func TestGlobalOptionsExtra(t *testing.T) {
	if a, b := globalOptions(1, 2, 3, ""), globalOptions(1, 2, 3, "\n \n"); a != b || !strings.HasSuffix(a, "\t}\n}\n") {
		t.Errorf("no extra lines:\n%s\nwith blank extra lines:\n%s", a, b)
	}
	got := globalOptions(1, 2, 3, "servicegate {\n\tredis redis://127.0.0.1:4\n}")
	if !strings.HasSuffix(got, "\t}\n\tservicegate {\n\t\tredis redis://127.0.0.1:4\n\t}\n}\n") {
		t.Errorf("extra lines not indented inside the block:\n%s", got)
	}
}

func TestRedisArgs(t *testing.T) {
	got := redisArgs(22093, "/x/out/c.redis", "")
	want := []string{"--port", "22093", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", "/x/out/c.redis"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("redisArgs = %q, want %q", got, want)
	}
	got = redisArgs(22093, "/x/out/c.redis", "always")
	want = []string{"--port", "22093", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", "/x/out/c.redis"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("durable redisArgs = %q, want %q", got, want)
	}
	if fsyncOf(false, "always") != "" || fsyncOf(true, "everysec") != "everysec" {
		t.Errorf("fsyncOf: %q %q", fsyncOf(false, "always"), fsyncOf(true, "everysec"))
	}
	for _, v := range []string{"always", "everysec", "no"} {
		if o, err := parseFlags([]string{"-replica-appendfsync", v}); err != nil || o.replicaFsync != v {
			t.Errorf("-replica-appendfsync %s: %v", v, err)
		}
	}
	if _, err := parseFlags([]string{"-replica-appendfsync", "sometimes"}); err == nil {
		t.Error("-replica-appendfsync sometimes accepted")
	}
}

// TestRedisChainSkipped: without redis-server the chain is skipped, not
// failed, before it starts anything, and the results say why.
func TestRedisChainSkipped(t *testing.T) {
	var c *chain
	for _, x := range allChains {
		if x.redis {
			c = x
		}
	}
	if c == nil {
		t.Fatal("no chain needs Redis")
	}
	const why = "redis-server is not installed: run `apt-get install -y redis-server` (or rerun as root with -install)"
	// A nil opts would make any start of a process or of wrk panic.
	env := &benchEnv{out: t.TempDir(), ports: newPorts(18000), noRedis: why}
	res := c.run(env)
	if res.err != nil || res.skip != why {
		t.Fatalf("run = skip %q, err %v; want skip %q", res.skip, res.err, why)
	}
	rep := &report{opts: &options{rounds: 1, duration: time.Second}, chains: []*chainResult{res}}
	md := rep.markdown()
	if !strings.Contains(md, "- **"+c.name+"**: SKIPPED: "+why) || strings.Contains(md, "NOT MEASURED") {
		t.Errorf("results do not say the chain was skipped:\n%s", md)
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=3,usec=9,usec_per_call=3.00\r\ncmdstat_client|setinfo:calls=4,usec=1\r\n"
	got, err := parseCommandStats(info)
	if err != nil || len(got) != 3 || got["get"] != 2 || got["set"] != 3 || got["client|setinfo"] != 4 {
		t.Errorf("parseCommandStats = %v, %v", got, err)
	}
	if s := formatCommandStats(got); s != "CLIENT|SETINFO 4, SET 3, GET 2" {
		t.Errorf("formatCommandStats = %q", s)
	}
	if s := formatCommandStats(nil); s != "none" {
		t.Errorf("formatCommandStats(nil) = %q", s)
	}
	for _, bad := range []string{"cmdstat_get calls=1", "cmdstat_get:usec=1", "cmdstat_get:calls=x"} {
		if _, err := parseCommandStats(bad); err == nil {
			t.Errorf("parseCommandStats(%q) accepted", bad)
		}
	}
	if got, err := parseCommandStats("# Commandstats\r\n"); err != nil || len(got) != 0 {
		t.Errorf("empty commandstats = %v, %v", got, err)
	}
}

// fakeRedis answers one connection: it checks the request is INFO
// commandstats and sends reply.
func fakeRedis(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		want := "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n"
		buf := make([]byte, len(want))
		_, _ = io.ReadFull(bufio.NewReader(conn), buf)
		got <- string(buf)
		_, _ = io.WriteString(conn, reply)
	}()
	t.Cleanup(func() {
		if req := <-got; req != "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n" {
			t.Errorf("request %q, want INFO commandstats", req)
		}
	})
	return ln.Addr().String()
}

func TestRedisCommandStats(t *testing.T) {
	body := "# Commandstats\r\ncmdstat_get:calls=1,usec=1\r\ncmdstat_set:calls=2,usec=1\r\n"
	addr := fakeRedis(t, "$"+strconv.Itoa(len(body))+"\r\n"+body+"\r\n")
	got, err := redisCommandStats(addr, 5*time.Second)
	if err != nil || got["get"] != 1 || got["set"] != 2 {
		t.Errorf("redisCommandStats = %v, %v", got, err)
	}
	note := redisNote(fakeRedis(t, "$"+strconv.Itoa(len(body))+"\r\n"+body+"\r\n"), sideResult{runs: []wrkStats{{Requests: 7}, {Requests: 5}}})
	if !strings.Contains(note, "GET 1, SET 2 calls") || !strings.Contains(note, "for 12 measured requests") {
		t.Errorf("redisNote = %q", note)
	}
}

func TestRedisCommandStatsErrors(t *testing.T) {
	for reply, want := range map[string]string{
		"-NOAUTH Authentication required.\r\n": `redis answered "NOAUTH Authentication required."`,
		"+OK\r\n":                              "want a bulk string",
		"$99999999\r\n":                        "unexpected bulk string length",
		"$5\r\nabc":                            "reading the reply",
		"$3\r\nabcde":                          "not ended by CRLF",
	} {
		_, err := redisCommandStats(fakeRedis(t, reply), 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reply %q: err %v, want %q", reply, err, want)
		}
	}
}
