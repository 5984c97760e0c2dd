package caddymodule

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestServiceAppRefusesPatternURLs: a module url with pattern characters
// (a wildcard that would become a prefix route skipping the token check,
// a query, an encoding, whitespace) is refused by `caddy service-app
// check`, by the Caddyfile adapter and at provision, naming the module.
func TestServiceAppRefusesPatternURLs(t *testing.T) {
	for url, want := range map[string]string{
		"/*":      `url "/*" has a wildcard`,
		"/api/*":  `url "/api/*" has a wildcard`,
		"/w?x=1":  "has a query",
		"/w%2e":   "percent-encoding",
		"/w x":    "whitespace",
		"/a/../w": `".."`,
	} {
		t.Run(url, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "manifest.json")
			doc := `{"modules":{"webhook":[{"key":"hook","url":"` + url + `","events":["e"]}]}}`
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			wants := []string{want, `(key "hook")`}
			var out bytes.Buffer
			if code, err := runServiceAppCheck(path, &out); code != 1 || err != nil || !containsAll(out.String(), wants) {
				t.Errorf("check: %d %v\n%s", code, err, out.String())
			}
			if _, err := adaptCaddyfile(t, "localhost {\n\tservice_app {\n\t\tdescriptor "+path+"\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t}\n}\n"); err == nil || !containsAll(err.Error(), append(wants, "Caddyfile:2")) {
				t.Errorf("adapt: %v", err)
			}
			app := &ServiceApp{Descriptor: path, ClientID: "c", ClientSecret: "s", AppSecrets: []string{"w"}}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			if err := app.Provision(ctx); err == nil || !containsAll(err.Error(), wants) {
				t.Errorf("provision: %v", err)
				_ = app.Cleanup()
			}
		})
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
