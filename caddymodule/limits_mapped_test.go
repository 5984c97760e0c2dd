package caddymodule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/limits/limitstest"
)

// earlyApp answers every request at once, with a small answer of declared
// length, and only then reads the body, checking it against the SHA-256 the
// client put in X-Sum: a body whose memory was given back (and reused by
// another request) while the transport was still sending it would reach
// it changed.
type earlyApp struct {
	*httptest.Server
	mu       sync.Mutex
	complete int // bodies read whole
	wrong    int // bodies read whole that were not what the client sent
}

func newEarlyApp(t *testing.T) *earlyApp {
	a := &earlyApp{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", "2")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
		_ = http.NewResponseController(w).Flush()
		// Caddy has the answer, and its handlers return while its
		// transport still sends the body (more than the socket buffers
		// hold); it may give up on the connection instead.
		time.Sleep(10 * time.Millisecond)
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil || n != r.ContentLength {
			return // cut off: the transport gave up on the connection
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.complete++
		if hex.EncodeToString(h.Sum(nil)) != r.Header.Get("X-Sum") {
			a.wrong++
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// Bodies in mappings outlive the handler while reverse_proxy's transport
// still sends them (the app answered first); many at once, so that a
// mapping given back early would be taken by another body. Every body the
// app reads whole is as its client sent it, and every mapping is given
// back. (The transport may cut a body off once the answer is in: see
// TestMappedBodyOutlivesHandler for one that must arrive whole.)
func TestE2EMappedBodiesOutliveTheHandler(t *testing.T) {
	app := newEarlyApp(t)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	route /webhooks {
		service_webhook {
			secret %s
		}
		reverse_proxy %s
	}
	route /file-format {
		service_limits
		reverse_proxy %s
	}
}
`, appSecret, app.Listener.Addr(), app.Listener.Addr()))
	before := limits.MappingsInUse()
	var wg sync.WaitGroup
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte(fmt.Sprintf(`{"events":[%08d]}`, i)), (4<<20+i*40_000)/19)
			sum := sha256.Sum256(body)
			path := "/webhooks"
			var rd io.Reader = bytes.NewReader(body)
			if i%2 == 1 {
				path = "/file-format"
				rd = io.MultiReader(rd) // unknown length: read whole first
			}
			req, _ := http.NewRequest(http.MethodPost, e2eURL(path), rd)
			req.Header.Set("X-Sum", hex.EncodeToString(sum[:]))
			req.Header.Set("X-Service-Signature", hmacHex(appSecret, body))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || string(answer) != "ok" {
				errs <- fmt.Errorf("%s: status %d, %q", path, res.StatusCode, answer)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	limitstest.MappingsBack(t, before)
	app.mu.Lock()
	defer app.mu.Unlock()
	t.Logf("the app read %d of %d bodies whole after it answered", app.complete, n)
	if app.wrong > 0 {
		t.Fatalf("%d bodies reached the app changed", app.wrong)
	}
}

// A client that sends a large job and goes away before the answer: the
// job's and the answer's mappings are given back.
func TestE2EMappedBuffersClientGone(t *testing.T) {
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, _ := io.Copy(io.Discard, r.Body); n == 0 {
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(2<<20))
		_, _ = w.Write(make([]byte, 1<<20))
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write(make([]byte, 1<<20))
	}))
	defer app.Close()
	defer close(release)
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_limits
	reverse_proxy %s
}
`, app.Listener.Addr()))
	before := limits.MappingsInUse()
	client := &http.Client{Timeout: 300 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, e2eURL("/file-format"), io.MultiReader(bytes.NewReader(make([]byte, 3<<20))))
	if res, err := client.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d before the app was done", res.StatusCode)
	}
	limitstest.MappingsBack(t, before)
	// Caddy is alive and well.
	res, err := http.Post(e2eURL("/file-format"), "application/json", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("then an empty job: status %d", res.StatusCode)
	}
}

// A handler after service_webhook or service_limits that hands the body to
// a goroutine, as http.Transport does, and answers before it is read: the
// goroutine reads the whole body, slowly, after the handlers returned, and
// the mapping is given back once it closes the body.
func TestMappedBodyOutlivesHandler(t *testing.T) {
	body := bytes.Repeat([]byte(`{"events":[]}`), (3<<20)/13)
	webhook := ServiceWebhook{Secrets: []string{appSecret}}
	provisionWebhook(t, &webhook)
	lim := newTestLimits(t, &ServiceLimits{})
	for _, handler := range []string{"service_webhook", "service_limits"} {
		t.Run(handler, func(t *testing.T) {
			limitstest.MappingsBack(t, 0) // what earlier tests left is given back first
			before := limits.MappingsInUse()
			read := make(chan []byte, 1)
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				go func(rc io.ReadCloser) {
					defer rc.Close()
					var got []byte
					buf := make([]byte, 64<<10)
					for {
						time.Sleep(100 * time.Microsecond)
						runtime.GC()
						n, err := rc.Read(buf)
						got = append(got, buf[:n]...)
						if err != nil {
							break
						}
					}
					read <- got
				}(r.Body)
				w.WriteHeader(http.StatusAccepted)
				return nil
			})
			req := httptest.NewRequest(http.MethodPost, "/webhooks", io.MultiReader(bytes.NewReader(body)))
			req.Header.Set("X-Service-Signature", hmacHex(appSecret, body))
			rec := httptest.NewRecorder()
			var err error
			if handler == "service_webhook" {
				err = webhook.ServeHTTP(rec, req, next)
			} else {
				err = lim.ServeHTTP(rec, req, next)
			}
			if err != nil || rec.Code != http.StatusAccepted {
				t.Fatalf("status %d, %v", rec.Code, err)
			}
			if n := limits.MappingsInUse(); n != before+1 {
				t.Errorf("%d mapped buffers in use while the body is read, want %d", n, before+1)
			}
			if got := <-read; !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes after the handlers returned, want the %d sent", len(got), len(body))
			}
			limitstest.MappingsBack(t, before)
		})
	}
}

// A delivery stored by the webhook queue is the one verified, though its
// mapping is reused by the next body as soon as the handler returns: the
// queue keeps a copy, never the handler's bytes.
func TestWebhookQueueKeepsNoMappedBytes(t *testing.T) {
	got := make(chan []byte, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	defer app.Close()
	m := ServiceWebhook{Secrets: []string{appSecret}, Queue: &WebhookQueue{To: app.URL, Dir: t.TempDir()}}
	provisionWebhook(t, &m)
	body := bytes.Repeat([]byte(`{"events":[1]}`), (2<<20)/14)
	req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
	req.Header.Set("X-Service-Signature", hmacHex(appSecret, body))
	req.Header.Set("X-Service-Domain", "acme.example")
	rec := httptest.NewRecorder()
	if err := m.ServeHTTP(rec, req, nil); err != nil || rec.Code != http.StatusAccepted {
		t.Fatalf("status %d, %v", rec.Code, err)
	}
	// The next bodies take the spare mapping and write over it.
	for range 3 {
		other := bytes.Repeat([]byte("X"), len(body))
		b, err := limits.ReadAll(bytes.NewReader(other), int64(len(other)), 5<<20)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		_ = b.Close()
	}
	select {
	case delivered := <-got:
		if !bytes.Equal(delivered, body) {
			t.Fatalf("the app got another delivery (%d bytes) than the one verified (%d)", len(delivered), len(body))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued delivery never reached the app")
	}
}

// When the app cannot be reached, reverse_proxy's transport never reads the
// body and leaves it open (so that a retry could send it): nobody closes
// it, and its mapping is given back by the garbage collector.
func TestE2EMappedBodyOfUnreachableApp(t *testing.T) {
	startCaddy(t, fmt.Sprintf(`
localhost:{port} {
	service_webhook /webhooks {
		secret %s
	}
	reverse_proxy 127.0.0.1:%d
}
`, appSecret, freePort()))
	limitstest.MappingsBack(t, 0)
	body := bytes.Repeat([]byte(`{"events":[2]}`), (3<<20)/14)
	for range 4 {
		status, answer := deliver(t, "/webhooks", body, false, map[string]string{"X-Service-Signature": hmacHex(appSecret, body)})
		if status != http.StatusBadGateway {
			t.Fatalf("status %d (%s), want 502: the app is not there", status, answer)
		}
	}
	t.Logf("%d mapped bodies left open by the transport until the garbage collector runs", limits.MappingsInUse())
	limitstest.MappingsBack(t, 0)
}
