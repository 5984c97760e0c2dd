package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

var delivery = []byte(`{"events":[{"event":"project.translated","project":{"id":"42"}},{"event":"project.approved","project":{"id":"42"}}]}`)

// hmacHex signs like the service, with the standard library only.
func hmacHex(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// bump moves a file's modification time forward, so a change is seen even
// on file systems with coarse timestamps.
func bump(t testing.TB, path string, seconds int) {
	t.Helper()
	when := time.Now().Add(time.Duration(seconds) * time.Hour)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
}

func TestSecretsFileReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, file, `{"acme": "first-secret"}`)
	core, logs := observer.New(zapcore.DebugLevel)
	f, err := OpenSecretsFile(file, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	verifies := func(secret string) bool {
		v := f.Lookup("acme")
		return v != nil && v.Verify(delivery, hmacHex(secret, delivery)) == nil
	}
	if !verifies("first-secret") {
		t.Fatal("first secret not loaded")
	}

	// A broken file keeps the last good secrets and is logged without its
	// contents.
	writeFile(t, file, `{"acme": "broken-secret-value`)
	bump(t, file, 1)
	f.Refresh()
	if !verifies("first-secret") {
		t.Fatal("a broken file replaced the last good secrets")
	}
	if logs.FilterMessageSnippet("not reloaded").Len() != 1 {
		t.Fatalf("want one error logged for the broken file, got %v", logs.All())
	}
	f.Refresh() // unchanged: not logged again
	if logs.FilterMessageSnippet("not reloaded").Len() != 1 {
		t.Fatal("an unchanged broken file was logged again")
	}
	for _, e := range logs.All() {
		line, _ := json.Marshal(e.ContextMap())
		if strings.Contains(string(line), "broken-secret") {
			t.Fatalf("log holds the file's contents: %s", line)
		}
	}

	writeFile(t, file, `{"acme": ["second-secret", "third-secret"]}`)
	bump(t, file, 2)
	f.Refresh()
	if !verifies("second-secret") || !verifies("third-secret") || verifies("first-secret") {
		t.Fatal("the new file was not loaded")
	}

	// A file that disappears keeps the last good secrets too.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	f.Refresh()
	f.Refresh()
	if !verifies("second-secret") {
		t.Fatal("a missing file dropped the secrets")
	}
	if n := logs.FilterMessageSnippet("unreadable").Len(); n != 1 {
		t.Fatalf("missing file logged %d times, want 1", n)
	}
}

func TestSecretsFileWatch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, file, `{"acme": "first-secret"}`)
	f, err := OpenSecretsFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithCancel(t)
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, 5*time.Millisecond) }()
	writeFile(t, file, `{"acme": "second-secret-longer"}`)
	deadline := time.Now().Add(5 * time.Second)
	for f.Lookup("acme").Verify(delivery, hmacHex("second-secret-longer", delivery)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never reloaded the file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return when its context ended")
	}
}

func TestOpenSecretsFileRefusesBrokenFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenSecretsFile(filepath.Join(dir, "absent.json"), nil); err == nil {
		t.Fatal("a missing file opened")
	}
	file := filepath.Join(dir, "broken.json")
	writeFile(t, file, `{"acme": "top-secret`)
	if _, err := OpenSecretsFile(file, nil); err == nil || strings.Contains(err.Error(), "top-secret") {
		t.Fatalf("error %v: want one that does not quote the file", err)
	}
}

func TestParseSecretsFile(t *testing.T) {
	tests := []struct {
		name, file string
		orgs       int
		err        string // a part of the error; "" for none
	}{
		{"one secret", `{"acme":"s"}`, 1, ""},
		{"list", `{"acme":["s1","s2"],"1234":"s3"}`, 2, ""},
		{"empty object", `{}`, 0, ""},
		{"not JSON", `{"acme":"top-secret`, 0, "not valid JSON"},
		{"syntax error position", `{"acme" "top-secret"}`, 0, "at byte"},
		{"too deep", `{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, 0, "too deeply nested"},
		{"array", `["top-secret"]`, 0, "want a JSON object"},
		{"null", `null`, 0, "want a JSON object"},
		{"number value", `{"acme":12345}`, 0, `organization "acme"`},
		{"empty list", `{"acme":[]}`, 0, "non-empty list"},
		{"empty secret", `{"acme":""}`, 0, "is empty"},
		{"empty secret in list", `{"acme":["top-secret",""]}`, 0, "secret 2 of 2 is empty"},
		{"list of numbers", `{"acme":[1,2]}`, 0, `organization "acme"`},
		{"empty organization", `{"":"top-secret"}`, 0, "organization name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orgs, err := ParseSecretsFile([]byte(tt.file))
			if tt.err == "" {
				if err != nil || len(orgs) != tt.orgs {
					t.Fatalf("got %d organizations, %v; want %d", len(orgs), err, tt.orgs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want one with %q", err, tt.err)
			}
			if strings.Contains(err.Error(), "top-secret") {
				t.Fatalf("error %q quotes a secret", err)
			}
		})
	}
}

// Organizations with the same secrets, in any order, share a verifier:
// that is how a domain and an id are known to name one organization.
func TestParseSecretsFileSharesVerifierOfSameSecrets(t *testing.T) {
	orgs, err := ParseSecretsFile([]byte(`{"a.example":["s1","s2"],"1":["s2","s1","s1"],"b.example":"s1","2":"s1","c.example":"s1:"}`))
	if err != nil {
		t.Fatal(err)
	}
	if orgs["a.example"] != orgs["1"] || orgs["b.example"] != orgs["2"] {
		t.Fatal("organizations with the same secrets got different verifiers")
	}
	if orgs["a.example"] == orgs["b.example"] || orgs["b.example"] == orgs["c.example"] {
		t.Fatal("organizations with different secrets share a verifier")
	}
}

func FuzzParseSecretsFile(f *testing.F) {
	f.Add([]byte(`{"acme":"s"}`))
	f.Add([]byte(`{"acme":["s1","s2"],"1234":"s3"}`))
	f.Add([]byte(`{"acme":[]}`))
	f.Add([]byte(`{"a":null}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		orgs, err := ParseSecretsFile(data)
		if err != nil {
			if orgs != nil {
				t.Fatal("organizations returned with an error")
			}
			return
		}
		for org, v := range orgs {
			if org == "" || v == nil {
				t.Fatalf("organization %q with verifier %v", org, v)
			}
		}
	})
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}
