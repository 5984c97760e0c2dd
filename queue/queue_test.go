package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openStore(t *testing.T, path string) *BoltStore {
	t.Helper()
	s, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func delivery(org, body string) *Delivery {
	return &Delivery{
		Meta:   Meta{Organization: org, To: "http://app", Method: "POST", URI: "/webhooks", Received: time.Now()},
		Header: http.Header{"X-Service-Signature": {"sig-" + body}, "X-Service-Domain": {org}},
		Body:   []byte(body),
	}
}

func TestBoltStoreLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	s := openStore(t, path)
	a, b := delivery("a.example", `{"events":[1]}`), delivery("b.example", `{"events":[2]}`)
	for _, d := range []*Delivery{a, b} {
		if err := s.Add(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	if a.ID == "" || a.ID == b.ID || a.Seq >= b.Seq || a.Size != len(a.Body) {
		t.Fatalf("ids %q %q seqs %d %d", a.ID, b.ID, a.Seq, b.Seq)
	}
	h, body, err := s.Payload(a.ID)
	if err != nil || string(body) != `{"events":[1]}` || h.Get("X-Service-Signature") != `sig-{"events":[1]}` {
		t.Fatalf("payload %v %q %v", h, body, err)
	}
	a.Attempts, a.LastStatus = 1, 503
	if err := s.Update(a.Meta); err != nil {
		t.Fatal(err)
	}
	if err := s.Bury(b.Meta); err != nil {
		t.Fatal(err)
	}
	// Everything survives a reopen, and new IDs do not repeat old ones.
	s.Close()
	s = openStore(t, path)
	defer s.Close()
	pending, _ := s.Pending()
	dead, _ := s.Dead()
	if len(pending) != 1 || pending[0].ID != a.ID || pending[0].Attempts != 1 || pending[0].LastStatus != 503 {
		t.Fatalf("pending after reopen: %+v", pending)
	}
	if len(dead) != 1 || dead[0].ID != b.ID {
		t.Fatalf("dead after reopen: %+v", dead)
	}
	c := delivery("a.example", "c")
	if err := s.Add(c, 0); err != nil || c.ID == a.ID || c.ID == b.ID {
		t.Fatalf("new id %q after reopen: %v", c.ID, err)
	}
	m, err := s.Revive(b.ID, time.Now())
	if err != nil || m.Attempts != 0 || m.Dead != "" {
		t.Fatalf("revive: %+v %v", m, err)
	}
	if err := s.Done(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Payload(a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("payload of a delivered delivery: %v", err)
	}
	if err := s.Drop(c.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("dropping a pending delivery: %v", err)
	}
	if _, _, err := s.Payload("not-an-id"); err == nil {
		t.Error("a foreign id was accepted")
	}
}

func TestBoltStoreDedup(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "q.db"))
	defer s.Close()
	now := time.Now()
	add := func(org, body string, at time.Time) error {
		d := delivery(org, body)
		d.Received = at
		return s.Add(d, time.Minute)
	}
	if err := add("a", "x", now); err != nil {
		t.Fatal(err)
	}
	if err := add("a", "x", now.Add(30*time.Second)); !errors.Is(err, ErrDuplicate) {
		t.Errorf("same organization and body within the window: %v", err)
	}
	if err := add("b", "x", now.Add(30*time.Second)); err != nil {
		t.Errorf("another organization: %v", err)
	}
	if err := add("a", "x", now.Add(2*time.Minute)); err != nil {
		t.Errorf("after the window: %v", err)
	}
	if err := s.SweepDedup(now.Add(time.Hour), time.Minute); err != nil {
		t.Fatal(err)
	}
}

// fakeApp answers attempts by a script and records what it was sent.
type fakeApp struct {
	mu      sync.Mutex
	answer  func(m Meta, n int) Result // n counts every attempt seen
	seen    int
	got     map[string][]string // organization → bodies acknowledged, in order
	ids     map[string]string   // organization and body → delivery id
	active  atomic.Int32
	maxSeen atomic.Int32
}

func newFakeApp(answer func(m Meta, n int) Result) *fakeApp {
	return &fakeApp{answer: answer, got: map[string][]string{}, ids: map[string]string{}}
}

func (f *fakeApp) Send(ctx context.Context, m Meta, h http.Header, body []byte) Result {
	n := f.active.Add(1)
	defer f.active.Add(-1)
	for {
		if old := f.maxSeen.Load(); n <= old || f.maxSeen.CompareAndSwap(old, n) {
			break
		}
	}
	f.mu.Lock()
	f.seen++
	seen := f.seen
	key := m.Organization + "\x00" + string(body)
	if id, ok := f.ids[key]; ok && id != m.ID {
		panic("a delivery changed its id between attempts")
	}
	f.ids[key] = m.ID
	f.mu.Unlock()
	r := f.answer(m, seen)
	if r.Delivered() {
		f.mu.Lock()
		f.got[m.Organization] = append(f.got[m.Organization], string(body))
		f.mu.Unlock()
	}
	return r
}

func (f *fakeApp) delivered(org string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got[org])
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func fastOptions() Options {
	return Options{FirstDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
}

// TestQueueAppDownThenUp: every delivery reaches the app once it is back,
// in order per organization, with its bytes and id unchanged.
func TestQueueAppDownThenUp(t *testing.T) {
	var up atomic.Bool
	app := newFakeApp(func(Meta, int) Result {
		if !up.Load() {
			return Result{Err: errors.New("connection refused")}
		}
		return Result{Status: 204}
	})
	var outcomes [NumOutcomes]atomic.Int64
	opts := fastOptions()
	opts.OnOutcome = func(o Outcome) { outcomes[o].Add(1) }
	q, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var want = map[string][]string{}
	for i := range 30 {
		org := fmt.Sprintf("org%d.example", i%3)
		body := fmt.Sprintf(`{"events":[{"n":%d}]}`, i)
		want[org] = append(want[org], body)
		if err := q.Enqueue(delivery(org, body)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "some failed attempts", func() bool { return outcomes[OutcomeRetry].Load() >= 6 })
	up.Store(true)
	waitFor(t, "every delivery", func() bool { return q.Stats().Depth == 0 })
	for org, bodies := range want {
		if got := app.delivered(org); !slices.Equal(got, bodies) {
			t.Errorf("%s got %v, want %v", org, got, bodies)
		}
	}
	if outcomes[OutcomeDelivered].Load() != 30 || outcomes[OutcomeDead].Load() != 0 {
		t.Errorf("outcomes %d delivered, %d dead", outcomes[OutcomeDelivered].Load(), outcomes[OutcomeDead].Load())
	}
}

func TestResultClassification(t *testing.T) {
	for _, c := range []struct {
		r                    Result
		delivered, retryable bool
	}{
		{Result{Status: 200}, true, false},
		{Result{Status: 299}, true, false},
		{Result{Status: 301}, false, false},
		{Result{Status: 400}, false, false},
		{Result{Status: 401}, false, false},
		{Result{Status: 404}, false, false},
		{Result{Status: 408}, false, true},
		{Result{Status: 425}, false, true},
		{Result{Status: 429}, false, true},
		{Result{Status: 500}, false, true},
		{Result{Status: 503}, false, true},
		{Result{Err: context.DeadlineExceeded}, false, true},
	} {
		if c.r.Delivered() != c.delivered || c.r.Retryable() != c.retryable {
			t.Errorf("%+v: delivered %v retryable %v", c.r, c.r.Delivered(), c.r.Retryable())
		}
	}
}

// TestQueueDeadLetterAndReplay: a 4xx is given up at once, without holding
// the organization's later deliveries back, and a replay delivers it.
func TestQueueDeadLetterAndReplay(t *testing.T) {
	var fixed atomic.Bool
	app := newFakeApp(func(m Meta, _ int) Result {
		if m.Organization == "a" && !fixed.Load() && m.Seq == 1 {
			return Result{Status: 422}
		}
		return Result{Status: 200}
	})
	var dead []Meta
	var mu sync.Mutex
	opts := fastOptions()
	opts.OnDead = func(m Meta) { mu.Lock(); dead = append(dead, m); mu.Unlock() }
	q, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, body := range []string{"1", "2"} {
		if err := q.Enqueue(delivery("a", body)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the queue to settle", func() bool { return q.Stats().Depth == 0 })
	if got := app.delivered("a"); !slices.Equal(got, []string{"2"}) {
		t.Fatalf("delivered %v", got)
	}
	letters, _ := q.Dead()
	if len(letters) != 1 || letters[0].LastStatus != 422 || letters[0].Attempts != 1 || letters[0].Dead != "the app answered 422" {
		t.Fatalf("dead letters %+v", letters)
	}
	mu.Lock()
	if len(dead) != 1 || dead[0].ID != letters[0].ID {
		t.Errorf("OnDead saw %+v", dead)
	}
	mu.Unlock()

	fixed.Store(true)
	if n, err := q.ReplayOrganization("a"); n != 1 || err != nil {
		t.Fatalf("replay: %d %v", n, err)
	}
	waitFor(t, "the replay", func() bool { return len(app.delivered("a")) == 2 })
	if letters, _ := q.Dead(); len(letters) != 0 {
		t.Errorf("dead letters after replay: %+v", letters)
	}
	if err := q.Replay("nope"); err == nil {
		t.Error("replay of an unknown id")
	}
}

func TestQueueGivesUp(t *testing.T) {
	app := newFakeApp(func(Meta, int) Result { return Result{Status: 503} })
	opts := fastOptions()
	opts.MaxAttempts = 3
	q, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Enqueue(delivery("a", "x"))
	waitFor(t, "a dead letter", func() bool { d, _ := q.Dead(); return len(d) == 1 })
	d, _ := q.Dead()
	if d[0].Attempts != 3 || d[0].Dead != "not delivered after 3 attempts" {
		t.Errorf("%+v", d[0])
	}

	// Too old: the next retry would come after MaxAge.
	opts = fastOptions()
	opts.MaxAge = 20 * time.Millisecond
	opts.FirstDelay, opts.MaxDelay = 50*time.Millisecond, 50*time.Millisecond
	q2, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	q2.Enqueue(delivery("a", "y"))
	waitFor(t, "a dead letter", func() bool { d, _ := q2.Dead(); return len(d) == 1 })
}

// TestQueueOrderAndFairness: one organization's failing delivery holds its
// own later deliveries back, not the others'; the concurrency cap holds.
func TestQueueOrderAndFairness(t *testing.T) {
	var release atomic.Bool
	app := newFakeApp(func(m Meta, _ int) Result {
		time.Sleep(2 * time.Millisecond)
		if m.Organization == "stuck" && !release.Load() {
			return Result{Status: 500}
		}
		return Result{Status: 200}
	})
	opts := fastOptions()
	opts.Concurrency = 3
	q, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range 5 {
		q.Enqueue(delivery("stuck", fmt.Sprint(i)))
	}
	for i := range 40 {
		q.Enqueue(delivery(fmt.Sprintf("org%d", i%8), fmt.Sprint(i)))
	}
	waitFor(t, "the other organizations", func() bool { return q.Stats().Depth == 5 })
	if got := app.delivered("stuck"); len(got) != 0 {
		t.Fatalf("the stuck organization got %v", got)
	}
	release.Store(true)
	waitFor(t, "the stuck organization", func() bool { return q.Stats().Depth == 0 })
	if got := app.delivered("stuck"); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		t.Errorf("stuck organization order %v", got)
	}
	if m := app.maxSeen.Load(); m > 3 {
		t.Errorf("%d attempts at once, cap 3", m)
	}
}

func TestQueueHonoursRetryAfter(t *testing.T) {
	var first atomic.Int64
	var second atomic.Int64
	app := newFakeApp(func(_ Meta, n int) Result {
		if n == 1 {
			first.Store(time.Now().UnixNano())
			return Result{Status: 429, RetryAfter: 300 * time.Millisecond}
		}
		second.CompareAndSwap(0, time.Now().UnixNano())
		return Result{Status: 200}
	})
	q, err := Open(openStore(t, filepath.Join(t.TempDir(), "q.db")), app, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Enqueue(delivery("a", "x"))
	waitFor(t, "the retry", func() bool { return q.Stats().Depth == 0 })
	if gap := time.Duration(second.Load() - first.Load()); gap < 300*time.Millisecond {
		t.Errorf("retried after %s, Retry-After asked 300ms", gap)
	}
}

// TestQueueCloseKeepsAttemptsUnderWay: deliveries in flight when the queue
// closes are sent again when it opens next.
func TestQueueCloseKeepsAttemptsUnderWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	block := make(chan struct{})
	hang := newFakeApp(func(Meta, int) Result { <-block; return Result{Err: context.Canceled} })
	q, err := Open(openStore(t, path), hang, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		q.Enqueue(delivery(fmt.Sprint(i), "body"))
	}
	waitFor(t, "attempts under way", func() bool { return q.Stats().InFlight == 3 })
	go func() { time.Sleep(20 * time.Millisecond); close(block) }()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	ok := newFakeApp(func(Meta, int) Result { return Result{Status: 200} })
	q, err = Open(openStore(t, path), ok, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	waitFor(t, "redelivery", func() bool { return q.Stats().Depth == 0 })
	for i := range 3 {
		if got := ok.delivered(fmt.Sprint(i)); len(got) != 1 {
			t.Errorf("org %d: %v", i, got)
		}
	}
}

func TestHTTPSender(t *testing.T) {
	type seen struct {
		method, uri, host string
		header            http.Header
		body              []byte
	}
	got := make(chan seen, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), body}
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer app.Close()
	body := []byte("{\"events\":[]}\n ")
	h := http.Header{"X-Service-Signature": {"abc"}, "Connection": {"close"}, "Host": {"app.example"}, "Content-Length": {"999"}}
	res := (&HTTPSender{}).Send(context.Background(), Meta{ID: "e-1", To: app.URL + "/", Method: "POST", URI: "/hooks/a?x=1", Attempts: 2}, h, body)
	if res.Status != 503 || res.RetryAfter != 7*time.Second || !res.Retryable() {
		t.Errorf("result %+v", res)
	}
	s := <-got
	if s.method != "POST" || s.uri != "/hooks/a?x=1" || s.host != "app.example" || !bytes.Equal(s.body, body) {
		t.Errorf("app saw %s %s host %s body %q", s.method, s.uri, s.host, s.body)
	}
	if s.header.Get("X-Service-Signature") != "abc" || s.header.Get(HeaderDeliveryID) != "e-1" || s.header.Get(HeaderAttempt) != "2" {
		t.Errorf("headers %v", s.header)
	}
	if h.Get("Connection") != "close" {
		t.Error("Send changed the stored headers")
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if res := (&HTTPSender{Timeout: time.Second}).Send(context.Background(), Meta{To: closed.URL, Method: "POST", URI: "/"}, nil, nil); res.Err == nil || !res.Retryable() {
		t.Errorf("no app: %+v", res)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		" 5 ":                           5 * time.Second,
		"-3":                            0,
		"99999999999":                   7 * 24 * time.Hour,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:01:00 GMT": time.Minute,
		"Wed, 31 Dec 2025 00:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "5", "-1", "Thu, 01 Jan 2026 00:01:00 GMT", "1e9", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Now()
	f.Fuzz(func(t *testing.T, v string) {
		if d := retryAfter(v, now); d < 0 || d > 8*24*time.Hour && !bytes.Contains([]byte(v), []byte(" ")) {
			t.Fatalf("retryAfter(%q) = %s", v, d)
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	good, _ := EncodePayload(http.Header{"A": {"b"}}, []byte("body"))
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, v []byte) {
		h, body, err := DecodePayload(v)
		if err != nil {
			return
		}
		again, err := EncodePayload(h, body)
		if err != nil {
			t.Fatal(err)
		}
		h2, body2, err := DecodePayload(again)
		if err != nil || !bytes.Equal(body, body2) || len(h) != len(h2) {
			t.Fatalf("round trip: %v %q %q", err, body, body2)
		}
	})
}
