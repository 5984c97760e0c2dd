package caddymodule

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

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

// TestSpillSweeperStopsAtCleanup: the sweeping of expired payloads on disk
// ends with Cleanup, as the config that started it is unloaded, even when
// Cleanup is called before the config's context ends (service_app cleans
// its handlers up itself).
func TestSpillSweeperStopsAtCleanup(t *testing.T) {
	sweepers := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "created by github.com/servicegate/servicegate/modulecall.NewHandler")
	}
	// An earlier test's sweeper may still be ending: count once the
	// number holds still.
	before := sweepers()
	for i := 0; i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		n := sweepers()
		if n == before {
			break
		}
		before = n
	}
	l := newTestLimits(t, &ServiceLimits{
		Contract: "custom-file-format",
		Spill:    &SpillOptions{Dir: t.TempDir(), BaseURL: "https://app.example"},
	})
	if n := sweepers(); n != before+1 {
		t.Fatalf("%d sweepers running once provisioned, want %d", n, before+1)
	}
	c, ok := any(l).(caddy.CleanerUpper)
	if !ok {
		t.Fatal("service_limits has no Cleanup")
	}
	if err := c.Cleanup(); err != nil {
		t.Fatal(err)
	}
	// The sweeper has ended when Cleanup returns; its goroutine is gone a
	// moment later.
	for i := 0; sweepers() > before && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := sweepers(); n != before {
		t.Errorf("%d sweepers running after Cleanup, want %d", n, before)
	}
}
