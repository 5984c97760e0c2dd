package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/queue"
)

// queueApp is the app behind a queue: it can be down (nothing listening on
// its port), and records what reaches it.
type queueApp struct {
	addr   string
	answer func(r *http.Request) int

	mu       sync.Mutex
	srv      *http.Server
	got      map[string][]string // organization → bodies acknowledged, in order
	ids      map[string]int      // delivery id → times acknowledged
	attempts []string            // X-Servicegate-Attempt of every request
	header   http.Header
	host     string // the Host of the last delivery acknowledged
}

func newQueueApp(t *testing.T) *queueApp {
	a := &queueApp{addr: "127.0.0.1:" + strconv.Itoa(freePort()), got: map[string][]string{}, ids: map[string]int{}}
	a.answer = func(*http.Request) int { return http.StatusOK }
	t.Cleanup(a.down)
	return a
}

func (a *queueApp) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status := a.answer(r)
		a.mu.Lock()
		a.attempts = append(a.attempts, r.Header.Get(queue.HeaderAttempt))
		if status/100 == 2 {
			org := r.Header.Get("X-Service-Domain")
			a.got[org] = append(a.got[org], string(body))
			a.ids[r.Header.Get(queue.HeaderDeliveryID)]++
			a.header = r.Header.Clone()
			a.host = r.Host
		}
		a.mu.Unlock()
		w.WriteHeader(status)
	})}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	go srv.Serve(ln)
}

func (a *queueApp) down() {
	a.mu.Lock()
	srv := a.srv
	a.srv = nil
	a.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

func (a *queueApp) delivered(org string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got[org])
}

// distinct counts the deliveries acknowledged at least once.
func (a *queueApp) distinct() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

func (a *queueApp) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, b := range a.got {
		n += len(b)
	}
	return n
}

// queueSite is a site whose /webhooks/* queue deliveries to app, on disk
// in dir (in the servicegate app's Redis when dir is "").
func queueSite(app *queueApp, dir, extra string) string {
	if dir != "" {
		dir = "dir " + dir
	}
	return `
localhost:{port} {
	route /webhooks/* {
		service_webhook {
			secret demo-app-secret
			events project.translated project.approved
			queue {
				to http://` + app.addr + `
				` + dir + `
				` + extra + `
			}
		}
	}
}
`
}

func sendQueued(t *testing.T, path, org, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, answer, err := emulator.SendDelivery(ctx, noRedirects, e2eURL(path), emulator.Delivery{
		Body: []byte(body), Secret: "demo-app-secret", OrganizationID: "1", Domain: org, ModuleKey: "events-hook",
	})
	if err != nil {
		t.Fatal(err)
	}
	return status, string(answer)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queuedDelivery(i int) string {
	return fmt.Sprintf(`{"events":[{"event":"project.translated","project":{"id":"%d"},"targetLanguage":{"id":"uk"}}]}`, i)
}

// TestWebhookQueueAppDownE2E: with the app down, the service still gets
// 2xx; once the app is back every delivery reaches it, bytes identical, in
// order per organization; a refused delivery never enters the queue.
func TestWebhookQueueAppDownE2E(t *testing.T) {
	app := newQueueApp(t)
	startCaddy(t, queueSite(app, t.TempDir(), ""))

	want := map[string][]string{}
	for i := range 40 {
		org := fmt.Sprintf("org%d.example", i%4)
		body := queuedDelivery(i)
		want[org] = append(want[org], body)
		status, answer := sendQueued(t, "/webhooks/in", org, body)
		var ack struct{ Status, ID string }
		if status != http.StatusAccepted || json.Unmarshal([]byte(answer), &ack) != nil || ack.Status != "queued" || ack.ID == "" {
			t.Fatalf("delivery %d: %d %s", i, status, answer)
		}
	}
	// A delivery that fails verification is refused, not queued.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, _, _ := emulator.SendDelivery(ctx, noRedirects, e2eURL("/webhooks/in"), emulator.Delivery{
		Body: []byte(queuedDelivery(99)), Secret: "wrong", Domain: "org0.example",
	})
	if status != http.StatusUnauthorized {
		t.Fatalf("a forged delivery: %d", status)
	}

	time.Sleep(300 * time.Millisecond) // a few failed attempts
	app.up(t)
	waitUntil(t, "every delivery", func() bool { return app.total() == 40 })
	for org, bodies := range want {
		if got := app.delivered(org); !slices.Equal(got, bodies) {
			t.Errorf("%s got %d deliveries out of order or changed:\n%v\nwant\n%v", org, len(got), got, bodies)
		}
	}
	app.mu.Lock()
	h := app.header
	for id, n := range app.ids {
		if n != 1 {
			t.Errorf("delivery %s acknowledged %d times", id, n)
		}
	}
	app.mu.Unlock()
	if h.Get("X-Service-Signature") == "" || h.Get("X-Module-Key") != "events-hook" || h.Get("User-Agent") != "Service-Webhook" {
		t.Errorf("the app did not get the delivery's headers: %v", h)
	}
}

// TestWebhookQueueDeadLetterReplayE2E: an app answering 4xx makes a dead
// letter at once; the admin API lists it (metadata only) and replays it.
func TestWebhookQueueDeadLetterReplayE2E(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		deadLetterReplay(t, func(app *queueApp) { startCaddy(t, queueSite(app, t.TempDir(), "")) }, "/")
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		deadLetterReplay(t, func(app *queueApp) {
			startCaddyWithGlobal(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\ttimeout 2s\n\t}", queueSite(app, "", ""))
		}, "redis "+srv.Addr+" servicegate:{queue:http://")
	})
}

// deadLetterReplay runs the dead letter test against the Caddy start
// starts; where is how the listing names the queue's place.
func deadLetterReplay(t *testing.T, start func(app *queueApp), where string) {
	app := newQueueApp(t)
	var mu sync.Mutex
	broken := true
	app.answer = func(*http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if broken {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	}
	app.up(t)
	start(app)
	admin := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, fmt.Sprintf("http://localhost:%d%s", e2eAdminPort, path), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := queuedDelivery(1)
	if status, answer := sendQueued(t, "/webhooks/in", "acme.example", body); status != http.StatusAccepted {
		t.Fatalf("%d %s", status, answer)
	}
	var listing struct {
		Queues []struct {
			Dir        string       `json:"dir"`
			Deliveries []queue.Meta `json:"deliveries"`
		} `json:"queues"`
	}
	waitUntil(t, "a dead letter", func() bool {
		_, out := admin("GET", "/service/webhook/dead")
		listing.Queues = nil
		return json.Unmarshal([]byte(out), &listing) == nil && len(listing.Queues) > 0 && len(listing.Queues[0].Deliveries) == 1
	})
	_, out := admin("GET", "/service/webhook/dead")
	if strings.Contains(out, "project.translated") || strings.Contains(out, emulator.SignDelivery([]byte(body), "demo-app-secret")) {
		t.Errorf("the listing shows a body or a signature: %s", out)
	}
	if !strings.HasPrefix(listing.Queues[0].Dir, where) {
		t.Errorf("the queue is listed as %q, want %s…", listing.Queues[0].Dir, where)
	}
	dead := listing.Queues[0].Deliveries[0]
	if dead.LastStatus != 422 || dead.Organization != "acme.example" || dead.URI != "/webhooks/in" {
		t.Errorf("dead letter %+v", dead)
	}

	mu.Lock()
	broken = false
	mu.Unlock()
	if status, out := admin("POST", "/service/webhook/dead/replay?id="+dead.ID); status != 200 {
		t.Fatalf("replay: %d %s", status, out)
	}
	waitUntil(t, "the replay", func() bool { return len(app.delivered("acme.example")) == 1 })
	if got := app.delivered("acme.example"); got[0] != body {
		t.Errorf("replayed body %q", got[0])
	}
	if status, _ := admin("POST", "/service/webhook/dead/replay?id="+dead.ID); status != http.StatusNotFound {
		t.Errorf("a second replay of the same letter: %d", status)
	}
	if status, _ := admin("DELETE", "/service/webhook/dead?id=nope"); status != http.StatusNotFound {
		t.Errorf("dropping an unknown letter: %d", status)
	}
}

// TestWebhookQueueReloadE2E: a reload while deliveries wait loses none and
// starts no second set of workers (each delivery reaches the app once), on
// disk and in Redis.
func TestWebhookQueueReloadE2E(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		dir := t.TempDir()
		reloadMidQueue(t, "", func(app *queueApp) string { return queueSite(app, dir, "concurrency 2") })
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		reloadMidQueue(t, "\tservicegate {\n\t\tredis "+srv.URL()+"\n\t\ttimeout 2s\n\t}",
			func(app *queueApp) string { return queueSite(app, "", "concurrency 2") })
	})
}

// reloadMidQueue queues 20 deliveries for an app that is down, reloads
// Caddy with global (extra global options) and the sites of site, queues
// 10 more and starts the app: it must get the 30 once each, in order.
func reloadMidQueue(t *testing.T, global string, site func(app *queueApp) string) {
	app := newQueueApp(t)
	tester := startCaddyWithGlobal(t, global, site(app))
	for i := range 20 {
		if status, answer := sendQueued(t, "/webhooks/in", "acme.example", queuedDelivery(i)); status != http.StatusAccepted {
			t.Fatalf("%d %s", status, answer)
		}
	}
	// The same queue under a changed config (another route): a reload.
	sites := strings.Replace(site(app), "route /webhooks/*", "route /*", 1)
	g := strings.TrimSuffix(e2eGlobal(), "}\n") + global + "\n}\n"
	loadCaddyfile(tester, g+strings.ReplaceAll(sites, "{port}", strconv.Itoa(e2eHTTPPort)))
	// The connections kept alive before the reload belong to the old
	// config's server, which closes them: a POST sent on one as it closes
	// ends in EOF and is not retried. The service opens new ones.
	noRedirects.CloseIdleConnections()
	for i := 20; i < 30; i++ {
		if status, answer := sendQueued(t, "/hooks/in", "acme.example", queuedDelivery(i)); status != http.StatusAccepted {
			t.Fatalf("after the reload: %d %s", status, answer)
		}
	}
	app.up(t)
	waitUntil(t, "every delivery", func() bool { return app.total() >= 30 })
	time.Sleep(200 * time.Millisecond)
	got := app.delivered("acme.example")
	if len(got) != 30 {
		t.Fatalf("%d deliveries reached the app, want 30", len(got))
	}
	for i, b := range got {
		if b != queuedDelivery(i) {
			t.Fatalf("delivery %d out of order: %s", i, b)
		}
	}
}
