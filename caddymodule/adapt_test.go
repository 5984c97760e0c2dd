package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

var updateGolden = flag.Bool("update", false, "rewrite the JSON half of testdata/adapt golden files from the adapter's output")

// TestAdapt adapts every testdata/adapt/*.caddyfiletest: a Caddyfile, a line
// of ten dashes, then the JSON it must adapt to, and, when the adapter
// warns, another line of dashes and its warnings, one a line
// (file:line (directive): message); without them it must not warn. A file
// whose JSON part is the word "error" must fail to adapt; "error: <text>"
// with an error that contains the text.
func TestAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files in testdata/adapt")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".caddyfiletest"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, rest, ok := strings.Cut(string(raw), "\n----------\n")
			if !ok {
				t.Fatalf("%s: no ---------- line between the Caddyfile and the JSON", file)
			}
			want, wantWarnings, _ := strings.Cut(rest, "\n----------\n")
			adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
			got, warnings, err := adapter.Adapt([]byte(input+"\n"), nil)
			if wantErr, ok := strings.CutPrefix(strings.TrimSpace(want), "error"); ok {
				if err == nil {
					t.Fatalf("adapted without error, want an error:\n%s", got)
				}
				if wantErr = strings.TrimSpace(strings.TrimPrefix(wantErr, ":")); !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("error %q, want one containing %q", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "\t"); err != nil {
				t.Fatal(err)
			}
			var gotWarnings strings.Builder
			for _, w := range warnings {
				gotWarnings.WriteString(w.String() + "\n")
			}
			if *updateGolden {
				out := input + "\n----------\n" + pretty.String() + "\n"
				if gotWarnings.Len() > 0 {
					out += "----------\n" + gotWarnings.String()
				}
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.TrimSpace(pretty.String()) != strings.TrimSpace(want) {
				t.Errorf("adapted JSON differs from the golden file\ngot:\n%s\nwant:\n%s", pretty.String(), want)
			}
			if strings.TrimSpace(gotWarnings.String()) != strings.TrimSpace(wantWarnings) {
				t.Errorf("the adapter's warnings differ from the golden file\ngot:\n%s\nwant:\n%s", gotWarnings.String(), wantWarnings)
			}
		})
	}
}
