package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/contract"
)

// redisSpillSite spills the answers of app to the servicegate redis option.
func redisSpillSite(app, dir, key string) string {
	return fmt.Sprintf(`
localhost:{port} {
	route {
		service_limits {
			contract custom-file-format
			max_response_size 1MB
			spill
			spill_dir %s
			%s
		}
		reverse_proxy %s
	}
}
`, dir, key, strings.TrimPrefix(app, "http://"))
}

func TestE2ESpillInRedis(t *testing.T) {
	srv := redistest.Start(t)
	built := pattern(2 << 20) // a 2 MB file: over max_response_size in base64
	other := otherApp(t, map[string][]byte{"big": []byte(`{"data":{"content":"` + b64(built) + `"}}`)})
	dir := t.TempDir()
	startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\tkey_prefix e2e:\n\t\ttimeout 2s\n\t}",
		redisSpillSite(other.URL, dir, "spill_key 0123456789abcdef-shared-by-every-instance"))

	job := formatJob("build-file", map[string]any{"strings": []any{}})
	spill := func() string {
		t.Helper()
		status, _, body := send(t, "/x/big", job, true)
		a := decodeAnswer(t, body)
		if status != 200 || a.Data.ContentURL == "" {
			t.Fatalf("spilled answer: %d %.300s", status, body)
		}
		u, err := url.Parse(a.Data.ContentURL)
		if err != nil {
			t.Fatal(err)
		}
		return e2eURL(u.RequestURI())
	}
	link := spill()
	name := strings.TrimPrefix(strings.SplitN(link, "?", 2)[0], e2eURL("/servicegate/spill/"))
	if n, err := srv.Do("STRLEN", "e2e:spill:"+name); err != nil || n != fmt.Sprint(len(built)) {
		t.Errorf("the payload in Redis under e2e:spill:%s is %s bytes (%v), want %d", name, n, err, len(built))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if contract.ValidName(e.Name()) {
			t.Errorf("payload %s kept on disk too", e.Name())
		}
	}
	status, got := download(t, link)
	if status != 200 || !bytes.Equal(got, built) {
		t.Fatalf("download: %d, %d bytes, same as built: %v", status, len(got), bytes.Equal(got, built))
	}
	if status, _ := download(t, link); status != 403 {
		t.Errorf("second download: %d, want 403", status)
	}

	// Redis goes away: a kept link answers 503, a new answer 502.
	kept := spill()
	srv.Stop()
	status, body := download(t, kept)
	if status != 503 || !strings.Contains(errorMessage(t, body), "Try the download again") {
		t.Errorf("download with Redis down: %d %s, want 503 with a message", status, body)
	}
	status, _, body = send(t, "/x/big", job, true)
	if status != 502 || !strings.Contains(errorMessage(t, body), "The app's answer is too large") {
		t.Errorf("spill with Redis down: %d %.300s, want the 502 of an answer that could not be kept", status, body)
	}
}

func TestSpillWithRedisNeedsASharedKey(t *testing.T) {
	load := func(key string) error {
		input := "{\n\tadmin off\n\tservicegate {\n\t\tredis redis://127.0.0.1:1/0\n\t}\n}\n" +
			strings.ReplaceAll(redisSpillSite("127.0.0.1:1", t.TempDir(), key), "localhost:{port}", "http://127.0.0.1:0")
		out, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(input), nil)
		if err != nil {
			t.Fatal(err)
		}
		var cfg caddy.Config
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		return caddy.Validate(&cfg)
	}
	err := load("")
	if err == nil || !strings.Contains(err.Error(), "needs spill_key, the same on every instance") {
		t.Errorf("spill with redis and no spill_key: %v, want a refusal asking for a shared key", err)
	}
	if err := load("spill_key 0123456789abcdef-shared"); err != nil {
		t.Errorf("spill with redis and spill_key: %v", err)
	}
}
