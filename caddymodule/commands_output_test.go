package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/emulator"
)

// runCommand runs "caddy <args…>" in a child process, the test binary
// run as Caddy itself (envRunCaddy), and returns its exit code, stdout and
// stderr.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envRunCaddy+"=1", "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestCommandsWritePlainText: the subcommands write what they did as
// plain text on stdout and an error as one plain line on stderr, never
// as a log entry, and exit non-zero when a call was refused.
func TestCommandsWritePlainText(t *testing.T) {
	app := httptest.NewServer(&webhookApp{secret: "demo-app-secret", status: http.StatusOK})
	defer app.Close()
	desc := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(desc, []byte(`{"modules":{"webhook":[{"key":"events-hook","url":"/webhooks","events":["project.translated"]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	slip := filepath.Join(t.TempDir(), "slip.json")
	if err := os.WriteFile(slip, []byte(`{"modules":{"webhok":[{"key":"events-hook","url":"/webhooks","events":["project.translated"]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// send goes through the emulator.
	svc, err := emulator.New(emulator.Config{ClientID: "demo-client", ClientSecret: "demo-client-secret", RedirectURIs: []string{app.URL + "/oauth/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	service := httptest.NewServer(svc)
	defer service.Close()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // a line it holds
		stderr string // all of it
	}{
		{"tampered delivery", []string{"service-webhook", "--url", app.URL, "--tamper"}, 1,
			"401 Unauthorized\n{\"error\":{\"message\":\"bad signature\"}}\n", ""},
		{"delivery accepted", []string{"service-webhook", "--url", app.URL}, 0, "200 OK\n", ""},
		{"unreachable", []string{"service-webhook", "--url", "http://127.0.0.1:1/", "--timeout", "2s"}, 1, "", "caddy service-webhook: "},
		{"send summary", []string{"service-app", "send", "--descriptor", desc, "--app", app.URL, "--emulator", service.URL}, 0,
			"all 1 calls were answered 2xx\n", ""},
		{"send refused", []string{"service-app", "send", "--descriptor", desc, "--app", app.URL, "--emulator", service.URL, "--secret", "other"}, 1,
			"1 of 1 calls were not answered 2xx\n", ""},
		{"send without emulator", []string{"service-app", "send", "--descriptor", desc, "--app", app.URL, "--emulator", "http://127.0.0.1:1"}, 1,
			"", "caddy service-app send: asking the emulator at http://127.0.0.1:1"},
		{"send without app", []string{"service-app", "send", "--descriptor", desc}, 1, "", "caddy service-app send: --descriptor and --app are required\n"},
		{"check names a near miss", []string{"service-app", "check", slip}, 1,
			`  likely defect: modules.webhok is not a module kind servicegate routes; did you mean "webhook"?`, ""},
		{"check without descriptor", []string{"service-app", "check", desc + ".absent"}, 1, "", "caddy service-app check: reading the app descriptor"},
		{"lifecycle call without emulator", []string{"service-app", "install", "--app", app.URL, "--descriptor", desc, "--emulator", "http://127.0.0.1:1", "--timeout", "2s"}, 1, "", "caddy service-app install: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.HasPrefix(stderr, tt.stderr) ||
				(tt.stderr == "") != (stderr == "") || strings.Count(stderr, "\n") > 1 {
				t.Fatalf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
			}
			for _, out := range []string{stdout, stderr} {
				if strings.Contains(out, `"level"`) || strings.Contains(out, `"ts"`) {
					t.Fatalf("a log entry instead of plain text: %q", out)
				}
			}
		})
	}
}

// TestServiceWebhookFromDescriptor: with --descriptor the delivery carries
// the key and every event of the declared webhook module; a descriptor
// with several needs --module-key, and a key it does not declare is named.
func TestServiceWebhookFromDescriptor(t *testing.T) {
	app := &webhookApp{secret: "demo-app-secret", status: http.StatusOK}
	srv := httptest.NewServer(app)
	defer srv.Close()
	dir := t.TempDir()
	one := filepath.Join(dir, "one.json")
	two := filepath.Join(dir, "two.json")
	os.WriteFile(one, []byte(`{"modules":{"webhook":[{"key":"hook-a","url":"/a","events":["file.added","project.approved"]}]}}`), 0o600)
	os.WriteFile(two, []byte(`{"modules":{"webhook":[{"key":"hook-a","url":"/a","events":["file.added"]},{"key":"hook-b","url":"/b","events":["task.added"]}]}}`), 0o600)

	run := func(args ...string) (int, string, error) {
		var out bytes.Buffer
		code, err := runServiceWebhook(parsedFlags(t, serviceWebhookFlags(), append([]string{"--url", srv.URL}, args...)...), &out)
		return code, out.String(), err
	}
	events := func() []string {
		var b struct {
			Events []struct{ Event string } `json:"events"`
		}
		if err := json.Unmarshal(app.body, &b); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range b.Events {
			names = append(names, e.Event)
		}
		return names
	}

	if code, out, err := run("--descriptor", one); code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if got := app.headers.Get("X-Module-Key"); got != "hook-a" {
		t.Errorf("X-Module-Key %q, want the descriptor's hook-a", got)
	}
	if got := strings.Join(events(), " "); got != "file.added project.approved" {
		t.Errorf("events %q, want the module's", got)
	}
	if code, _, err := run("--descriptor", two, "--module-key", "hook-b", "--event", "task.deleted"); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	if got := strings.Join(events(), " "); app.headers.Get("X-Module-Key") != "hook-b" || got != "task.deleted" {
		t.Errorf("key %q, events %q, want hook-b and the --event given", app.headers.Get("X-Module-Key"), got)
	}
	for args, want := range map[[2]string]string{
		{two, ""}:     `declares the webhook modules "hook-a", "hook-b": choose one with --module-key`,
		{two, "nope"}: `declares no webhook module "nope"; it declares "hook-a", "hook-b"`,
	} {
		a := []string{"--descriptor", args[0]}
		if args[1] != "" {
			a = append(a, "--module-key", args[1])
		}
		if code, _, err := run(a...); code == 0 || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: exit %d, %v; want %q", a, code, err, want)
		}
	}
}

// TestServiceAppCheckListsOtherModules: modules of kinds service_app only
// routes behind the token (pages of the app's UI) are listed too.
func TestServiceAppCheckListsOtherModules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	doc := `{"modules":{"webhook":[{"key":"w","url":"/w","events":["e"]}],"project-menu":[{"key":"menu","url":"/menu"}],"organization-menu":[{"key":"org","url":"/org"}]}}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code, err := runServiceAppCheck(path, &out); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	for _, want := range []string{
		"1 webhook modules, 2 other (organization-menu, project-menu)",
		"  project-menu       menu                 /menu  (token, like every other path)\n",
		"  organization-menu  org                  /org  (token, like every other path)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoSecretHintOnlyForSignatures: the hint to pass --secret follows a
// 401 to a delivery signed with the demo secret, not a 401 that asks for a
// token (a URL that is not a webhook route), nor one with --secret given.
func TestDemoSecretHintOnlyForSignatures(t *testing.T) {
	signatureRefused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"The signature of the delivery does not match its body."}}`, http.StatusUnauthorized)
	}))
	defer signatureRefused.Close()
	tokenAsked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="service"`)
		http.Error(w, `{"error":{"message":"Sign in to use this app: the request carries no access token."}}`, http.StatusUnauthorized)
	}))
	defer tokenAsked.Close()
	const hint = "Pass the app's secret with --secret-env NAME (or --secret)."
	for _, tt := range []struct {
		url  string
		args []string
		hint bool
	}{
		{signatureRefused.URL, nil, true},
		{signatureRefused.URL, []string{"--secret", "mine"}, false},
		{tokenAsked.URL, nil, false},
	} {
		var out bytes.Buffer
		code, err := runServiceWebhook(parsedFlags(t, serviceWebhookFlags(), append([]string{"--url", tt.url}, tt.args...)...), &out)
		if code == 0 || err != nil || strings.Contains(out.String(), hint) != tt.hint {
			t.Errorf("%s %v: exit %d, %v, hint %v:\n%s", tt.url, tt.args, code, err, tt.hint, out.String())
		}
	}
}
