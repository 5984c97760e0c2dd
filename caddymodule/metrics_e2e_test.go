package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/version"
)

// scrapeMetrics reads Caddy's metrics from the admin endpoint, as a
// Prometheus scraping it would.
func scrapeMetrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", e2eAdminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// metricValue is the value of one series of an exposition, written as it
// appears there (name{labels}); 0 when it is absent.
func metricValue(exposition, series string) float64 {
	for line := range strings.Lines(exposition) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// metricFamilies maps the name of each metric family of an exposition to
// its type.
func metricFamilies(exposition string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(exposition) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// TestBuildInfoMetricE2E: a Caddy running any servicegate handler reports
// servicegate_build_info with the version of the binary.
func TestBuildInfoMetricE2E(t *testing.T) {
	startCaddy(t, `
localhost:{port} {
	service_auth {
		hs256_secret demo-client-secret
	}
	respond "ok"
}
`)
	want := fmt.Sprintf("servicegate_build_info{version=%q} 1\n", version.Get())
	if got := scrapeMetrics(t); !strings.Contains(got, want) {
		t.Errorf("the metrics lack %q", want)
	}
	if v := version.Get(); v == "" || v == "unknown" {
		t.Errorf("version.Get() = %q", v)
	}
}

// everyPartExposition runs a Caddy with every part of servicegate (every
// handler through service_app, the webhook queue, Redis) and returns its
// metrics as Prometheus scrapes them.
func everyPartExposition(t *testing.T) string {
	t.Helper()
	srv := redistest.Start(t)
	app := newAppUpstream(t)
	sites := strings.Replace(appSites(app.URL+"/manifest.json", strings.TrimPrefix(app.URL, "http://")),
		"public /assets/*", `public /assets/*
		sign_in {
			cookie_secure off
		}
		webhook {
			queue {
				to `+app.URL+`
			}
		}
		limits {
			spill_key 0123456789abcdef-shared
		}`, 1)
	startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t}", sites)
	return scrapeMetrics(t)
}

// TestMetricNamesFollowPrometheusPractice: every servicegate metric a
// running Caddy reports is named as Prometheus advises (counters end in
// _total and nothing else does; times in seconds, no other unit of time
// or size) and carries only labels whose values the code or the config
// bound: never an organization, user, token, path or id.
func TestMetricNamesFollowPrometheusPractice(t *testing.T) {
	exposition := everyPartExposition(t)
	bounded := map[string]bool{"outcome": true, "answer": true, "event": true, "op": true, "dir": true, "app": true, "version": true, "le": true}
	families := metricFamilies(exposition)
	n := 0
	for name, typ := range families {
		if !strings.HasPrefix(name, "servicegate_") {
			continue
		}
		n++
		if (typ == "counter") != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s: counters, and only counters, end in _total", name, typ)
		}
		for _, unit := range []string{"_milliseconds", "_ms", "_minutes", "_hours", "_kb", "_mb", "_kilobytes", "_megabytes", "_percent"} {
			if strings.Contains(name+"_", unit+"_") {
				t.Errorf("%s is not in base units (seconds, bytes, ratios)", name)
			}
		}
		if (typ == "histogram" || strings.Contains(name, "_age") || strings.Contains(name, "_timestamp")) && !strings.HasSuffix(name, "_seconds") {
			t.Errorf("%s measures time: it ends in _seconds", name)
		}
	}
	if n < 10 {
		t.Fatalf("only %d servicegate metrics reported: the config does not use every part", n)
	}
	for line := range strings.Lines(exposition) {
		if !strings.HasPrefix(line, "servicegate_") {
			continue
		}
		open := strings.IndexByte(line, '{')
		if open < 0 {
			continue
		}
		for _, m := range labelInSample.FindAllStringSubmatch(line[open:], -1) {
			if label := m[1]; !bounded[label] {
				t.Errorf("label %q of %s is not one whose values are bounded", label, line[:open])
			}
		}
	}
}

// labelInSample finds the label names of a sample line, past its name.
var labelInSample = regexp.MustCompile(`[{,]([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)

// metricNameInQuery finds the metric names of servicegate in a PromQL
// expression.
var metricNameInQuery = regexp.MustCompile(`\bservicegate_[a-z0-9_]+`)

// TestExamplesNameServicegateMetrics: the Grafana dashboard and the
// Prometheus alerts of examples/ name only metrics servicegate registers
// (gathered from a Caddy running every handler, the webhook queue and
// Redis), and the dashboard shows every one of them. Where promtool is
// installed, it checks the alert rules and the dashboard's queries.
func TestExamplesNameServicegateMetrics(t *testing.T) {
	registered := map[string]bool{}
	for name, typ := range metricFamilies(everyPartExposition(t)) {
		if !strings.HasPrefix(name, "servicegate_") {
			continue
		}
		registered[name] = true
		if typ == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				registered[name+s] = true
			}
		}
	}
	for _, must := range []string{"servicegate_build_info", "servicegate_webhook_queue_depth", "servicegate_redis_errors_total", "servicegate_app_descriptor_stale", "servicegate_oauth_events_total"} {
		if !registered[must] {
			t.Fatalf("the running Caddy does not report %s: the config does not use every part", must)
		}
	}

	// The dashboard's queries, and every metric family shown.
	raw, err := os.ReadFile("../examples/grafana/servicegate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("examples/grafana/servicegate.json: %v", err)
	}
	var dashExprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			dashExprs = append(dashExprs, tg.Expr)
		}
	}

	// The alert rules.
	raw, err = os.ReadFile("../examples/prometheus/servicegate-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("examples/prometheus/servicegate-alerts.yml: %v", err)
	}
	var alertExprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alertExprs = append(alertExprs, r.Expr)
		}
	}
	if len(dashExprs) == 0 || len(alertExprs) == 0 {
		t.Fatalf("%d dashboard queries, %d alert rules", len(dashExprs), len(alertExprs))
	}

	shown := map[string]bool{}
	for file, exprs := range map[string][]string{"dashboard": dashExprs, "alerts": alertExprs} {
		for _, e := range exprs {
			for _, name := range metricNameInQuery.FindAllString(e, -1) {
				if !registered[name] {
					t.Errorf("the %s name %s, which servicegate does not register", file, name)
				}
				if file == "dashboard" {
					shown[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
				}
			}
		}
	}
	for name := range registered {
		if !shown[name] && !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_count") {
			t.Errorf("the dashboard does not show %s", name)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not installed (Debian: apt-get install prometheus): the PromQL is not checked here; CI checks the rules")
		return
	}
	if out, err := exec.Command(promtool, "check", "rules", "../examples/prometheus/servicegate-alerts.yml").CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	// The dashboard's queries, with Grafana's variables given values, as
	// recording rules promtool can parse.
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, e := range dashExprs {
		q, _ := json.Marshal(grafana.Replace(e))
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}
