package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/examples/formatapp"
)

const installDescriptor = `{"identifier":"demo-app","modules":{
  "custom-file-format":[{"key":"kv","type":"kv","url":"/file-format"}],
  "file-pre-export":[{"key":"kv-pre","url":"/pre-export"}],
  "webhook":[{"key":"hook-a","url":"/hooks/a","events":["project.translated","project.approved"]},
             {"key":"hook-b","url":"/hooks/b","events":["file.added"]}]}}`

// TestInstallationDrivesTheApp runs every declared module of a descriptor
// against the format app and a webhook receiver that checks signatures
// with crypto/hmac on its own.
func TestInstallationDrivesTheApp(t *testing.T) {
	d, err := descriptor.Parse("test", []byte(installDescriptor))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hooks := map[string][]string{} // path → events received
	formats := formatapp.Handler()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/hooks/") {
			formats.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mac := hmac.New(sha256.New, []byte("app-secret"))
		mac.Write(body)
		if r.Header.Get("X-Service-Signature") != hex.EncodeToString(mac.Sum(nil)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("X-Service-Domain") != "acme.example" || r.Header.Get("X-Service-Id") != "42" {
			http.Error(w, "bad organization", http.StatusBadRequest)
			return
		}
		var delivery struct {
			Events []struct {
				Event string `json:"event"`
			} `json:"events"`
		}
		if json.Unmarshal(body, &delivery) != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range delivery.Events {
			hooks[r.URL.Path+" "+r.Header.Get("X-Module-Key")] = append(hooks[r.URL.Path+" "+r.Header.Get("X-Module-Key")], e.Event)
		}
	}))
	defer app.Close()

	in := &Installation{Descriptor: d, AppURL: app.URL + "/", AppSecret: "app-secret", OrganizationID: 42, Domain: "acme.example"}
	events := in.SendEvents(context.Background())
	if len(events) != 2 || !events[0].OK() || !events[1].OK() {
		t.Fatalf("deliveries: %+v", events)
	}
	if got := strings.Join(hooks["/hooks/a hook-a"], ","); got != "project.translated,project.approved" {
		t.Errorf("hook a got %q", got)
	}
	if got := strings.Join(hooks["/hooks/b hook-b"], ","); got != "file.added" {
		t.Errorf("hook b got %q", got)
	}

	calls := in.SendJobs(context.Background(), "demo.kv", []byte("greeting = Hello\nfarewell = Bye\n"))
	var jobs []string
	for _, c := range calls {
		jobs = append(jobs, c.Key+":"+c.Job)
		if !c.OK() {
			t.Errorf("%s %s: %d %s %v", c.Key, c.Job, c.Status, c.Body, c.Err)
		}
	}
	if strings.Join(jobs, " ") != "kv:parse-file kv:build-file kv-pre:file-pre-export" {
		t.Errorf("jobs sent: %v", jobs)
	}
	// The build-file answer carries the translated file.
	var built struct {
		Data struct {
			Content string `json:"content"`
		} `json:"data"`
	}
	if err := json.Unmarshal(calls[1].Body, &built); err != nil || built.Data.Content == "" {
		t.Errorf("build-file answer %s: %v", calls[1].Body, err)
	}
	// The pre-export answer keeps both strings with their uniqIds.
	var pre struct {
		Data struct {
			Strings []struct {
				UniqID string `json:"uniqId"`
			} `json:"strings"`
		} `json:"data"`
	}
	if err := json.Unmarshal(calls[2].Body, &pre); err != nil || len(pre.Data.Strings) != 2 ||
		!strings.HasSuffix(pre.Data.Strings[1].UniqID, "::2") {
		t.Errorf("pre-export answer %s: %v", calls[2].Body, err)
	}
}

func TestInstallationReportsUnreachableApp(t *testing.T) {
	d, _ := descriptor.Parse("test", []byte(installDescriptor))
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there any more
	in := &Installation{Descriptor: d, AppURL: srv.URL, AppSecret: "s", Domain: "a"}
	for _, c := range append(in.SendEvents(context.Background()), in.SendJobs(context.Background(), "f.kv", []byte("a = b"))...) {
		if c.OK() || c.Err == nil {
			t.Errorf("%s %s against a closed port: %+v", c.Key, c.Job, c)
		}
	}
}
