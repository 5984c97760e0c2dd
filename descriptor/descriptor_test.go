package descriptor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

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
	d, _ = Parse("m", []byte(`{"baseUrl":"https://declared.example","authentication":{"type":"x","clientId":"mine"}}`))
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
