package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineApp is a small app written to keep the whole contract: a
// custom-file-format module of "key=value" lines (strings answered by
// stringsUrl, files by contentUrl, a preview by previewUrl), a
// file-pre-export module that keeps every string, a webhook and the
// lifecycle events. broken names a part to break.
type lineApp struct {
	*httptest.Server
	broken string

	mu    sync.Mutex
	calls map[string]int
	told  []map[string]any
	docs  map[string][]byte
}

const lineDescriptor = `{"identifier":"line-app","authentication":{"type":"service_app","clientId":"line-client"},
"modules":{
 "custom-file-format":[{"key":"lines","type":"lines","url":"/format","signaturePatterns":{"fileName":"\\.lines$"}}],
 "file-pre-export":[{"key":"keep","url":"/pre"}],
 "webhook":[{"key":"hook","url":"/hook","events":["project.translated","project.approved"]}]},
"events":{"installed":"/installed","uninstall":"/uninstall","subscription_paid":"/paid"}}`

func newLineApp(t testing.TB, broken string) *lineApp {
	a := &lineApp{broken: broken, calls: map[string]int{}, docs: map[string][]byte{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *lineApp) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.calls[r.URL.Path]++
	doc, isDoc := a.docs[r.URL.Path]
	a.mu.Unlock()
	switch {
	case r.URL.Path == "/manifest.json":
		io.WriteString(w, lineDescriptor)
	case isDoc:
		w.Write(doc)
	case r.URL.Path == "/format":
		a.format(w, r)
	case r.URL.Path == "/pre":
		var job struct {
			Strings    []json.RawMessage `json:"strings"`
			StringsURL string            `json:"stringsUrl"`
		}
		json.NewDecoder(r.Body).Decode(&job)
		if job.StringsURL != "" {
			job.Strings = nil
			for _, line := range bytes.Split(bytes.TrimSpace(fetchDoc(job.StringsURL)), []byte("\n")) {
				if len(line) > 0 {
					job.Strings = append(job.Strings, line)
				}
			}
		}
		if job.Strings == nil {
			job.Strings = []json.RawMessage{}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"strings": job.Strings}})
	case r.URL.Path == "/hook":
		if a.broken == "hook" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	default:
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.told = append(a.told, body)
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func fetchDoc(url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// put serves b from the app and returns its address.
func (a *lineApp) put(name string, b []byte) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := fmt.Sprintf("/out/%d/%s", len(a.docs), name)
	a.docs[p] = b
	return a.URL + p
}

func (a *lineApp) format(w http.ResponseWriter, r *http.Request) {
	var job struct {
		JobType string `json:"jobType"`
		File    struct {
			Content    string `json:"content"`
			ContentURL string `json:"contentUrl"`
		} `json:"file"`
		TargetLanguages []struct {
			ID string `json:"id"`
		} `json:"targetLanguages"`
		Strings    []map[string]any `json:"strings"`
		StringsURL string           `json:"stringsUrl"`
	}
	if err := json.NewDecoder(r.Body).Decode(&job); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"The job is not JSON."}}`)
		return
	}
	if job.JobType == "build-file" {
		if job.StringsURL != "" {
			sc := bufio.NewScanner(bytes.NewReader(fetchDoc(job.StringsURL)))
			for sc.Scan() {
				var s map[string]any
				json.Unmarshal(sc.Bytes(), &s)
				job.Strings = append(job.Strings, s)
			}
		}
		var out bytes.Buffer
		for _, s := range job.Strings {
			text := s["text"]
			trs, _ := s["translations"].(map[string]any)
			if len(job.TargetLanguages) > 0 && a.broken != "translations" {
				if tr, ok := trs[job.TargetLanguages[0].ID].(map[string]any); ok {
					text = tr["text"]
				}
			}
			fmt.Fprintf(&out, "%s=%s\n", s["identifier"], text)
		}
		json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"contentUrl": a.put("built.lines", out.Bytes())}})
		return
	}
	content, _ := base64.StdEncoding.DecodeString(job.File.Content)
	if job.File.ContentURL != "" {
		content = fetchDoc(job.File.ContentURL)
	}
	content = bytes.TrimPrefix(content, []byte("\xEF\xBB\xBF"))
	var nd, preview bytes.Buffer
	seen := map[string]bool{}
	n := 0
	for _, line := range strings.Split(string(content), "\n") {
		key, value, ok := strings.Cut(strings.TrimRight(line, "\r"), "=")
		if !ok {
			continue
		}
		if seen[key] {
			io.WriteString(w, `{"error":{"message":"The key `+key+` is repeated."}}`)
			return
		}
		seen[key] = true
		n++
		s := map[string]any{"previewId": n, "identifier": key, "text": value}
		if len(job.TargetLanguages) > 0 {
			s["translations"] = map[string]any{job.TargetLanguages[0].ID: map[string]any{"text": value, "status": "translated"}}
		}
		b, _ := json.Marshal(s)
		nd.Write(b)
		nd.WriteByte('\n')
		fmt.Fprintf(&preview, `<p id="string_preview_id_%d">%s</p>`, n, html.EscapeString(value))
	}
	json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
		"stringsUrl": a.put("strings.ndjson", nd.Bytes()), "previewUrl": a.put("preview.html", preview.Bytes())}})
}

// lineOptions are a run on app with a file in its format.
func lineOptions(t testing.TB, app string) Options {
	file := filepath.Join(t.TempDir(), "ui.lines")
	if err := os.WriteFile(file, []byte("greeting=Hello\nfarewell=Goodbye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{App: app, Secret: "s", Files: []string{file}, Timeout: 10 * time.Second, Domain: "acme.example", OrganizationID: 1}
}

// TestConformanceAppThatKeepsTheContract: a run on an app that keeps
// every rule passes every case and exits 0; the lifecycle calls reach it
// in the shape the gateway forwards, in order.
func TestConformanceAppThatKeepsTheContract(t *testing.T) {
	app := newLineApp(t, "")
	t.Chdir(t.TempDir()) // where a run without --output writes the failures' files
	var out, errOut bytes.Buffer
	code := Main(context.Background(), Command{Options: lineOptions(t, app.URL)}, &out, &errOut)
	if code != ExitPassed || errOut.Len() > 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 22 || !strings.HasPrefix(lines[0], "pass  custom-file-format/lines/parse-file/content (") ||
		!strings.HasPrefix(lines[21], app.URL+": 21 passed, 0 failed, 0 skipped in ") {
		t.Fatalf("the report:\n%s", out.String())
	}
	if _, err := os.Stat(FilesDir); err == nil {
		t.Errorf("files were written for a run with no failure")
	}
	if len(app.told) != 3 || app.told[0]["event"] != "installed" || app.told[1]["event"] != "subscription_paid" ||
		app.told[2]["event"] != "uninstall" || app.told[0]["appSecret"] != nil || app.told[0]["domain"] != "acme.example" {
		t.Errorf("the lifecycle calls: %v", app.told)
	}
}

// TestConformanceFailuresAndFormats: a broken part fails its cases and
// only those (exit 1), each with a curl whose files are written next to
// the report, in every format.
func TestConformanceFailuresAndFormats(t *testing.T) {
	app := newLineApp(t, "hook")
	dir := t.TempDir()
	run := func(format string) ([]byte, string) {
		t.Helper()
		report := filepath.Join(dir, "report."+format)
		var out, errOut bytes.Buffer
		code := Main(context.Background(), Command{Options: lineOptions(t, app.URL), Format: format, Output: report}, &out, &errOut)
		if code != ExitFailed {
			t.Fatalf("%s: exit %d\n%s", format, code, errOut.String())
		}
		raw, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		return raw, out.String()
	}

	raw, stdout := run("json")
	if !strings.Contains(stdout, ": 18 passed, 3 failed, 0 skipped in ") {
		t.Errorf("stdout: %s", stdout)
	}
	var rep map[string]any
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"app", "descriptor", "duration_ms", "summary", "cases"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("the JSON report has no %s", k)
		}
	}
	if s := rep["summary"].(map[string]any); s["passed"] != 18.0 || s["failed"] != 3.0 || s["skipped"] != 0.0 {
		t.Errorf("summary: %v", s)
	}
	var failed []string
	for _, c := range rep["cases"].([]any) {
		c := c.(map[string]any)
		for _, k := range []string{"id", "kind", "module", "job", "case", "status", "duration_ms", "request"} {
			if _, ok := c[k]; !ok {
				t.Errorf("case %v has no %s", c["id"], k)
			}
		}
		if c["status"] != Failed {
			continue
		}
		failed = append(failed, c["id"].(string))
		if c["reason"] != "answered 500, not 2xx: an empty body" || c["answer"].(map[string]any)["status"] != 500.0 {
			t.Errorf("%v: %v %v", c["id"], c["reason"], c["answer"])
		}
		curl := c["curl"].(string)
		if !strings.Contains(curl, "-H 'X-Module-Key: hook'") || !strings.Contains(curl, "--data-binary @'"+FilesDir+"/webhook.hook.delivery.") {
			t.Errorf("curl: %s", curl)
		}
	}
	if strings.Join(failed, " ") != "webhook/hook/delivery/project.translated webhook/hook/delivery/project.approved webhook/hook/delivery/bulk" {
		t.Errorf("failed: %v", failed)
	}
	body, err := os.ReadFile(filepath.Join(dir, FilesDir, "webhook.hook.delivery.bulk.json"))
	if err != nil || !strings.Contains(string(body), `"event": "project.approved"`) {
		t.Errorf("the bulk delivery's file: %v %s", err, body)
	}

	raw, _ = run("junit")
	var suites struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Cases []struct {
				ClassName string `xml:"classname,attr"`
				Name      string `xml:"name,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &suites); err != nil {
		t.Fatalf("the JUnit report does not parse: %v\n%s", err, raw)
	}
	if suites.Tests != 21 || suites.Failures != 3 || len(suites.Suites) != 1 || len(suites.Suites[0].Cases) != 21 {
		t.Fatalf("JUnit: %+v", suites)
	}
	c := suites.Suites[0].Cases[15]
	if c.ClassName != "webhook/hook" || c.Name != "delivery/project.translated" || c.Failure == nil ||
		c.Failure.Message != "answered 500, not 2xx: an empty body" || !strings.Contains(c.Failure.Text, "curl -sS") {
		t.Errorf("JUnit case: %+v", c)
	}

	raw, _ = run("markdown")
	md := string(raw)
	for _, want := range []string{
		"## Conformance of `" + app.URL + "`: 3 of 21 cases failed\n",
		"| Kind | Module | Passed | Failed | Skipped |\n|---|---|---:|---:|---:|\n",
		"| custom-file-format | `lines` | 12 | 0 | 0 |\n",
		"| webhook | `hook` | 0 | 3 | 0 |\n",
		"\n### `webhook/hook/delivery/bulk`\n\nanswered 500, not 2xx: an empty body\n\n```sh\ncurl -sS",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown report has no %q:\n%s", want, md)
		}
	}

	raw, _ = run("text")
	if !strings.Contains(string(raw), "FAIL  webhook/hook/delivery/bulk (") || !strings.Contains(string(raw), "\n      curl -sS -X POST") {
		t.Errorf("the text report:\n%s", raw)
	}
}

// TestConformanceTranslationsLost: an app that builds files without
// their translations fails the round trip with translations, naming the
// string and the translation, and passes the one without.
func TestConformanceTranslationsLost(t *testing.T) {
	app := newLineApp(t, "translations")
	o := lineOptions(t, app.URL)
	o.Only = "custom-file-format/lines/build-file/round-trip-*"
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 2 || rep.Cases[0].Status != Failed || rep.Cases[1].Status != Passed ||
		rep.Cases[0].Reason != `string "greeting" was built with the translation "uk: Hello" into uk and parses back with "Hello"` {
		t.Fatalf("%+v", rep.Cases)
	}
}

// TestConformanceListAndOnly: --list prints the ids and calls no module;
// --only runs the cases its glob matches, * within one part.
func TestConformanceListAndOnly(t *testing.T) {
	app := newLineApp(t, "")
	o := lineOptions(t, app.URL)
	var out bytes.Buffer
	if code := Main(context.Background(), Command{Options: o, List: true}, &out, io.Discard); code != ExitPassed {
		t.Fatalf("--list: exit %d", code)
	}
	ids := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"custom-file-format/lines/parse-file/content", "custom-file-format/lines/parse-file/content-url",
		"custom-file-format/lines/parse-file/translation-content", "custom-file-format/lines/parse-file/translation-content-url",
		"custom-file-format/lines/parse-file/empty", "custom-file-format/lines/parse-file/bom",
		"custom-file-format/lines/parse-file/crlf", "custom-file-format/lines/parse-file/repeated",
		"custom-file-format/lines/build-file/strings", "custom-file-format/lines/build-file/strings-url",
		"custom-file-format/lines/build-file/round-trip-translations", "custom-file-format/lines/build-file/round-trip-source",
		"file-pre-export/keep/file-pre-export/strings", "file-pre-export/keep/file-pre-export/strings-url",
		"file-pre-export/keep/file-pre-export/no-strings",
		"webhook/hook/delivery/project.translated", "webhook/hook/delivery/project.approved", "webhook/hook/delivery/bulk",
		"lifecycle/events/installed/call", "lifecycle/events/subscription_paid/call", "lifecycle/events/uninstall/call",
	}
	if strings.Join(ids, "\n") != strings.Join(want, "\n") {
		t.Errorf("--list:\n%s", out.String())
	}
	for path, n := range app.calls {
		if path != "/manifest.json" {
			t.Errorf("--list called %s %d times", path, n)
		}
	}

	for glob, n := range map[string]int{
		"webhook/*/delivery/*":                  3,
		"*/*/*/content":                         1,
		"custom-file-format/lines/build-file/*": 4,
		"*/hook/*/bulk":                         1,
		"lifecycle/*/*/*":                       3,
	} {
		o.Only = glob
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("--only %s: %v", glob, err)
		}
		if len(rep.Cases) != n || rep.Failed() {
			t.Errorf("--only %s: %d cases, %+v", glob, len(rep.Cases), rep.Summary)
		}
	}
	o.Only = "webhook/*"
	if code := Main(context.Background(), Command{Options: o}, io.Discard, &out); code != ExitNotStarted || !strings.Contains(out.String(), `--only "webhook/*" selects none of the 21 cases`) {
		t.Errorf("--only of one part: exit %d %s", code, out.String())
	}
}

// TestConformanceCannotStart: exit 2, with a message saying why, when the
// app is unreachable, the descriptor unreadable or invalid, or a flag
// wrong; no case runs.
func TestConformanceCannotStart(t *testing.T) {
	app := newLineApp(t, "")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.json")
	os.WriteFile(invalid, []byte(`{"modules":{"webhook":[{"key":"hook","url":"https://elsewhere/hook"}]}}`), 0o600)
	valid := filepath.Join(dir, "valid.json")
	os.WriteFile(valid, []byte(lineDescriptor), 0o600)
	for _, tt := range []struct {
		name string
		c    Command
		want string
	}{
		{"no app", Command{}, "--app is required"},
		{"app unreachable", Command{Options: Options{App: gone.URL}}, "the descriptor could not be read from the app at " + gone.URL + "/manifest.json"},
		{"app unreachable, descriptor given", Command{Options: Options{App: gone.URL, Descriptor: valid}}, "the app at " + gone.URL + " could not be reached"},
		{"descriptor invalid", Command{Options: Options{App: app.URL, Descriptor: invalid}}, "the descriptor is not valid"},
		{"descriptor missing", Command{Options: Options{App: app.URL, Descriptor: filepath.Join(dir, "none.json")}}, "the descriptor could not be read"},
		{"format", Command{Options: Options{App: app.URL}, Format: "html"}, `--format "html" is not one of text, json, junit, markdown`},
		{"file of no module", Command{Options: Options{App: app.URL, Files: []string{valid}}}, "matches the signaturePatterns of no custom-file-format module"},
		{"file of an unknown module", Command{Options: Options{App: app.URL, Files: []string{"nope=" + valid}}}, `names the module "nope", which is none of the custom-file-format modules the descriptor declares (lines)`},
		{"only", Command{Options: Options{App: app.URL, Only: "[x"}}, "is not a glob"},
	} {
		var errOut bytes.Buffer
		code := Main(context.Background(), tt.c, io.Discard, &errOut)
		if code != ExitNotStarted || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%s: exit %d, %q", tt.name, code, errOut.String())
		}
	}
	for path := range app.calls {
		if path != "/manifest.json" && path != "/" {
			t.Errorf("a run that could not start called %s", path)
		}
	}
}

// TestConformanceSkipsModulesWithoutFile: a module with no file has its
// parse-file and build-file cases skipped, saying to pass one; skipped
// cases exit 0.
func TestConformanceSkipsModulesWithoutFile(t *testing.T) {
	app := newLineApp(t, "")
	o := lineOptions(t, app.URL)
	o.Files = nil
	var out bytes.Buffer
	if code := Main(context.Background(), Command{Options: o}, &out, io.Discard); code != ExitPassed {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "skip  custom-file-format/lines/parse-file/content: no file in this module's format: pass one with --file lines=<path>\n") ||
		!strings.Contains(out.String(), ": 9 passed, 0 failed, 12 skipped in ") {
		t.Errorf("the report:\n%s", out.String())
	}
}
