package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.yaml.in/yaml/v3"

	"github.com/servicegate/servicegate/cli"
	"github.com/servicegate/servicegate/cli/conformance"
)

// demoAppBinary builds examples/demoapp once per test binary.
var demoAppBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "servicegate-demoapp-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "demoapp")
	out, err := exec.Command("go", "build", "-o", bin, "../examples/demoapp").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// startDemoApp runs the demo app (examples/demoapp) on a free loopback
// port, answering requests for the test Caddy's site, and returns its
// address.
func startDemoApp(t testing.TB) string {
	t.Helper()
	bin, err := demoAppBinary()
	if err != nil {
		t.Fatalf("building the demo app: %v", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort())
	cmd := exec.Command(bin, "-listen", addr, "-gateway-hosts", "localhost:"+strconv.Itoa(e2eHTTPPort))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Started, it listens: wait for the descriptor, the way run-demo.sh does.
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if i == 200 {
			t.Fatalf("the demo app does not listen on %s: %v", addr, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// demoSites are Caddyfile.example's sites on the test Caddy's port: the
// emulator at 127.0.0.1, the gateway in front of the demo app at
// localhost, with the slow module cut off after slow.
func demoSites(app, slow string) string {
	return `
http://:{port} {
	service_emulator {
		client_id demo-client
		client_secret demo-client-secret
		redirect_uri http://localhost:{port}/oauth/callback
		app_identifier demo-app
		organization acme.example {
			id 1
			active_until "2099-12-31 23:59:59"
		}
` + uniqueConsole() + `
	}
}

http://localhost:{port} {
	service_app {
		descriptor ` + app + `/manifest.json
		client_id demo-client
		client_secret demo-client-secret
		app_secret demo-app-secret
		service http://127.0.0.1:{port}
		subscription
		installations {
			key "` + testInstallationsKey + `"
		}
		sign_in {
			cookie_secure off
		}
		auth {
			issuer service-emulator
		}
		limits kv-format-slow {
			timeout ` + slow + `
		}
	}
	reverse_proxy ` + strings.TrimPrefix(app, "http://") + `
}
`
}

// demoConformance are the options of a run on the demo behind the test
// Caddy, with the demo's sample file for every file format.
func demoConformance() conformance.Options {
	sample := "../examples/demoapp/samples/strings.kv"
	return conformance.Options{
		App: e2eBase(), Secret: cli.DemoAppSecret, Timeout: 20 * time.Second,
		Files:    []string{sample, "kv-format-*=" + sample},
		Emulator: "http://127.0.0.1:" + strconv.Itoa(e2eHTTPPort), Domain: cli.DemoDomain, OrganizationID: 1,
	}
}

// demoFailures are the cases the demo's deliberate defects break, behind
// its gateway: the buggy format lists every string twice (the gateway
// refuses its answers, 502), so each of its parse-file cases fails and
// its build-file cases, which need its strings, are skipped; the slow
// one is cut off by the gateway (504) on every parse-file case; the huge
// one answers the same 6 MiB of strings whatever the file (the gateway
// hands them over by URL, which the run fetches, and the run sends them
// back by URL), so the file it builds with translations does not parse
// back to them.
var demoFailures = func() []string {
	var ids []string
	for _, key := range []string{"kv-format-buggy", "kv-format-slow"} {
		for _, c := range []string{"content", "content-url", "translation-content", "translation-content-url", "empty", "bom", "crlf", "repeated"} {
			ids = append(ids, "custom-file-format/"+key+"/parse-file/"+c)
		}
	}
	return append(ids, "custom-file-format/kv-format-huge/build-file/round-trip-translations")
}()

// TestConformanceDemoE2E runs caddy service-app conformance on the demo
// app behind its gateway (Caddyfile.example's shape): exactly the cases
// of the buggy, slow and huge formats fail, each with its reason, and
// every other module passes, the lifecycle calls made through the
// emulator.
func TestConformanceDemoE2E(t *testing.T) {
	app := startDemoApp(t)
	startCaddy(t, demoSites(app, "2s"))
	out := filepath.Join(t.TempDir(), "report", "conformance.json")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := conformance.Main(context.Background(), conformance.Command{Options: demoConformance(), Format: "json", Output: out}, &stdout, &stderr)
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d, no report: %v\n%s", code, err, stderr.String())
	}
	var rep conformance.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	var failed, skipped []string
	for _, c := range rep.Cases {
		switch c.Status {
		case conformance.Failed:
			failed = append(failed, c.ID)
			t.Logf("%s: %s", c.ID, c.Reason)
		case conformance.Skipped:
			skipped = append(skipped, c.ID)
		}
	}
	if code != conformance.ExitFailed {
		t.Errorf("exit status %d, want 1; stderr: %s", code, stderr.String())
	}
	if !slices.Equal(failed, demoFailures) {
		t.Errorf("failed:\n%s\nwant:\n%s", strings.Join(failed, "\n"), strings.Join(demoFailures, "\n"))
	}
	var wantSkipped []string
	for _, key := range []string{"kv-format-buggy", "kv-format-slow"} {
		for _, c := range []string{"strings", "strings-url", "round-trip-translations", "round-trip-source"} {
			wantSkipped = append(wantSkipped, "custom-file-format/"+key+"/build-file/"+c)
		}
	}
	if !slices.Equal(skipped, wantSkipped) {
		t.Errorf("skipped:\n%s\nwant:\n%s", strings.Join(skipped, "\n"), strings.Join(wantSkipped, "\n"))
	}
	reasons := map[string]string{}
	for _, c := range rep.Cases {
		reasons[c.ID] = c.Reason
		if c.Status == conformance.Failed {
			curl, _, _ := strings.Cut(c.Curl, "  #")
			file := strings.Fields(curl[strings.Index(curl, "--data-binary @")+len("--data-binary @"):])[0]
			if _, err := os.Stat(filepath.Join(filepath.Dir(out), strings.Trim(file, "'"))); err != nil {
				t.Errorf("%s: the curl's file %s is not next to the report: %v", c.ID, file, err)
			}
		}
	}
	for id, want := range map[string]string{
		"custom-file-format/kv-format-buggy/parse-file/content":                `answered 502 with the message: The app's answer to a parse-file job breaks the service's contract: string "greeting" (number 2) has the identifier of an earlier string`,
		"custom-file-format/kv-format-slow/parse-file/content":                 "answered 504",
		"custom-file-format/kv-format-huge/build-file/round-trip-translations": `string "key0" was built with the translation "uk: AAAA`,
	} {
		if !strings.HasPrefix(reasons[id], want) {
			t.Errorf("%s: reason %q, want it to start %q", id, reasons[id], want)
		}
	}
	if rep.Summary.Failed != len(demoFailures) || rep.Summary.Skipped != len(wantSkipped) ||
		rep.Summary.Passed != len(rep.Cases)-len(demoFailures)-len(wantSkipped) {
		t.Errorf("summary %+v of %d cases", rep.Summary, len(rep.Cases))
	}
	if !strings.Contains(stdout.String(), "the report is in "+out) {
		t.Errorf("stdout: %s", stdout.String())
	}
}

// BenchmarkConformanceDemo is the whole run on the demo behind its
// gateway, as Caddyfile.example configures it (the slow module cut off
// after 5 seconds) and the README runs it: the target is under 30 s.
//
//	go test -run '^$' -bench BenchmarkConformanceDemo -benchtime 1x ./caddymodule
func BenchmarkConformanceDemo(b *testing.B) {
	app := startDemoApp(b)
	cfg, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt(
		[]byte(e2eGlobal()+strings.ReplaceAll(demoSites(app, "5s"), "{port}", strconv.Itoa(e2eHTTPPort))), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = caddy.Stop() })
	o := demoConformance()
	o.Timeout = 2 * time.Minute
	for b.Loop() {
		rep, err := conformance.Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Summary.Failed != len(demoFailures) {
			b.Fatalf("%+v", rep.Summary)
		}
	}
}

// TestCIExamplesRunConformance: the CI files of examples/ci are YAML and
// run caddy service-app conformance with flags it takes, as JUnit.
func TestCIExamplesRunConformance(t *testing.T) {
	for _, name := range []string{"github-actions.yml", "gitlab-ci.yml"} {
		raw, err := os.ReadFile(filepath.Join("..", "examples", "ci", name))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s is not YAML: %v", name, err)
		}
		_, line, ok := strings.Cut(string(raw), "./caddy service-app conformance ")
		if !ok {
			t.Fatalf("%s does not run caddy service-app conformance", name)
		}
		line, _, _ = strings.Cut(line, "\n")
		fl := parsedFlags(t, serviceAppConformanceFlags(), strings.Fields(line)...)
		c, err := conformanceOptions(fl)
		if err != nil || c.Format != "junit" || c.Output == "" {
			t.Errorf("%s: %+v %v", name, c, err)
		}
	}
}

// TestConformanceConsoleE2E: the console's Conformance section (POST
// /emulator/api/conformance) runs the same cases through the gateway
// against the demo app, streaming them as they end, and each case's calls
// show in the console's log.
func TestConformanceConsoleE2E(t *testing.T) {
	app := startDemoApp(t)
	startCaddy(t, demoSites(app, "2s"))
	sample, err := os.ReadFile("../examples/demoapp/samples/strings.kv")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"organization": "acme.example", "secret": cli.DemoAppSecret, "timeout": "20s",
		"files": []map[string]any{{"module": "kv-format", "name": "strings.kv", "content": sample}}})
	resp, err := http.Post(emulatorAPI("conformance"), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var cases []conformance.Result
	var report *conformance.Report
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Case   *conformance.Result
			Report *conformance.Report
			Error  *string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		switch {
		case line.Case != nil:
			if report != nil {
				t.Errorf("a case after the report: %+v", line.Case)
			}
			cases = append(cases, *line.Case)
		case line.Report != nil:
			report = line.Report
		default:
			t.Fatalf("the run failed: %v", *line.Error)
		}
	}
	if report == nil || len(cases) != len(report.Cases) || report.Summary.Failed != 0 || report.Summary.Passed != 21 {
		t.Fatalf("%d cases streamed, report %+v", len(cases), report)
	}
	for _, c := range cases {
		if c.Status == conformance.Skipped && c.Module == "kv-format" {
			t.Errorf("%s skipped: %s", c.ID, c.Reason)
		}
	}
	var calls []consoleItem
	consoleCall(t, "GET", "calls?organization=acme.example", "", &calls)
	kinds := map[string]int{}
	for _, c := range calls {
		kinds[c.Kind]++
	}
	for _, k := range []string{"parse-file", "build-file", "file-pre-export", "delivery", "installed", "subscription_paid", "uninstall"} {
		if kinds[k] == 0 {
			t.Errorf("no %s call in the log: %v", k, kinds)
		}
	}
}

// TestConformanceCommandExitCodes: caddy service-app conformance, run as
// the binary runs it, exits 0 when every case passed, 1 when one failed,
// 2 when the run could not start, with one plain line on stderr then.
func TestConformanceCommandExitCodes(t *testing.T) {
	app := httptest.NewServer(&webhookApp{secret: cli.DemoAppSecret, status: http.StatusOK})
	defer app.Close()
	desc := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(desc, []byte(`{"modules":{"webhook":[{"key":"events-hook","url":"/webhooks","events":["project.translated"]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"service-app", "conformance", "--app", app.URL, "--descriptor", desc}
	report := filepath.Join(t.TempDir(), "report.xml")
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"passed", base, 0, ": 2 passed, 0 failed, 0 skipped in ", ""},
		{"list", append(base, "--list"), 0, "webhook/events-hook/delivery/project.translated\nwebhook/events-hook/delivery/bulk\n", ""},
		{"failed", append(base, "--secret", "not-the-apps", "--format", "junit", "--output", report), 1, ": 0 passed, 2 failed, 0 skipped in ", ""},
		{"no app", []string{"service-app", "conformance"}, 2, "", "caddy service-app conformance: --app is required"},
		{"bad timeout", append(base, "--timeout", "soon"), 2, "", `caddy service-app conformance: --timeout "soon" is not a positive duration`},
		{"bad format", append(base, "--format", "yaml"), 2, "", `caddy service-app conformance: --format "yaml" is not one of text, json, junit, markdown`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.HasPrefix(stderr, tt.stderr) ||
				(tt.stderr == "") != (stderr == "") || strings.Count(stderr, "\n") > 1 {
				t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
			}
		})
	}
	raw, err := os.ReadFile(report)
	if err != nil || !strings.Contains(string(raw), `<failure message="answered 401, not 2xx`) {
		t.Errorf("the JUnit report: %v\n%s", err, raw)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(report), conformance.FilesDir, "webhook.events-hook.delivery.bulk.json")); err != nil {
		t.Errorf("the failure's request is not next to the report: %v", err)
	}
}

// TestConformanceSignsWithInstallationSecretE2E: through the gateway, with
// acme.example installed in the emulator (the gateway then verifies its
// deliveries with the installation's secret only), a run given no secret
// signs its deliveries with that secret and its webhook cases pass; a run
// that signs with the demo's secret, as --secret does, is refused 401,
// and says which secret it signed with. Once the app is uninstalled, the
// run signs with the default secret again, which the gateway takes.
func TestConformanceSignsWithInstallationSecretE2E(t *testing.T) {
	app := startDemoApp(t)
	startCaddy(t, demoSites(app, "2s"))
	if code := consoleCall(t, "POST", "organizations/acme.example/install", "", nil); code != http.StatusOK {
		t.Fatalf("install: %d", code)
	}
	run := func(installationSecret bool) *conformance.Report {
		t.Helper()
		o := demoConformance()
		o.Only, o.InstallationSecret = "webhook/*/*/*", installationSecret
		rep, err := conformance.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Cases) != 3 {
			t.Fatalf("%d webhook cases, want 3", len(rep.Cases))
		}
		return rep
	}
	if rep := run(true); rep.Summary.Passed != 3 {
		t.Errorf("signed with the installation's secret: %+v, reasons %q", rep.Summary, reasonsOf(rep))
	}
	rep := run(false)
	if rep.Summary.Failed != 3 {
		t.Errorf("signed with --secret: %+v, want every case failed", rep.Summary)
	}
	for _, c := range rep.Cases {
		if c.Answer == nil || c.Answer.Status != http.StatusUnauthorized || !strings.Contains(c.Reason, "the secret of --secret") {
			t.Errorf("%s: %+v %q, want 401 with the secret named", c.ID, c.Answer, c.Reason)
		}
	}
	if code := consoleCall(t, "POST", "organizations/acme.example/uninstall", "", nil); code != http.StatusOK {
		t.Fatalf("uninstall: %d", code)
	}
	if rep := run(true); rep.Summary.Passed != 3 {
		t.Errorf("not installed, signed with the default secret: %+v, reasons %q", rep.Summary, reasonsOf(rep))
	}
}

func reasonsOf(rep *conformance.Report) []string {
	var rs []string
	for _, c := range rep.Cases {
		rs = append(rs, c.Reason)
	}
	return rs
}
