package caddymodule

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// appSideDetail is a call's detail with the app's side of it.
type appSideDetail struct {
	Status  int `json:"status"`
	Gateway struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
	} `json:"gateway"`
	Answer struct {
		Body string `json:"body"`
	} `json:"answer"`
	App *struct {
		Request struct {
			Method  string              `json:"method"`
			URL     string              `json:"url"`
			Headers map[string][]string `json:"headers"`
			Body    string              `json:"body"`
			Size    int64               `json:"size"`
		} `json:"request"`
		Answer struct {
			Status  int                 `json:"status"`
			Headers map[string][]string `json:"headers"`
			Body    string              `json:"body"`
			Size    int64               `json:"size"`
			Cut     bool                `json:"cut"`
			Error   string              `json:"error"`
		} `json:"answer"`
	} `json:"app"`
}

// traceback is what the failing app of these tests answers a parse-file
// job with.
const traceback = "Traceback (most recent call last):\n  File \"app.py\", line 12, in parse\nKeyError: 'content'\n"

// newFailingApp is an app whose file module fails: a file named crash.kv
// gets a 500 with a traceback, slow.kv no answer until the gateway gives
// up, big.kv a 200 of 100 KiB that is no JSON object; every other path
// answers 200.
func newFailingApp(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path != "/file-format":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		case strings.Contains(string(body), "slow"):
			<-r.Context().Done() // the gateway gives up and cancels the call
		case strings.Contains(string(body), "big"):
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, strings.Repeat("x", 100<<10))
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-App-Trace", "on")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, traceback)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fileCall uploads a file through the console, as the page does, and
// returns the detail of its parse-file call.
func fileCall(t *testing.T, name, content string) appSideDetail {
	t.Helper()
	var up struct {
		Call *consoleItem `json:"call"`
	}
	if code := consoleCall(t, "POST", "files?organization=acme.example&name="+name, content, &up); code != 200 || up.Call == nil {
		t.Fatalf("upload %s: %d %+v", name, code, up)
	}
	var d appSideDetail
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(up.Call.ID, 10), "", &d)
	return d
}

// TestEmulatorConsoleAppSideOfRefusedCalls: with the gateway in the
// emulator's process, a call's detail holds what the app received (the
// gateway's request, its app token masked) and what it answered, even when
// the gateway refused that answer: a 500 with a traceback, no answer
// before the module's timeout, an answer that is no JSON object and is cut
// at 64 KiB in the console.
func TestEmulatorConsoleAppSideOfRefusedCalls(t *testing.T) {
	app := newFailingApp(t)
	sites := strings.Replace(consoleSites(t, app.URL, ""), "\t\tinstallations {", "\t\tlimits {\n\t\t\ttimeout 1s\n\t\t}\n\t\tinstallations {", 1)
	startCaddy(t, sites)
	var installed struct {
		Call *consoleItem `json:"call"`
	}
	if code := consoleCall(t, "POST", "organizations/acme.example/install", "", &installed); code != 200 || installed.Call.Status != 200 {
		t.Fatalf("install: %d %+v", code, installed.Call)
	}

	d := fileCall(t, "crash.kv", "greeting = Hello\n")
	if d.Status != 502 || d.Gateway.Outcome != "refused" || d.App == nil {
		t.Fatalf("the crashing job: %+v", d)
	}
	a := d.App
	if a.Answer.Status != 500 || a.Answer.Body != traceback || a.Answer.Size != int64(len(traceback)) || a.Answer.Cut ||
		len(a.Answer.Headers["X-App-Trace"]) != 1 || strings.Contains(d.Answer.Body, "Traceback") {
		t.Fatalf("the app's answer of the crashing job: %+v; the service got %s", a.Answer, d.Answer.Body)
	}
	if a.Request.Method != "POST" || a.Request.URL != "/file-format" || !strings.Contains(a.Request.Body, `"jobType"`) ||
		a.Request.Size == 0 {
		t.Fatalf("what the app received of the crashing job: %+v", a.Request)
	}

	// The installed call: the app received the gateway's body (its event,
	// no app secret) and the app token it added, masked.
	var in appSideDetail
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(installed.Call.ID, 10), "", &in)
	if in.App == nil || in.App.Answer.Status != 200 || !strings.Contains(in.App.Request.Body, `"event": "installed"`) ||
		strings.Contains(in.App.Request.Body, "appSecret") {
		t.Fatalf("the installed call's app side: %+v", in.App)
	}
	if tok := in.App.Request.Headers["X-Service-App-Token"]; len(tok) != 1 || !strings.HasPrefix(tok[0], "••••") || len([]rune(tok[0])) > 8 {
		t.Fatalf("the app token the app received, as the console shows it: %q in %v", tok, in.App.Request.Headers)
	}

	d = fileCall(t, "slow.kv", "slow = Hello\n")
	if d.Status != 504 || d.App == nil || d.App.Answer.Status != 0 || !strings.Contains(d.App.Answer.Error, "time limit") ||
		d.App.Request.Size == 0 {
		t.Fatalf("the late job: %d %+v", d.Status, d.App)
	}

	d = fileCall(t, "big.kv", "big = Hello\n")
	if d.Status != 502 || d.App == nil || d.App.Answer.Status != 200 || !d.App.Answer.Cut || d.App.Answer.Size != 100<<10 ||
		len(d.App.Answer.Body) != 64<<10 {
		t.Fatalf("the large answer: %d %+v", d.Status, d.App.Answer.Size)
	}

	// A call the gateway refuses before the app: no app side.
	var refused struct {
		ID int64 `json:"id"`
	}
	consoleCall(t, "POST", "deliveries", `{"organization":"acme.example","event":"project.translated","tamper":"wrong_secret"}`, &refused)
	var r appSideDetail
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(refused.ID, 10), "", &r)
	if r.Status != 401 || r.App != nil {
		t.Fatalf("a delivery refused by the gateway: %d %+v", r.Status, r.App)
	}
}
