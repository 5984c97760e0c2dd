package cluster

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestClusterSpillLinkMintedOnOneInstanceDownloadsOnTheOtherOnce runs two
// instances whose service_limits spill to the shared Redis: the link of an
// answer spilled by instance 1 downloads on instance 2, and only once.
func TestClusterSpillLinkMintedOnOneInstanceDownloadsOnTheOtherOnce(t *testing.T) {
	srv := startRedis(t)
	if testing.Short() {
		t.Skip("cluster test: skipped in -short mode")
	}
	content := bytes.Repeat([]byte("servicegate spill "), 150_000) // 2.7 MB: 3.6 MB in base64
	answer := []byte(`{"data":{"content":"` + base64.StdEncoding.EncodeToString(content) + `"}}`)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	t.Cleanup(app.Close)

	var instances [2]*caddy
	for i := range instances {
		port := freePort(t)
		instances[i] = startCaddy(t, fmt.Sprintf("instance-%d", i+1), fmt.Sprintf(`	servicegate {
		%s
		timeout 2s
	}
}
http://127.0.0.1:%d {
	bind 127.0.0.1
	route {
		service_limits {
			contract custom-file-format
			max_response_size 1MB
			spill
			spill_dir %s
			spill_key cluster-spill-key-0123456789abcdef
		}
		reverse_proxy %s
	}
}
`, srv.ServicegateOption(), port, t.TempDir(), strings.TrimPrefix(app.URL, "http://")), port)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	job, _ := json.Marshal(map[string]any{
		"jobType":         "build-file",
		"organization":    map[string]any{"id": 1, "domain": "acme"},
		"project":         map[string]any{"id": 2, "name": "Site"},
		"file":            map[string]any{"id": 3, "name": "site.kv"},
		"sourceLanguage":  map[string]any{"id": "en", "pluralCategoryNames": []string{"one", "other"}},
		"targetLanguages": []any{map[string]any{"id": "uk", "pluralCategoryNames": []string{"one", "few", "many", "other"}}},
		"strings":         []any{},
	})
	resp, err := client.Post(fmt.Sprintf("http://127.0.0.1:%d/build", instances[0].port), "application/json", bytes.NewReader(job))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct {
		Data struct {
			ContentURL string `json:"contentUrl"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &a) != nil || a.Data.ContentURL == "" {
		t.Fatalf("spilled answer from instance 1: %d %.300s", resp.StatusCode, body)
	}
	u, err := url.Parse(a.Data.ContentURL)
	if err != nil {
		t.Fatal(err)
	}
	download := func(c *caddy) (int, []byte) {
		t.Helper()
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", c.port, u.RequestURI()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	status, got := download(instances[1])
	if status != 200 || !bytes.Equal(got, content) {
		t.Fatalf("download on instance 2 of instance 1's link: %d, %d bytes, want 200 and the %d bytes of the content", status, len(got), len(content))
	}
	for i, c := range instances {
		if status, b := download(c); status != 403 && status != 410 {
			t.Errorf("second download, on instance %d: %d %.200s, want it refused", i+1, status, b)
		}
	}
	if n := srv.Dbsize(t); n != 0 {
		t.Errorf("%d keys left in Redis after the download", n)
	}
}
