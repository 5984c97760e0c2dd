package descriptor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/urlpath"
)

const good = `{
  "identifier": "demo-app",
  "name": "Demo app",
  "authentication": {"type": "service_app", "clientId": "demo-client"},
  "scopes": ["project"],
  "modules": {
    "custom-file-format": [
      {"key": "kv-format", "type": "kv", "url": "/file-format", "multilingual": false,
       "signaturePatterns": {"fileName": "\\.kv$", "fileContent": "^[a-z]+ = "}}
    ],
    "file-pre-export": [{"key": "kv-pre-export", "url": "/pre-export"}],
    "webhook": [
      {"key": "events-hook", "url": "/webhooks", "events": ["project.translated", "project.approved"],
       "environments": ["service", "service-enterprise"]}
    ],
    "project-menu": [{"key": "menu", "url": "/menu"}]
  }
}`

func TestParseGood(t *testing.T) {
	d, err := Parse("manifest.json", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if d.Identifier != "demo-app" || d.Name != "Demo app" || d.ClientID != "demo-client" || d.BaseURL != "" {
		t.Errorf("top-level fields: %+v", d)
	}
	if len(d.FileFormats) != 1 || d.FileFormats[0].Key != "kv-format" || d.FileFormats[0].Type != "kv" ||
		d.FileFormats[0].Path() != "/file-format" || d.FileFormats[0].SignaturePatterns.FileName != `\.kv$` {
		t.Errorf("file formats: %+v", d.FileFormats)
	}
	if len(d.PreExports) != 1 || d.PreExports[0].URL != "/pre-export" {
		t.Errorf("pre-exports: %+v", d.PreExports)
	}
	if len(d.Webhooks) != 1 || d.Webhooks[0].Key != "events-hook" ||
		strings.Join(d.Webhooks[0].Events, ",") != "project.translated,project.approved" {
		t.Errorf("webhooks: %+v", d.Webhooks)
	}
	if strings.Join(d.Ignored, ",") != "project-menu" {
		t.Errorf("ignored kinds: %v", d.Ignored)
	}
}

func TestModulePathDropsQuery(t *testing.T) {
	if p := (Module{URL: "/hook?v=2"}).Path(); p != "/hook" {
		t.Errorf("Path = %q", p)
	}
}

// TestParseDefects lists each defect the issue names with the words a
// person needs to find it.
func TestParseDefects(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want []string
	}{
		"not json":          {`{"modules":`, []string{"not a JSON object"}},
		"array":             {`[]`, []string{"not a JSON object"}},
		"modules not obj":   {`{"modules":[]}`, []string{"modules is not an object"}},
		"kind not array":    {`{"modules":{"webhook":{}}}`, []string{"modules.webhook is not an array"}},
		"entry not object":  {`{"modules":{"webhook":[1]}}`, []string{"modules.webhook[0] is not an object"}},
		"missing key":       {`{"modules":{"file-pre-export":[{"url":"/p"}]}}`, []string{"modules.file-pre-export[0]: key is missing"}},
		"missing url":       {`{"modules":{"file-pre-export":[{"key":"p"}]}}`, []string{`modules.file-pre-export[0] (key "p"): url is missing`}},
		"url not string":    {`{"modules":{"file-pre-export":[{"key":"p","url":3}]}}`, []string{"url is not a string"}},
		"absolute url":      {`{"modules":{"file-pre-export":[{"key":"p","url":"https://evil.example/p"}]}}`, []string{`url "https://evil.example/p" is absolute`}},
		"scheme-less host":  {`{"modules":{"file-pre-export":[{"key":"p","url":"//evil.example/p"}]}}`, []string{"is absolute"}},
		"relative no slash": {`{"modules":{"file-pre-export":[{"key":"p","url":"p"}]}}`, []string{`must start with "/"`}},
		"dot segments":      {`{"modules":{"file-pre-export":[{"key":"p","url":"/a/../b"}]}}`, []string{`".."`}},
		"format no type":    {`{"modules":{"custom-file-format":[{"key":"f","url":"/f"}]}}`, []string{`(key "f"): type is missing`}},
		"multilingual type": {`{"modules":{"custom-file-format":[{"key":"f","url":"/f","type":"t","multilingual":"yes"}]}}`, []string{"multilingual is not true or false"}},
		"webhook no events": {`{"modules":{"webhook":[{"key":"w","url":"/w"}]}}`, []string{`(key "w"): events is missing`}},
		"webhook empty":     {`{"modules":{"webhook":[{"key":"w","url":"/w","events":[]}]}}`, []string{"events is empty"}},
		"events not list":   {`{"modules":{"webhook":[{"key":"w","url":"/w","events":"project.translated"}]}}`, []string{"events is not an array"}},
		"unknown env":       {`{"modules":{"webhook":[{"key":"w","url":"/w","events":["e"],"environments":["crowdin"]}]}}`, []string{`environments holds "crowdin"`, `"service-enterprise"`}},
		"bad regex": {`{"modules":{"file-pre-export":[{"key":"p","url":"/p","signaturePatterns":{"fileName":"a(?=b)"}}]}}`,
			[]string{`signaturePatterns.fileName "a(?=b)" does not compile`, "invalid or unsupported Perl syntax", "dialect"}},
		"patterns not obj": {`{"modules":{"file-pre-export":[{"key":"p","url":"/p","signaturePatterns":"x"}]}}`, []string{"signaturePatterns is not an object"}},
		"duplicate key": {`{"modules":{"file-pre-export":[{"key":"p","url":"/p"}],"webhook":[{"key":"p","url":"/w","events":["e"]}]}}`,
			[]string{`key "p" is used by modules.file-pre-export[0] and modules.webhook[0]`}},
		"duplicate url": {`{"modules":{"file-pre-export":[{"key":"p","url":"/x"}],"custom-file-format":[{"key":"f","type":"t","url":"/X"}]}}`,
			[]string{`url path "/x" is used by modules.custom-file-format[0] and modules.file-pre-export[0]`}},
		"wildcard url":     {`{"modules":{"webhook":[{"key":"w","url":"/*","events":["e"]}]}}`, []string{`(key "w"): url "/*" has a wildcard`}},
		"prefix url":       {`{"modules":{"file-pre-export":[{"key":"p","url":"/api/*"}]}}`, []string{`(key "p"): url "/api/*" has a wildcard`}},
		"query url":        {`{"modules":{"file-pre-export":[{"key":"p","url":"/p?x=1"}]}}`, []string{`url "/p?x=1" has a query`}},
		"fragment url":     {`{"modules":{"file-pre-export":[{"key":"p","url":"/p#x"}]}}`, []string{`url "/p#x" has a fragment`}},
		"encoded url":      {`{"modules":{"file-pre-export":[{"key":"p","url":"/a%2e%2e"}]}}`, []string{"has a percent-encoding"}},
		"space url":        {`{"modules":{"file-pre-export":[{"key":"p","url":"/a b"}]}}`, []string{"has whitespace"}},
		"tab url":          {`{"modules":{"file-pre-export":[{"key":"p","url":"/a\tb"}]}}`, []string{"has whitespace"}},
		"semicolon url":    {`{"modules":{"file-pre-export":[{"key":"p","url":"/a;b"}]}}`, []string{`has the character ';'`}},
		"backslash url":    {`{"modules":{"file-pre-export":[{"key":"p","url":"/a\\..\\b"}]}}`, []string{`has the character '\\'`}},
		"dot url":          {`{"modules":{"file-pre-export":[{"key":"p","url":"/a/./b"}]}}`, []string{`".."`}},
		"trailing slash":   {`{"modules":{"file-pre-export":[{"key":"p","url":"/a/"}]}}`, []string{"empty segment"}},
		"bad base url":     {`{"baseUrl":"ftp://x"}`, []string{`baseUrl "ftp://x" is not an absolute http or https address`}},
		"identifier int":   {`{"identifier":5}`, []string{"identifier is not a string"}},
		"no descriptor":    {`{"status":"starting"}`, []string{"not an app descriptor", "identifier", "modules"}},
		"authentication 1": {`{"authentication":1}`, []string{"authentication is not an object"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := Parse("manifest.json", []byte(c.doc))
			var defects *Defects
			if !errors.As(err, &defects) || d != nil {
				t.Fatalf("Parse = %v, %v; want *Defects", d, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "manifest.json has") {
				t.Errorf("message does not name the source: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q\nlacks %q", msg, w)
				}
			}
		})
	}
}

// TestParseReportsEveryDefectAtOnce: a descriptor with N defects yields one
// error naming all N.
func TestParseReportsEveryDefectAtOnce(t *testing.T) {
	doc := `{"modules":{
	  "custom-file-format":[{"url":"/f","type":"t"},{"key":"g","url":"https://x/g","type":"t","signaturePatterns":{"fileContent":"a{2,1}"}}],
	  "file-pre-export":[{"key":"p","url":"/f"}],
	  "webhook":[{"key":"p","url":"/w","environments":["nowhere"]}]}}`
	_, err := Parse("app.json", []byte(doc))
	var defects *Defects
	if !errors.As(err, &defects) {
		t.Fatalf("Parse error = %v", err)
	}
	want := []string{
		"modules.custom-file-format[0]: key is missing",
		`(key "g"): url "https://x/g" is absolute`,
		`signaturePatterns.fileContent "a{2,1}" does not compile`,
		`(key "p"): events is missing`,
		`environments holds "nowhere"`,
		`key "p" is used by modules.file-pre-export[0] and modules.webhook[0]`,
		`url path "/f" is used by modules.custom-file-format[0] and modules.file-pre-export[0]`,
	}
	if len(defects.List) != len(want) {
		t.Errorf("%d defects, want %d:\n%s", len(defects.List), len(want), err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "app.json has 7 defects:") {
		t.Errorf("head of message: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message lacks %q:\n%s", w, msg)
		}
	}
}

func TestFilled(t *testing.T) {
	d, err := Parse("m", []byte(`{"identifier":"a","modules":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Filled("https://app.example.com", "client-1")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["baseUrl"] != "https://app.example.com" || got["identifier"] != "a" {
		t.Errorf("filled: %s", out)
	}
	auth, _ := got["authentication"].(map[string]any)
	if auth["clientId"] != "client-1" || auth["type"] != AuthenticationType {
		t.Errorf("authentication: %v", got["authentication"])
	}

	// What the descriptor says is kept as it is.
	d, _ = Parse("m", []byte(`{"identifier":"a","baseUrl":"https://declared.example","authentication":{"type":"x","clientId":"mine"}}`))
	out, _ = d.Filled("https://other.example", "theirs")
	if !strings.Contains(string(out), `"https://declared.example"`) || !strings.Contains(string(out), `"mine"`) ||
		strings.Contains(string(out), "other.example") || strings.Contains(string(out), "theirs") {
		t.Errorf("declared fields overwritten: %s", out)
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := (&Loader{}).Load(context.Background(), path)
	if err != nil || l.Identifier != "demo-app" || l.Stale {
		t.Fatalf("Load = %+v, %v", l, err)
	}
	if _, err := (&Loader{}).Load(context.Background(), path+".missing"); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestLoadAddressKeepsLastGood: a descriptor fetched from the app is kept,
// and used when the app is down or answers garbage.
func TestLoadAddressKeepsLastGood(t *testing.T) {
	var mode atomic.Int32 // 0 good, 1 down (500), 2 defective
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			w.Write([]byte(good))
		case 1:
			http.Error(w, "restarting", http.StatusInternalServerError)
		default:
			w.Write([]byte(`{"modules":{"webhook":[{"key":"w"}]}}`))
		}
	}))
	defer app.Close()
	loader := &Loader{Dir: t.TempDir()}
	addr := app.URL + "/manifest.json"

	before := time.Now().Add(-time.Second) // file times may be coarse
	l, err := loader.Load(context.Background(), addr)
	if err != nil || l.Stale || l.Identifier != "demo-app" {
		t.Fatalf("first load = %+v, %v", l, err)
	}
	for _, m := range []int32{1, 2} {
		mode.Store(m)
		l, err = loader.Load(context.Background(), addr)
		if err != nil || !l.Stale || l.Err == nil || l.Identifier != "demo-app" {
			t.Fatalf("mode %d: load = %+v, %v; want the last good copy", m, l, err)
		}
		// When the copy was kept, for the health check's age.
		if l.KeptAt.Before(before) || l.KeptAt.After(time.Now()) {
			t.Errorf("mode %d: kept at %v, want the time of the first load", m, l.KeptAt)
		}
	}

	// Without a kept copy, the failure is the answer.
	fresh := &Loader{Dir: t.TempDir()}
	mode.Store(1)
	if _, err := fresh.Load(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("load without a copy = %v", err)
	}
	mode.Store(2)
	var defects *Defects
	if _, err := fresh.Load(context.Background(), addr); !errors.As(err, &defects) {
		t.Errorf("defective descriptor without a copy = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"modules":{"webhook":[{"key":"w","url":"/w","events":["e"],"environments":["service"]}]}}`))
	f.Add([]byte(`{"modules":{"custom-file-format":[{"key":"f","url":"/f","type":"t","signaturePatterns":{"fileName":"(a"}}]}}`))
	f.Add([]byte(`{"baseUrl":"http://x","authentication":{"clientId":"c"}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"modules":{"file-pre-export":[{"key":"p","url":"/api/*"},{"key":"q","url":"/a/..;/b"},{"key":"r","url":"/A/"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz", data)
		if (d == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v", d, err)
		}
		if err != nil {
			var defects *Defects
			if !errors.As(err, &defects) || len(defects.List) == 0 {
				t.Fatalf("error without defects: %v", err)
			}
			return
		}
		for _, m := range d.Modules() {
			if m.Key == "" || !strings.HasPrefix(m.Path(), "/") || strings.HasPrefix(m.URL, "//") {
				t.Fatalf("accepted module %+v", m)
			}
			// A plain path: nothing a router reads as a pattern, and
			// nothing that decodes, trims or folds into another path.
			if strings.ContainsAny(m.URL, "*?#%;\\ \t") || urlpath.Check(m.URL) != nil || urlpath.Canonical(m.URL) != strings.ToLower(m.URL) {
				t.Fatalf("accepted module url %q", m.URL)
			}
		}
		if _, err := d.Filled("https://app.example", "c"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLoadAddressFollowsNoRedirectToAnotherOrigin: the descriptor address
// follows redirects within its own origin (a few), never to another; what
// another origin would have answered is neither used nor kept.
func TestLoadAddressFollowsNoRedirectToAnotherOrigin(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"identifier":"hostile","baseUrl":"https://evil.example"}`))
	}))
	defer elsewhere.Close()
	var away atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/old-manifest.json":
			http.Redirect(w, r, "/manifest.json", http.StatusMovedPermanently)
		case r.URL.Path == "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case away.Load():
			http.Redirect(w, r, elsewhere.URL+"/manifest.json", http.StatusFound)
		default:
			w.Write([]byte(good))
		}
	}))
	defer app.Close()
	loader := &Loader{Dir: t.TempDir()}

	l, err := loader.Load(context.Background(), app.URL+"/old-manifest.json")
	if err != nil || l.Stale || l.Identifier != "demo-app" {
		t.Fatalf("a redirect within the origin: %+v, %v", l, err)
	}
	if _, err := loader.Load(context.Background(), app.URL+"/loop"); err == nil || !strings.Contains(err.Error(), "more than 3 times") {
		t.Errorf("a redirect loop: %v", err)
	}

	addr := app.URL + "/manifest.json"
	if _, err := loader.Load(context.Background(), addr); err != nil {
		t.Fatal(err)
	}
	away.Store(true)
	l, err = loader.Load(context.Background(), addr)
	if err != nil || !l.Stale || l.Identifier != "demo-app" || l.Err == nil || !strings.Contains(l.Err.Error(), "another origin") {
		t.Fatalf("a redirect to another origin: %+v, %v; want the last good copy and the reason", l, err)
	}
	if _, err := (&Loader{Dir: t.TempDir()}).Load(context.Background(), addr); err == nil || !strings.Contains(err.Error(), elsewhere.URL) {
		t.Errorf("a redirect to another origin without a kept copy: %v", err)
	}
}

// TestLoadAddressKeepsOnlyDescriptors: a JSON object that is no app
// descriptor (an app's status answer) is neither published nor kept as
// the last good copy.
func TestLoadAddressKeepsOnlyDescriptors(t *testing.T) {
	var starting atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if starting.Load() {
			w.Write([]byte(`{"status":"starting"}`))
			return
		}
		w.Write([]byte(good))
	}))
	defer app.Close()
	loader := &Loader{Dir: t.TempDir()}
	addr := app.URL + "/manifest.json"
	if _, err := loader.Load(context.Background(), addr); err != nil {
		t.Fatal(err)
	}
	starting.Store(true)
	for range 2 {
		l, err := loader.Load(context.Background(), addr)
		if err != nil || !l.Stale || l.Identifier != "demo-app" || !strings.Contains(l.Err.Error(), "not an app descriptor") {
			t.Fatalf("a status answer: %+v, %v; want the last good copy", l, err)
		}
	}
}

// fileModules is a descriptor of n file-format modules whose fileName
// pattern is pattern.
func fileModules(n int, pattern string) []byte {
	mods := make([]map[string]any, n)
	for i := range mods {
		mods[i] = map[string]any{"key": fmt.Sprintf("f%d", i), "type": "t", "url": fmt.Sprintf("/f%d", i),
			"signaturePatterns": map[string]string{"fileName": pattern}}
	}
	doc, _ := json.Marshal(map[string]any{"identifier": "a", "modules": map[string]any{"custom-file-format": mods}})
	return doc
}

// TestParsePatternBounds: each signaturePatterns pattern is bounded in
// length and compiled size, and the descriptor's patterns in number,
// bytes and compiled size; a defect names the module.
func TestParsePatternBounds(t *testing.T) {
	nineK := strings.Repeat(`\w{1000}`, 9) // 9,000-odd steps: within one pattern's bound
	for name, c := range map[string]struct {
		doc  []byte
		want string
	}{
		"long":         {fileModules(1, strings.Repeat("a", MaxPatternBytes+1)), `modules.custom-file-format[0] (key "f0"): signaturePatterns.fileName is 1001 bytes long; a pattern may have at most 1000`},
		"costly":       {fileModules(1, strings.Repeat(`\w{1000}`, 11)), `(key "f0"): signaturePatterns.fileName compiles to more than 10000 steps`},
		"nested":       {fileModules(1, `(?:\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w\w){1000}`), "compiles to more than 10000 steps"},
		"many":         {fileModules(MaxPatterns+1, "a"), `(key "f500"): signaturePatterns.fileName brings the descriptor's signaturePatterns over 500 patterns`},
		"costly sum":   {fileModules(30, nineK), `(key "f22"): signaturePatterns.fileName brings the descriptor's signaturePatterns over 200000 compiled steps`},
		"bytes in all": {fileModules(80, strings.Repeat("a", 900)), `(key "f72"): signaturePatterns.fileName brings the descriptor's signaturePatterns over 500 patterns or 65536 bytes`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("m", c.doc)
			var defects *Defects
			if !errors.As(err, &defects) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error %v\nwant one with %q", err, c.want)
			}
			if len(defects.List) != 1 {
				t.Errorf("%d defects, want 1: %v", len(defects.List), err)
			}
		})
	}
	if _, err := Parse("m", fileModules(20, nineK)); err != nil {
		t.Errorf("patterns within the bounds: %v", err)
	}
}

// TestParseCostlyPatternsIsQuick: a descriptor of the largest size made of
// large patterns that compile is checked at once, not in tens of seconds.
func TestParseCostlyPatternsIsQuick(t *testing.T) {
	pattern := strings.Repeat(`(?:\w{1000})`, 400)
	one, two := fileModules(1, pattern), fileModules(2, pattern)
	doc := fileModules((MaxSize-len(one))/(len(two)-len(one)), pattern)
	start := time.Now()
	if _, err := Parse("m", doc); err == nil {
		t.Fatal("a descriptor of 5 KB patterns passed")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("checking a %d-byte descriptor of patterns took %v", len(doc), took)
	}
}

// TestLikelyDefects: a module kind a letter off one servicegate routes is
// named, with the kind it is likely meant to be; the service's other
// kinds are not, and every one stays routed as any other path.
func TestLikelyDefects(t *testing.T) {
	d, err := Parse("app.json", []byte(`{"identifier":"app","modules":{
		"webhok":[{"key":"w","url":"/webhooks"}],
		"custom-file-formats":[{"key":"f","url":"/format"}],
		"file-pre-import":[{"key":"i","url":"/pre-import"}],
		"project-menu":[{"key":"m","url":"/menu"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := d.LikelyDefects()
	want := []string{`modules.custom-file-formats is not a module kind servicegate routes; did you mean "custom-file-format"?`,
		`modules.webhok is not a module kind servicegate routes; did you mean "webhook"?`}
	if len(got) != len(want) {
		t.Fatalf("likely defects %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) || !strings.Contains(got[i], "token check") {
			t.Errorf("likely defect %d: %q, want %q…", i, got[i], want[i])
		}
	}
	if len(d.Others) != 4 || len(d.Webhooks) != 0 || len(d.FileFormats) != 0 {
		t.Errorf("the kinds are not routed as others: %d others, %d webhooks, %d file formats", len(d.Others), len(d.Webhooks), len(d.FileFormats))
	}
}
