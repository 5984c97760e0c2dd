package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/servicegate/servicegate"
	"github.com/servicegate/servicegate/contract"
)

func TestReplaceResults(t *testing.T) {
	section := "## Results\n\nnew numbers\n"
	block := resultsStart + "\n## Results\n\nnew numbers\n" + resultsEnd + "\n"
	tests := []struct {
		name, doc, want string
		stray           bool
	}{
		{"empty file", "", block, false},
		{"no markers: appended", "# Benchmarks\n\nhow to run", "# Benchmarks\n\nhow to run\n\n" + block, false},
		{
			"markers: replaced, the rest kept",
			"# Benchmarks\n\n" + resultsStart + "\nnot yet measured\n" + resultsEnd + "\n\n## After\n",
			"# Benchmarks\n\n" + block + "\n## After\n", false,
		},
		{"start without end: appended", resultsEnd + "\n" + resultsStart + "\n", resultsEnd + "\n" + resultsStart + "\n\n" + block, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := replaceResults(tt.doc, section)
			if got != tt.want {
				t.Errorf("replaceResults:\n%q\nwant\n%q", got, tt.want)
			}
			if again := replaceResults(got, section); !tt.stray && again != got {
				t.Errorf("a second run changed the file:\n%q\nfrom\n%q", again, got)
			}
		})
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 2s test @ http://127.0.0.1:18080/\n  2 threads and 32 connections\n" +
		"  Latency Distribution\n     50%    1.20ms\n" +
		`BENCHJSON {"requests":1000,"duration_us":2000000,"status_errors":3,"connect_errors":0,"read_errors":1,"write_errors":0,"timeouts":2,"p50_us":1200.5,"p99_us":9000.0}` + "\n" +
		"Requests/sec:    500.00\n"
	s, err := parseWrk([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 1000 || s.rps() != 500 || s.Status != 3 || s.socketErrors() != 3 || s.P50 != 1200.5 || s.P99 != 9000 {
		t.Errorf("parsed %+v", s)
	}
	if err := s.check(); err == nil || !strings.Contains(err.Error(), "3 answers") {
		t.Errorf("check() = %v, want the non-2xx answers refused", err)
	}
	if _, err := parseWrk([]byte("Requests/sec: 1\n")); err == nil {
		t.Error("output without a summary line parsed")
	}
	if _, err := parseWrk([]byte("BENCHJSON {nope\n")); err == nil {
		t.Error("a broken summary line parsed")
	}
}

func TestWrkStatsCheck(t *testing.T) {
	tests := []struct {
		name string
		s    wrkStats
		ok   bool
	}{
		{"clean", wrkStats{Requests: 5000, DurationUS: 1e6}, true},
		{"few socket errors", wrkStats{Requests: 5000, Read: 5}, true},
		{"many socket errors", wrkStats{Requests: 5000, Read: 6}, false},
		{"a refusal", wrkStats{Requests: 5000, Status: 1}, false},
		{"nothing done", wrkStats{}, false},
	}
	for _, tt := range tests {
		if err := tt.s.check(); (err == nil) != tt.ok {
			t.Errorf("%s: check() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tcaddy\nVmPeak:\t 1300000 kB\nVmHWM:\t   65536 kB\nVmRSS:\t   60000 kB\n"
	got, err := parseVmHWM(strings.NewReader(status))
	if err != nil || got != 65536*1024 {
		t.Errorf("parseVmHWM = %d, %v; want %d", got, err, 65536*1024)
	}
	for _, bad := range []string{"Name:\tcaddy\n", "VmHWM:\t12 MB\n", "VmHWM:\tx kB\n"} {
		if _, err := parseVmHWM(strings.NewReader(bad)); err == nil {
			t.Errorf("parseVmHWM(%q) succeeded", bad)
		}
	}
}

func TestLuaQuote(t *testing.T) {
	tests := map[string]string{
		`Bearer abc.def`:  `"Bearer abc.def"`,
		`a"b\c`:           `"a\"b\\c"`,
		"line\nbreak\x7f": `"line\010break\127"`,
	}
	for in, want := range tests {
		if got := luaQuote(in); got != want {
			t.Errorf("luaQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDeliveryBody(t *testing.T) {
	for _, size := range []int{10, size1K, size100K, size5M} {
		b := deliveryBody(size)
		var d struct {
			Events []struct {
				Event string `json:"event"`
			} `json:"events"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("size %d: not JSON: %v", size, err)
		}
		if len(d.Events) == 0 || d.Events[0].Event != "project.translated" {
			t.Errorf("size %d: events %v", size, d.Events)
		}
		if size >= size1K && (len(b) > size || len(b) < size-100) {
			t.Errorf("size %d: body has %d bytes", size, len(b))
		}
	}
}

func TestJobBody(t *testing.T) {
	for _, size := range []int{size100K, size5M, size100K + 1, size100K + 3} {
		b := jobBody(size)
		if len(b) != size {
			t.Errorf("jobBody(%d) has %d bytes", size, len(b))
		}
		var j struct {
			JobType string `json:"jobType"`
			File    struct {
				Content string `json:"content"`
			} `json:"file"`
		}
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatalf("jobBody(%d) is not JSON: %v", size, err)
		}
		if _, err := base64.StdEncoding.DecodeString(j.File.Content); err != nil || j.JobType != "parse-file" {
			t.Errorf("jobBody(%d): jobType %q, content not base64: %v", size, j.JobType, err)
		}
	}
}

func TestWebhookRequestSignature(t *testing.T) {
	body := deliveryBody(size1K)
	rq := webhookRequest(body)
	headers := map[string]string{}
	for _, h := range rq.headers {
		headers[h[0]] = h[1]
	}
	mac := hmac.New(sha256.New, []byte(benchSecret))
	mac.Write(body)
	if got, want := headers["X-Service-Signature"], hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
	if headers["X-Service-Domain"] != benchDomain || headers["X-Service-Id"] != "1" || headers["Content-Type"] != "application/json" {
		t.Errorf("headers %v", headers)
	}
}

func TestMintHS256(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok, err := mintHS256(benchSecret, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if !looksLikeJWT(tok) {
		t.Fatalf("%q does not look like a JWT", tok)
	}
	parts := strings.Split(tok, ".")
	mac := hmac.New(sha256.New, []byte(benchSecret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if parts[2] != base64.RawURLEncoding.EncodeToString(mac.Sum(nil)) {
		t.Error("signature does not verify with the bench secret")
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Exp     int64  `json:"exp"`
		Domain  string `json:"domain"`
		Context struct {
			OrganizationID int `json:"organization_id"`
		} `json:"context"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Exp != now.Add(time.Hour).Unix() || claims.Domain != benchDomain || claims.Context.OrganizationID != benchOrgID {
		t.Errorf("claims %+v", claims)
	}
	for _, bad := range []string{"", "a.b", "a.b.c.d", "!!.e30.x", "e30.e30.x y"} {
		if looksLikeJWT(bad) {
			t.Errorf("looksLikeJWT(%q) = true", bad)
		}
	}
}

func TestSelectChains(t *testing.T) {
	all, err := selectChains(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"auth", "auth-subscription", "auth-subscription-redis", "app-api", "webhook-1k", "webhook-5m", "webhook-queue-1k",
		"webhook-queue-redis-1k", "webhook-queue-redis-replicas1-1k", "webhook-queue-redis-replicas-1k", "limits-100k", "limits-rss", "limits-rss-contract", "contract-5m"}
	var got []string
	for _, c := range all {
		got = append(got, c.name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("default chains %v, want %v", got, want)
	}
	noop, err := selectChains([]string{"noop"})
	if err != nil || len(noop) != 3 {
		t.Fatalf("selectChains(noop) = %v, %v", noop, err)
	}
	for _, c := range noop {
		if !c.noop || c.plainHandlers == "" || !strings.Contains(c.sidesNote(), "no-op counterpart") {
			t.Errorf("%s: a no-op chain with plain handlers %q, note %q", c.name, c.plainHandlers, c.sidesNote())
		}
	}
	some, err := selectChains([]string{"webhook-1k", "std", "webhook-1k"})
	if err != nil || len(some) != 6 || some[0].name != "webhook-1k" || !some[1].std {
		t.Errorf("selectChains(webhook-1k,std) = %v, %v", some, err)
	}
	if _, err := selectChains([]string{"nope"}); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Errorf("unknown chain: %v", err)
	}
	for _, n := range []string{"auth-subscription-redis", "app-api", "webhook-queue-1k", "limits-rss-contract", "contract-5m"} {
		one, err := selectChains([]string{n})
		if err != nil || len(one) != 1 || one[0].name != n {
			t.Errorf("selectChains(%s) = %v, %v", n, one, err)
		}
	}
}

// TestChainCaddyfilesAdapt adapts the Caddyfiles of both sides of every
// chain with the servicegate modules, the way bench/out/caddy will: a
// directive spelled wrong, or a descriptor with a defect, fails here and
// not in the middle of a run.
func TestChainCaddyfilesAdapt(t *testing.T) {
	env := &benchEnv{out: t.TempDir(), ports: newPorts(18000)}
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, c := range allChains {
		t.Run(c.name, func(t *testing.T) {
			if err := c.writeFiles(env.out); err != nil {
				t.Fatal(err)
			}
			plain, chain, service := c.caddyfiles(env)
			// The service's stand-in runs in a process of its own, so
			// neither measured side holds its work.
			if strings.Contains(plain+chain, "service_emulator") || (c.extraSite != nil) != strings.Contains(service, "service_emulator") {
				t.Errorf("the emulator is on a measured side, or missing from the service's Caddy:\n%s\n%s\n%s", plain, chain, service)
			}
			sides := map[string]string{"plain": plain, "chain": chain}
			if service != "" {
				sides["service"] = service
			}
			for side, cfg := range sides {
				for _, ph := range []string{"{out}", "{emulator}", "{upstream}", "{redis}", "{drain}"} {
					if strings.Contains(cfg, ph) {
						t.Errorf("%s side keeps the bench placeholder %s:\n%s", side, ph, cfg)
					}
				}
				_, warnings, err := adapter.Adapt([]byte(cfg), map[string]any{"filename": c.name + "-" + side + ".Caddyfile"})
				// The bench's one secret, a fixture of loopback runs, is
				// written out on purpose: that warning is expected.
				warnings = slices.DeleteFunc(warnings, func(w caddyconfig.Warning) bool {
					return strings.Contains(w.Message, "is written into the Caddyfile")
				})
				if err != nil {
					t.Errorf("%s side does not adapt: %v\n%s", side, err, cfg)
				} else if len(warnings) > 0 {
					t.Errorf("%s side adapts with warnings %v", side, warnings)
				}
			}
		})
	}
}

func TestNewChainsCaddyfiles(t *testing.T) {
	env := &benchEnv{out: "/tmp/bench-out", ports: newPorts(18000)}
	byName := map[string]*chain{}
	for _, c := range allChains {
		byName[c.name] = c
	}
	tests := []struct {
		name string
		want []string // lines of the chain side's route, in order
	}{
		{"app-api", []string{
			"service_app {", "descriptor /tmp/bench-out/app-api.descriptor.json", "client_id demo-client",
			"client_secret " + benchSecret, "app_secret " + benchSecret, "service http://127.0.0.1:18091", "subscription", "}",
			"reverse_proxy 127.0.0.1:18001",
		}},
		{"webhook-queue-1k", []string{
			"service_webhook {", "secret " + benchSecret, "queue {", "to http://127.0.0.1:18001",
			"dir /tmp/bench-out/webhook-queue-1k.queue", "}", "}", "reverse_proxy 127.0.0.1:18001",
		}},
		{"limits-rss-contract", []string{"service_limits {", "contract custom-file-format", "}", "reverse_proxy 127.0.0.1:18001"}},
		{"contract-5m", []string{"service_limits {", "contract custom-file-format", "}", "reverse_proxy 127.0.0.1:18001"}},
	}
	for _, tt := range tests {
		c := byName[tt.name]
		if c == nil {
			t.Errorf("no chain %s", tt.name)
			continue
		}
		_, cfg, _ := c.caddyfiles(env)
		_, route, _ := strings.Cut(cfg, "http://:18090 {\n\troute {\n")
		var got []string
		for _, line := range strings.Split(route, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				got = append(got, line)
			}
		}
		if len(got) < len(tt.want) || strings.Join(got[:len(tt.want)], "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s: chain side route\n%s\nwant the lines\n%s", tt.name, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
		}
	}
	if q := byName["webhook-queue-1k"]; !strings.Contains(q.handlers, "{out}/"+q.scratch+"\n") {
		t.Errorf("webhook-queue-1k: the queue dir is not its scratch directory %q, which the run removes", q.scratch)
	}
	if a := byName["app-api"]; a.extraSite == nil || a.files["app-api.descriptor.json"] == "" {
		t.Error("app-api: no emulator site or no descriptor file")
	}
	for _, n := range []string{"limits-rss-contract", "contract-5m"} {
		c := byName[n]
		rq, _, err := c.request(nil)
		if err != nil || rq.path != answerPath || c.minAnswer < 4_000_000 || c.echo {
			t.Errorf("%s: request to %s (%v), minAnswer %d, echo %v; want %s, a 5 MB answer, no echo", n, rq.path, err, c.minAnswer, c.echo, answerPath)
		}
	}
}

func TestContractJobBody(t *testing.T) {
	for _, size := range []int{size1K, size5M} {
		b := contractJobBody(size)
		if len(b) != size {
			t.Errorf("contractJobBody(%d) has %d bytes", size, len(b))
		}
		if _, err := contract.ParseJob(contract.CustomFileFormat, bytes.NewReader(b)); err != nil {
			t.Errorf("contractJobBody(%d) is not a valid job: %v", size, err)
		}
	}
	// The job of the other chains is not one: the contract chains need
	// their own.
	if _, err := contract.ParseJob(contract.CustomFileFormat, bytes.NewReader(jobBody(size1K))); err == nil {
		t.Error("jobBody passes the contract; contractJobBody is not needed")
	}
}

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
		case "/big":
			_, _ = w.Write(bytes.Repeat([]byte("x"), 5000))
		default:
			http.Error(w, `{"error":{"message":"no"}}`, http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	client := srv.Client()
	get := func(path string) request { return request{method: http.MethodGet, path: path} }
	if n, err := probe(client, get("/accepted"), srv.URL, nil, 0); err != nil || n != 0 {
		t.Errorf("a 202 refused: %d, %v", n, err)
	}
	if n, err := probe(client, get("/big"), srv.URL, nil, 5000); err != nil || n != 5000 {
		t.Errorf("a 5000-byte answer with minLen 5000: %d, %v", n, err)
	}
	if _, err := probe(client, get("/big"), srv.URL, nil, 5001); err == nil || !strings.Contains(err.Error(), "5000 bytes") {
		t.Errorf("a 5000-byte answer with minLen 5001: %v", err)
	}
	if _, err := probe(client, get("/refused"), srv.URL, nil, 0); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a 401 accepted: %v", err)
	}
}

func TestBodyLabel(t *testing.T) {
	tests := []struct {
		r    chainResult
		want string
	}{
		{chainResult{c: &chain{echo: true}, bodySize: size5M}, "5.0 MB echoed"},
		{chainResult{c: &chain{}, bodySize: size1K, answerSize: 4_999_000}, "1 KiB → 5.0 MB"},
		{chainResult{c: &chain{}, bodySize: size5M, answerSize: 12}, "5.0 MB"},
	}
	for _, tt := range tests {
		if got := bodyLabel(&tt.r); got != tt.want {
			t.Errorf("bodyLabel = %q, want %q", got, tt.want)
		}
	}
}

func TestSiteWithRoute(t *testing.T) {
	got := siteWithRoute(18090, "service_auth {\n\ths256_secret s\n}", 18001)
	want := "http://:18090 {\n\troute {\n\t\tservice_auth {\n\t\t\ths256_secret s\n\t\t}\n\t\treverse_proxy 127.0.0.1:18001\n\t}\n}\n"
	if got != want {
		t.Errorf("siteWithRoute:\n%s\nwant\n%s", got, want)
	}
	plain := siteWithRoute(18080, "", 18001)
	if plain != "http://:18080 {\n\troute {\n\t\treverse_proxy 127.0.0.1:18001\n\t}\n}\n" {
		t.Errorf("plain site:\n%s", plain)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func FuzzParseWrk(f *testing.F) {
	f.Add([]byte(`BENCHJSON {"requests":1,"duration_us":1}`))
	f.Add([]byte("Running 1s test\nRequests/sec: 1\n"))
	f.Add([]byte("BENCHJSON {\"requests\":-1"))
	f.Fuzz(func(t *testing.T, out []byte) {
		s, err := parseWrk(out)
		if err != nil && s != (wrkStats{}) {
			t.Errorf("error %v with stats %+v", err, s)
		}
	})
}

func FuzzParseVmHWM(f *testing.F) {
	f.Add("VmHWM:\t 1024 kB\n")
	f.Add("VmHWM: kB\n")
	f.Add("Name: x\n")
	f.Fuzz(func(t *testing.T, status string) {
		n, err := parseVmHWM(strings.NewReader(status))
		if err == nil && n < 0 && !strings.Contains(status, "-") {
			t.Errorf("negative peak %d from %q", n, status)
		}
	})
}

func TestParseProcStatBusy(t *testing.T) {
	stat := "cpu  1000 50 300 9000 200 10 20 30 0 0\ncpu0 500 25 150 4500 100 5 10 15 0 0\n"
	want := (1000.0 + 50 + 300 + 10 + 20 + 30) / userHZ
	if got, _ := parseProcStat(stat); got != want {
		t.Errorf("parseProcStat busy = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if got, steal := parseProcStat(bad); got != -1 || steal != -1 {
			t.Errorf("parseProcStat(%q) = %v, %v, want -1, -1", bad, got, steal)
		}
	}
}

func TestOtherShare(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := cpuMark{at: t0, busy: 100, ours: 10}
	b := cpuMark{at: t0.Add(10 * time.Second), busy: 115, ours: 20}
	// 15 s busy in 20 CPU-seconds, 10 of them ours: 5/20 by others.
	if got := otherShare(a, b, 2); got != 0.25 {
		t.Errorf("otherShare = %v, want 0.25", got)
	}
	if got := otherShare(a, cpuMark{at: b.at, busy: 105, ours: 20}, 2); got != 0 {
		t.Errorf("otherShare with more of ours than busy = %v, want 0", got)
	}
	if got := stealShare(cpuMark{at: t0, steal: 1}, cpuMark{at: b.at, steal: 3}, 2); got != 0.1 {
		t.Errorf("stealShare = %v, want 0.1", got)
	}
	if _, got := parseProcStat("cpu  1 2 3 4 5 6 7 800 0 0\n"); got != 8 {
		t.Errorf("parseProcStat steal = %v, want 8", got)
	}
	if got := otherShare(cpuMark{busy: -1}, b, 2); got != -1 {
		t.Errorf("otherShare of an unknown mark = %v, want -1", got)
	}
}

func TestParseProcCPU(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
	stat := "4242 (caddy (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 12 0\n"
	got, err := parseProcCPU(stat)
	if err != nil || got != 3*time.Second {
		t.Errorf("parseProcCPU = %v, %v; want 3s", got, err)
	}
	for _, bad := range []string{"", "4242 caddy S 1", "4242 (caddy) S 1 2 3", "4242 (caddy) S 1 4242 4242 0 -1 0 0 0 0 0 x 50 0"} {
		if _, err := parseProcCPU(bad); err == nil {
			t.Errorf("parseProcCPU(%q) succeeded", bad)
		}
	}
}

func FuzzParseProcCPU(f *testing.F) {
	f.Add("4242 (caddy) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 12 0\n")
	f.Add("1 ()) S")
	f.Add("")
	f.Fuzz(func(t *testing.T, stat string) {
		d, err := parseProcCPU(stat)
		if err != nil && d != 0 {
			t.Errorf("error %v with %v", err, d)
		}
	})
}

func FuzzParseProcStatBusy(f *testing.F) {
	f.Add("cpu  1000 50 300 9000 200 10 20 30 0 0\n")
	f.Add("cpu 1 2 3\n")
	f.Fuzz(func(t *testing.T, stat string) {
		_, _ = parseProcStat(stat) // must not panic on anything
	})
}

func TestMetricValue(t *testing.T) {
	text := `# HELP servicegate_webhook_queue_depth Deliveries waiting.
# TYPE servicegate_webhook_queue_depth gauge
servicegate_webhook_queue_depth{dir="/a b/q}x"} 7
servicegate_webhook_queue_depth{dir="/c"} 5
servicegate_webhook_queue_depth_other 100
servicegate_webhook_queue_attempts_total{outcome="dead"} 2
servicegate_webhook_queue_attempts_total{outcome="delivered"} 1.5e+06
up 1
`
	tests := []struct {
		series string
		want   float64
		ok     bool
	}{
		{"servicegate_webhook_queue_depth", 12, true},
		{`servicegate_webhook_queue_attempts_total{outcome="delivered"}`, 1.5e6, true},
		{"servicegate_webhook_queue_attempts_total", 1.5e6 + 2, true},
		{"up", 1, true},
		{"servicegate_webhook_queue", 0, false},
		{"absent_total", 0, false},
	}
	for _, tt := range tests {
		if got, ok := metricValue(text, tt.series); got != tt.want || ok != tt.ok {
			t.Errorf("metricValue(%s) = %v, %v; want %v, %v", tt.series, got, ok, tt.want, tt.ok)
		}
	}
}
