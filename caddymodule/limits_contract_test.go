package caddymodule

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestPublicAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34":        true,
		"2606:2800:220:1::1":   true,
		"127.0.0.1":            false,
		"::1":                  false,
		"10.1.2.3":             false,
		"172.16.0.1":           false,
		"192.168.1.1":          false,
		"169.254.169.254":      false, // cloud metadata
		"100.64.0.1":           false,
		"0.0.0.0":              false,
		"::ffff:127.0.0.1":     false,
		"fd00::1":              false,
		"fe80::1":              false,
		"64:ff9b::7f00:1":      false,
		"224.0.0.1":            false,
		"::ffff:93.184.216.34": true,
	} {
		if got := publicAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("publicAddr(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestInlineHostAllowed(t *testing.T) {
	l := &ServiceLimits{Inline: &InlineOptions{Hosts: []string{"files.service.example", "*.cdn.example"}}}
	for raw, want := range map[string]bool{
		"https://files.service.example/a":     true,
		"https://FILES.service.example./a":    true,
		"http://files.service.example:8443/a": true,
		"https://eu.cdn.example/a":            true,
		"https://cdn.example/a":               false,
		"https://evilcdn.example/a":           false,
		"https://files.service.example.evil/": false,
		"ftp://files.service.example/a":       false,
		"file:///etc/passwd":                  false,
	} {
		u, _ := url.Parse(raw)
		if got := l.inlineHostAllowed(u); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}

func TestRewriteJob(t *testing.T) {
	job := `{"jobType":"build-file","file":{"id":3,"contentUrl":"https://f/x"},"stringsUrl":"https://f/s","project":{"id":2}}`
	out, err := rewriteJob([]byte(job), []byte(`[{"identifier":"a"}]`), []byte("YQ=="))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	file := got["file"].(map[string]any)
	if got["stringsUrl"] != nil || file["contentUrl"] != nil || file["content"] != "YQ==" || file["id"] != 3.0 ||
		len(got["strings"].([]any)) != 1 || got["jobType"] != "build-file" {
		t.Errorf("rewritten job %s", out)
	}
	if _, err := rewriteJob([]byte(`[1]`), nil, nil); err == nil {
		t.Errorf("an array rewritten without error")
	}
}

func FuzzRewriteJob(f *testing.F) {
	f.Add([]byte(`{"jobType":"build-file","file":{"contentUrl":"u"},"stringsUrl":"s"}`))
	f.Add([]byte(`{"file":[],"stringsUrl":1}`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, job []byte) {
		out, err := rewriteJob(job, []byte(`[]`), []byte("YQ=="))
		if err == nil && !json.Valid(out) {
			t.Fatalf("rewriteJob(%q) = %q, not JSON", job, out)
		}
		if err != nil && strings.Contains(err.Error(), string(job)) && len(job) > 8 {
			t.Fatalf("error %q quotes the job", err)
		}
	})
}

func TestContractAsksForAnUncompressedAnswer(t *testing.T) {
	var got []string
	app := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		got = r.Header.Values("Accept-Encoding")
		w.Write([]byte(`{"error":{"message":"no"}}`))
		return nil
	})
	l := newTestLimits(t, &ServiceLimits{Contract: "custom-file-format"})
	req := httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader(
		`{"jobType":"parse-file","organization":{},"project":{},"file":{"content":""},"sourceLanguage":{},"targetLanguages":[]}`))
	req.Header.Set("Accept-Encoding", "gzip, br")
	rec := httptest.NewRecorder()
	if err := l.ServeHTTP(rec, req, app); err != nil || rec.Code != 200 {
		t.Fatalf("%v %d %s", err, rec.Code, rec.Body)
	}
	if len(got) != 0 {
		t.Errorf("the app was asked for %q", got)
	}
}

func TestSpillBuffer(t *testing.T) {
	dir := t.TempDir()
	l := newTestLimits(t, &ServiceLimits{
		Contract: "custom-file-format", MaxResponseSize: 1 << 10,
		Spill: &SpillOptions{Dir: dir, MaxSize: 64 << 10, BaseURL: "https://app.example"},
	})
	job := `{"jobType":"build-file","organization":{},"project":{},"file":{},"sourceLanguage":{},"targetLanguages":[],"strings":[]}`
	serve := func(answer string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		err := l.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader(job)),
			caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("X-App", "1")
				io.WriteString(w, answer)
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	small := `{"data":{"content":"YQ=="}}`
	if rec := serve(small); rec.Code != 200 || rec.Body.String() != small || rec.Header().Get("Content-Length") != "27" || rec.Header().Get("X-App") != "1" {
		t.Errorf("small answer: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	content := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 4<<10))
	rec := serve(`{"data":{"content":"` + content + `"}}`)
	if rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), `{"data":{"contentUrl":"https://app.example/servicegate/spill/`) {
		t.Errorf("spilled answer: %d %q", rec.Code, rec.Body)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".bin") {
		t.Errorf("spill dir holds %v, want the one payload", entries)
	}
	huge := strings.Repeat("x", 65<<10)
	if rec := serve(`{"data":{"content":"` + huge + `"}}`); rec.Code != 502 || !strings.Contains(errorMessage(t, rec.Body.Bytes()), "at most 64 KB") {
		t.Errorf("answer over spill_max_size: %d %q", rec.Code, rec.Body)
	}
	// a breach found on disk is answered like one found in memory
	if rec := serve(`{"data":{"content":"` + content + `!"}}`); rec.Code != 502 || !strings.Contains(errorMessage(t, rec.Body.Bytes()), "not base64") {
		t.Errorf("breach in a large answer: %d %q", rec.Code, rec.Body)
	}
}
