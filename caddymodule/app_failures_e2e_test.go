package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/servicegate/servicegate/emulator"
)

// failuresDescriptor is an app whose file modules fail in their own ways.
const failuresDescriptor = `{
  "identifier": "failing-app",
  "modules": {
    "custom-file-format": [
      {"key": "kv-crash", "type": "kv", "url": "/file-format/crash"},
      {"key": "kv-declines", "type": "kv", "url": "/file-format/declines"},
      {"key": "kv-garbage", "type": "kv", "url": "/file-format/garbage"},
      {"key": "kv-late", "type": "kv", "url": "/file-format/late"},
      {"key": "kv-switches", "type": "kv", "url": "/file-format/switches"}
    ]
  }
}`

// failingApp is the app of failuresDescriptor: a crash with a traceback
// (500), a refusal in its own words (422 with error.message), a 2xx that is
// not JSON, a module that answers only once its request is cancelled, and
// one that answers 101 to a plain POST.
func failingApp(t *testing.T) *httptest.Server {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/file-format/crash":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "Traceback (most recent call last):\n  File \"app.py\", line 7, in parse\nKeyError: 'secret-of-the-app'\n")
		case "/file-format/declines":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"error":{"message":"The file has no key = value lines."}}`)
		case "/file-format/garbage":
			io.WriteString(w, "<html>ok</html>")
		case "/file-format/late":
			<-r.Context().Done() // the gateway gives up first
		case "/file-format/switches":
			// 101 to a plain POST, and nothing more.
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
			_ = buf.Flush()
			conn.Close()
		}
	}))
	t.Cleanup(app.Close)
	return app
}

// readLogLines is the JSON lines of Caddy's log file at path.
func readLogLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestServiceAppAppFailureNamedByStatusE2E: behind service_app, a job the
// app answers 500 without error.message reaches the service as 502 naming
// the status, with none of the app's body, and Caddy logs the same at WARN
// with the module and the status; an app's own error.message passes with
// its status; a 2xx that is not JSON is still a contract breach; a late
// app's 504 names the module's own timeout as the limit.
func TestServiceAppAppFailureNamedByStatusE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	app := failingApp(t)
	dir := t.TempDir()
	desc, logFile := filepath.Join(dir, "manifest.json"), filepath.Join(dir, "caddy.log")
	if err := os.WriteFile(desc, []byte(failuresDescriptor), 0o600); err != nil {
		t.Fatal(err)
	}
	global := strings.TrimSuffix(e2eGlobal(), "}\n") + fmt.Sprintf("\tlog {\n\t\toutput file %s\n\t}\n}\n", logFile)
	site := fmt.Sprintf(`
http://localhost:%d {
	service_app {
		descriptor %s
		client_id demo-client
		client_secret demo-client-secret
		limits kv-late {
			timeout 1s
		}
	}
	reverse_proxy %s
}
`, e2eHTTPPort, desc, strings.TrimPrefix(app.URL, "http://"))
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: e2eAdminPort})
	loadCaddyfile(tester, global+site)

	client := &http.Client{Timeout: 30 * time.Second}
	job := formatJob("parse-file", map[string]any{"file": map[string]any{"id": 1, "name": "a.kv", "content": b64([]byte("greeting = Hello\n"))}})
	for _, c := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/file-format/crash", http.StatusBadGateway, "The app failed to process the file: it answered 500."},
		{"/file-format/declines", http.StatusUnprocessableEntity, "The file has no key = value lines."},
		{"/file-format/garbage", http.StatusBadGateway, "The app's answer to a parse-file job breaks the service's contract: it is not a JSON object. Contact the app's developer."},
		{"/file-format/switches", http.StatusBadGateway, "The app failed to process the file: it answered 101."},
		{"/file-format/late", http.StatusGatewayTimeout, "The app did not answer within 1 second, the `timeout` of this module. Try again later or with a smaller file; if it keeps happening, contact the app's developer."},
	} {
		resp, body := request(t, client, "POST", c.path, map[string]string{"Content-Type": "application/json"}, job)
		var out errorBody
		if resp.StatusCode != c.status || json.Unmarshal([]byte(body), &out) != nil || out.Error.Message != c.msg {
			t.Errorf("%s: %d %s, want %d with message %q", c.path, resp.StatusCode, body, c.status, c.msg)
		}
		if strings.Contains(body, "Traceback") || strings.Contains(body, "secret-of-the-app") {
			t.Errorf("%s: the app's body reached the service: %s", c.path, body)
		}
	}

	var warned bool
	for _, l := range readLogLines(t, logFile) {
		if l["msg"] == "The app failed to process the file: it answered 500." {
			warned = l["level"] == "warn" && l["status"] == float64(500) && l["module"] == "custom-file-format" &&
				l["path"] == "/file-format/crash" && l["job_type"] == "parse-file"
			if !warned {
				t.Errorf("the log line of the crash is %v, want level warn, status 500, module custom-file-format, its path and job type", l)
			}
		}
		if raw, _ := json.Marshal(l); strings.Contains(string(raw), "Traceback") || strings.Contains(string(raw), "secret-of-the-app") {
			t.Errorf("the app's body reached the log: %s", raw)
		}
	}
	if !warned {
		t.Error("no log line says the app failed to process the file")
	}
}

// TestServiceAppTokenEndpointAnsweredE2E: when the service's token
// endpoint answers 500 to the gateway's question about an installed call,
// the service is told that it answered 500, not that it could not be
// reached; once it is down for good, that it could not be reached.
func TestServiceAppTokenEndpointAnsweredE2E(t *testing.T) {
	svc, service := newInstallationsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, installationsSite(t, service, app.URL))
	ctx := context.Background()

	if err := svc.SetFaults(emulator.Faults{Token: &emulator.Fault{Status: http.StatusInternalServerError}}); err != nil {
		t.Fatal(err)
	}
	call, err := svc.InstallApp(ctx, nil, e2eURL("/installed"), "acme.example", service)
	want := "The service answered 500 when asked to confirm this installation; try again later."
	var out errorBody
	if err != nil || call.Status != http.StatusServiceUnavailable || json.Unmarshal(call.Body, &out) != nil || out.Error.Message != want {
		t.Errorf("installed with the token endpoint at 500: %d %s %v, want 503 with message %q", call.Status, call.Body, err, want)
	}
	if n := app.count("/installed"); n != 0 {
		t.Errorf("the app was told of an installation the service did not confirm (%d calls)", n)
	}

	if err := svc.SetFaults(emulator.Faults{Token: &emulator.Fault{Outage: true}}); err != nil {
		t.Fatal(err)
	}
	call, err = svc.InstallApp(ctx, nil, e2eURL("/installed"), "acme.example", service)
	want = "The service could not be reached to confirm this installation; try again later."
	out = errorBody{}
	if err != nil || call.Status != http.StatusServiceUnavailable || json.Unmarshal(call.Body, &out) != nil || out.Error.Message != want {
		t.Errorf("installed with the token endpoint down: %d %s %v, want 503 with message %q", call.Status, call.Body, err, want)
	}
}
