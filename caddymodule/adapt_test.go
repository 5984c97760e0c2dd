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
// of ten dashes, then the JSON it must adapt to. A file whose JSON half is
// the word "error" must fail to adapt; "error: <text>" with an error that
// contains the text.
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
			input, want, ok := strings.Cut(string(raw), "\n----------\n")
			if !ok {
				t.Fatalf("%s: no ---------- line between the Caddyfile and the JSON", file)
			}
			adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
			got, _, err := adapter.Adapt([]byte(input), nil)
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
			if *updateGolden {
				if err := os.WriteFile(file, []byte(input+"\n----------\n"+pretty.String()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.TrimSpace(pretty.String()) != strings.TrimSpace(want) {
				t.Errorf("adapted JSON differs from the golden file\ngot:\n%s\nwant:\n%s", pretty.String(), want)
			}
		})
	}
}
