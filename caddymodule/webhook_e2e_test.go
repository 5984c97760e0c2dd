package caddymodule

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// e2eApp is a real app behind reverse_proxy that records every delivery it
// gets.
type e2eApp struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries []e2eDelivery
}

type e2eDelivery struct {
	body   []byte
	header http.Header
}

func newE2EApp(t *testing.T) *e2eApp {
	a := &e2eApp{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("app: reading the delivery: %v", err)
		}
		a.mu.Lock()
		a.deliveries = append(a.deliveries, e2eDelivery{body: body, header: r.Header.Clone()})
		a.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *e2eApp) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.deliveries)
}

func (a *e2eApp) last() e2eDelivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deliveries[len(a.deliveries)-1]
}

func (a *e2eApp) addr() string { return strings.TrimPrefix(a.URL, "http://") }

// deliver posts body to path with the service's headers; chunked sends it
// without Content-Length.
func deliver(t *testing.T, path string, body []byte, chunked bool, header map[string]string) (int, string) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // unknown length: sent chunked
	}
	req, err := http.NewRequest(http.MethodPost, e2eURL(path), r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "Service-Webhook")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

func signed(secret string, body []byte, more ...string) map[string]string {
	h := map[string]string{"X-Service-Signature": hmacHex(secret, body), "X-Service-Id": "1234", "X-Module-Key": "events-hook"}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

func TestE2EWebhook(t *testing.T) {
	app := newE2EApp(t)
	dir := t.TempDir()
	secretsFile := filepath.Join(dir, "secrets.json")
	writeFile(t, secretsFile, `{"acme.example": ["acme-secret-1"]}`)
	t.Setenv("SERVICEGATE_E2E_WEBHOOK_SECRET", appSecret)

	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	route /webhooks {
		service_webhook {
			secret {env.SERVICEGATE_E2E_WEBHOOK_SECRET}
			secret %[2]s
			secrets_file %[3]s
			secrets_poll 50ms
			module_key events-hook
			events project.translated project.approved
			max_size 64KiB
		}
		reverse_proxy %[1]s
	}
	route /raw {
		service_webhook {
			secret %[4]s
			max_size 1KiB
		}
		reverse_proxy %[1]s
	}
}
`, app.addr(), nextSecret, secretsFile, appSecret))

	// Odd but valid JSON: spacing, escapes, non-ASCII, a trailing newline.
	body := []byte("{\"events\" : [ {\"event\":\"project.translated\",\"project\":{\"id\":\"7\",\"name\":\"Caf\\u00e9 \xc3\xa9\"}},\n\t{\"event\":\"project.approved\"} ] }\n")

	t.Run("accepted delivery reaches the app byte for byte", func(t *testing.T) {
		for _, chunked := range []bool{false, true} {
			before := app.count()
			status, answer := deliver(t, "/webhooks", body, chunked, signed(appSecret, body, "X-Service-Domain", "other.example"))
			if status != http.StatusAccepted {
				t.Fatalf("chunked=%v: status %d (%s), want the app's 202", chunked, status, answer)
			}
			if app.count() != before+1 {
				t.Fatalf("chunked=%v: the app got %d deliveries, want 1", chunked, app.count()-before)
			}
			got := app.last()
			if !bytes.Equal(got.body, body) {
				t.Fatalf("chunked=%v: the app got %q, want %q", chunked, got.body, body)
			}
			for k, v := range map[string]string{
				"X-Service-Signature": hmacHex(appSecret, body), "X-Service-Id": "1234", "X-Service-Domain": "other.example",
				"X-Module-Key": "events-hook", "User-Agent": "Service-Webhook", "Content-Type": "application/json",
			} {
				if got.header.Get(k) != v {
					t.Fatalf("chunked=%v: the app got %s %q, want %q", chunked, k, got.header.Get(k), v)
				}
			}
		}
	})

	tampered := bytes.Replace(body, []byte(`"7"`), []byte(`"8"`), 1)
	big := bytes.Repeat([]byte("a"), 100<<10)
	rawBody := []byte("not even JSON, and that is fine without events")
	refusals := []struct {
		name    string
		path    string
		body    []byte
		chunked bool
		header  map[string]string
		status  int
	}{
		{"tampered body", "/webhooks", tampered, false, signed(appSecret, body), 401},
		{"no signature", "/webhooks", body, false, map[string]string{"X-Module-Key": "events-hook"}, 401},
		{"malformed signature", "/webhooks", body, false, signed(appSecret, body, "X-Service-Signature", "sha256=zzzz"), 401},
		{"unknown secret", "/webhooks", body, false, signed("a-guess", body), 401},
		{"oversize with Content-Length", "/webhooks", big, false, signed(appSecret, big), 413},
		{"oversize chunked", "/webhooks", big, true, signed(appSecret, big), 413},
		{"module key not allowed", "/webhooks", body, false, signed(appSecret, body, "X-Module-Key", "other-hook"), 403},
		{"event not allowed", "/webhooks", []byte(`{"events":[{"event":"project.deleted"}]}`), false,
			signed(appSecret, []byte(`{"events":[{"event":"project.deleted"}]}`)), 403},
		{"body of the wrong shape", "/webhooks", rawBody, false, signed(appSecret, rawBody), 400},
		{"organization in the file: the app secret does not apply", "/webhooks", body, false,
			signed(appSecret, body, "X-Service-Domain", "acme.example"), 401},
		{"oversize on another route", "/raw", bytes.Repeat([]byte("b"), 2048), true, signed(appSecret, bytes.Repeat([]byte("b"), 2048)), 413},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			before := app.count()
			status, answer := deliver(t, tt.path, tt.body, tt.chunked, tt.header)
			if status != tt.status {
				t.Fatalf("status %d (%s), want %d", status, answer, tt.status)
			}
			if !strings.HasPrefix(answer, `{"error":{"message":"`) {
				t.Fatalf("answer %q is not a JSON refusal", answer)
			}
			if app.count() != before {
				t.Fatal("the app saw a refused delivery")
			}
		})
	}

	t.Run("rotation: old and new secret both pass", func(t *testing.T) {
		for _, secret := range []string{appSecret, nextSecret} {
			if status, answer := deliver(t, "/webhooks", body, false, signed(secret, body)); status != http.StatusAccepted {
				t.Fatalf("status %d (%s)", status, answer)
			}
		}
	})

	t.Run("per-organization secret", func(t *testing.T) {
		status, answer := deliver(t, "/webhooks", body, false, signed("acme-secret-1", body, "X-Service-Domain", "acme.example"))
		if status != http.StatusAccepted {
			t.Fatalf("status %d (%s)", status, answer)
		}
		if status, _ := deliver(t, "/webhooks", body, false, signed("acme-secret-1", body, "X-Service-Domain", "other.example")); status != 401 {
			t.Fatalf("another organization passed with acme's secret: %d", status)
		}
	})

	t.Run("no module key checks or shape on a route without them", func(t *testing.T) {
		status, answer := deliver(t, "/raw", rawBody, false, map[string]string{"X-Service-Signature": hmacBase64URL(appSecret, rawBody)})
		if status != http.StatusAccepted || !bytes.Equal(app.last().body, rawBody) {
			t.Fatalf("status %d (%s)", status, answer)
		}
	})

	t.Run("secrets file reload", func(t *testing.T) {
		// A broken file keeps the last good secrets.
		writeFile(t, secretsFile, `{"acme.example": [`)
		bump(t, secretsFile, 1)
		time.Sleep(300 * time.Millisecond) // several polls
		if status, _ := deliver(t, "/webhooks", body, false, signed("acme-secret-1", body, "X-Service-Domain", "acme.example")); status != http.StatusAccepted {
			t.Fatalf("a broken secrets file dropped the last good secrets: %d", status)
		}
		writeFile(t, secretsFile, `{"acme.example": "acme-secret-2"}`)
		bump(t, secretsFile, 2)
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, _ := deliver(t, "/webhooks", body, false, signed("acme-secret-2", body, "X-Service-Domain", "acme.example"))
			if status == http.StatusAccepted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the new secret never passed; last status %d", status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if status, _ := deliver(t, "/webhooks", body, false, signed("acme-secret-1", body, "X-Service-Domain", "acme.example")); status != 401 {
			t.Fatalf("the replaced secret still passes: %d", status)
		}
	})

	t.Run("deliveries are counted in the metrics", func(t *testing.T) {
		resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", e2eAdminPort))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		metrics, _ := io.ReadAll(resp.Body)
		for _, outcome := range []string{"accepted", "too_large", "bad_signature", "missing_signature", "forbidden", "bad_body"} {
			if !bytes.Contains(metrics, []byte(`servicegate_webhook_deliveries_total{outcome="`+outcome+`"}`)) {
				t.Errorf("no %s count in the metrics", outcome)
			}
		}
	})
}

func TestE2EWebhookWithErrorRoutes(t *testing.T) {
	app := newE2EApp(t)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	route /webhooks {
		service_webhook {
			secret %s
		}
		reverse_proxy %s
	}
	handle_errors {
		respond "refused {err.status_code}: {err.message}" {err.status_code}
	}
}
`, appSecret, app.addr()))
	status, answer := deliver(t, "/webhooks", delivery, false, map[string]string{"X-Service-Signature": hmacHex("a-guess", delivery)})
	if status != http.StatusUnauthorized || !strings.HasPrefix(answer, "refused 401: ") {
		t.Fatalf("status %d, answer %q; want the handle_errors route's 401", status, answer)
	}
	if app.count() != 0 {
		t.Fatal("the app saw a refused delivery")
	}
}

func TestE2EWebhookDefaultLimitIs5MiB(t *testing.T) {
	app := newE2EApp(t)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_webhook /webhooks {
		secret %s
	}
	reverse_proxy %s
}
`, appSecret, app.addr()))
	limit := bytes.Repeat([]byte("5"), 5<<20)
	for _, chunked := range []bool{false, true} {
		status, answer := deliver(t, "/webhooks", limit, chunked, map[string]string{"X-Service-Signature": hmacHex(appSecret, limit)})
		if status != http.StatusAccepted || !bytes.Equal(app.last().body, limit) {
			t.Fatalf("chunked=%v: a 5 MiB delivery: status %d (%s)", chunked, status, answer)
		}
	}
	over := append(limit, '!')
	for _, chunked := range []bool{false, true} {
		before := app.count()
		status, _ := deliver(t, "/webhooks", over, chunked, map[string]string{"X-Service-Signature": hmacHex(appSecret, over)})
		if status != http.StatusRequestEntityTooLarge || app.count() != before {
			t.Fatalf("chunked=%v: 5 MiB and one byte: status %d, app deliveries %d", chunked, status, app.count()-before)
		}
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

// TestE2EWebhookOrganizationHeaders is issue 13 #4: a delivery signed with
// organization A's secret never reaches the app with the X-Service-Id of
// organization B.
func TestE2EWebhookOrganizationHeaders(t *testing.T) {
	app := newE2EApp(t)
	secretsFile := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, secretsFile, `{"a.example":"secret-a","1":"secret-a","b.example":"secret-b","2":"secret-b"}`)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_webhook /webhooks {
		secrets_file %s
	}
	reverse_proxy %s
}
`, secretsFile, app.addr()))
	body := []byte(`{"events":[{"event":"project.translated"}]}`)
	header := func(id string) map[string]string {
		h := map[string]string{"X-Service-Signature": hmacHex("secret-a", body), "X-Service-Domain": "a.example"}
		if id != "" {
			h["X-Service-Id"] = id
		}
		return h
	}

	t.Run("B's id in the file: refused", func(t *testing.T) {
		before := app.count()
		status, answer := deliver(t, "/webhooks", body, false, header("2"))
		if status != http.StatusForbidden || !strings.Contains(answer, "name different organizations") {
			t.Fatalf("status %d (%s), want 403 naming the two organizations", status, answer)
		}
		if app.count() != before {
			t.Fatal("the app saw the delivery")
		}
	})
	t.Run("an id the file does not list: removed", func(t *testing.T) {
		status, answer := deliver(t, "/webhooks", body, false, header("3"))
		if status != http.StatusAccepted {
			t.Fatalf("status %d (%s)", status, answer)
		}
		if got := app.last().header.Values("X-Service-Id"); len(got) != 0 {
			t.Fatalf("the app got the unverified X-Service-Id %q", got)
		}
		if got := app.last().header.Get("X-Service-Domain"); got != "a.example" {
			t.Fatalf("the app got X-Service-Domain %q", got)
		}
	})
	t.Run("A's own id: kept", func(t *testing.T) {
		status, answer := deliver(t, "/webhooks", body, false, header("1"))
		if status != http.StatusAccepted || app.last().header.Get("X-Service-Id") != "1" {
			t.Fatalf("status %d (%s), X-Service-Id %q", status, answer, app.last().header.Get("X-Service-Id"))
		}
	})
}

// TestE2EWebhookReadTimeout is a delivery that trickles its body: refused
// with 408 once read_timeout passes, and the app never sees it.
func TestE2EWebhookReadTimeout(t *testing.T) {
	app := newE2EApp(t)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_webhook /webhooks {
		secret %s
		read_timeout 1s
	}
	reverse_proxy %s
}
`, appSecret, app.addr()))
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", e2eHTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_, err = fmt.Fprintf(conn, "POST /webhooks HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Service-Signature: %s\r\n\r\n{",
		len(delivery), hmacHex(appSecret, delivery))
	if err != nil {
		t.Fatal(err)
	}
	// One more byte now and then, as a slow client sends: the whole body
	// never arrives within the second.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, c := range delivery[1:] {
			select {
			case <-stop:
				return
			case <-time.After(400 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(answer), `"message":"The delivery did not arrive in full within 1 second.`) {
		t.Fatalf("status %d (%s), want 408 with a JSON message", resp.StatusCode, answer)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the refusal took %s", took)
	}
	if app.count() != 0 {
		t.Fatal("the app saw the delivery")
	}
}
