package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/subscription"
)

// newClient returns a Client on srv, closed when the test ends.
func newClient(t *testing.T, srv *redistest.Server, o Options) *Client {
	t.Helper()
	if srv.IsCluster() {
		o.Cluster = srv.Addrs()
	} else {
		o.URL = srv.URL()
	}
	if o.Timeout == 0 {
		// Generous: on a loaded test machine a call over 250ms would
		// fall back to a direct query, which these tests count.
		o.Timeout = 2 * time.Second
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	testKey    = subscription.Key{BaseURL: "http://service.test", App: "my-app", Organization: "acme"}
	testPolicy = subscription.Policy{NegativeTTL: 30 * time.Second, Timeout: 5 * time.Second}
)

func active(d time.Duration) subscription.Answer {
	return subscription.Answer{Status: subscription.Active, Expires: time.Now().Add(d).Truncate(time.Second).UTC()}
}

// withTimeout is the context Cache.Resolve gives a query.
func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testPolicy.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func TestSubscriptionsOneQueryForTheCluster(t *testing.T) {
	srv := startRedis(t)
	instances := []*Subscriptions{
		newClient(t, srv, Options{}).Subscriptions(),
		newClient(t, srv, Options{}).Subscriptions(),
	}
	var queries atomic.Int32
	want := active(time.Hour)
	query := func(context.Context) (subscription.Answer, error) {
		queries.Add(1)
		time.Sleep(50 * time.Millisecond)
		return want, nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			a, err := instances[i%2].Resolve(withTimeout(t), testKey, testPolicy, query)
			if err == nil && !a.Expires.Equal(want.Expires) {
				err = errors.New("answer " + a.Expires.String() + ", want " + want.Expires.String())
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := queries.Load(); n != 1 {
		t.Errorf("%d queries for 40 concurrent first requests on two instances, want 1", n)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:subscription-lock:*"); keys != "" {
		t.Errorf("lock left behind: %q", keys)
	}
}

func TestSubscriptionsLifetimeInRedis(t *testing.T) {
	srv := startRedis(t)
	s := newClient(t, srv, Options{KeyPrefix: "t1:"}).Subscriptions()
	capped := testPolicy
	capped.MaxAge = 2 * time.Minute
	for _, tc := range []struct {
		name   string
		answer subscription.Answer
		policy subscription.Policy
		min    time.Duration
		max    time.Duration // 0: not kept
	}{
		{"active until expires", active(time.Hour), testPolicy, 59 * time.Minute, time.Hour},
		{"active capped by max_age", active(time.Hour), capped, 119 * time.Second, 2 * time.Minute},
		{"unpaid for negative_ttl", subscription.Answer{Status: subscription.Unpaid, SubscribeLink: "https://pay.test/x"}, testPolicy, 29 * time.Second, 30 * time.Second},
		{"not found for negative_ttl", subscription.Answer{Status: subscription.NotFound}, testPolicy, 29 * time.Second, 30 * time.Second},
		{"unauthorized not kept", subscription.Answer{Status: subscription.Unauthorized}, testPolicy, 0, 0},
		{"lapsed active not kept", active(-time.Hour), testPolicy, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKey
			k.Organization = tc.name
			if _, err := s.Resolve(withTimeout(t), k, tc.policy, func(context.Context) (subscription.Answer, error) { return tc.answer, nil }); err != nil {
				t.Fatal(err)
			}
			key, lock := s.keys(k)
			pttl, err := srv.Do("PTTL", key)
			if err != nil {
				t.Fatal(err)
			}
			ms, _ := strconv.Atoi(pttl)
			got := time.Duration(ms) * time.Millisecond
			if tc.max == 0 {
				if ms != -2 {
					t.Errorf("kept in Redis for %v, want not kept", got)
				}
			} else if got < tc.min || got > tc.max {
				t.Errorf("kept in Redis for %v, want between %v and %v", got, tc.min, tc.max)
			}
			if n, _ := srv.Do("EXISTS", lock); n != "0" {
				t.Error("lock not released")
			}
			if tc.max == 0 {
				return
			}
			// A second instance reads the same answer without asking.
			other := newClient(t, srv, Options{KeyPrefix: "t1:"}).Subscriptions()
			a, err := other.Resolve(withTimeout(t), k, tc.policy, func(context.Context) (subscription.Answer, error) {
				t.Error("the second instance asked the service")
				return subscription.Answer{}, errors.New("asked")
			})
			if err != nil || a.Status != tc.answer.Status || !a.Expires.Equal(tc.answer.Expires) || a.SubscribeLink != tc.answer.SubscribeLink {
				t.Errorf("second instance got %+v, %v; want %+v", a, err, tc.answer)
			}
			// It trusts the answer no longer than the first instance.
			if left := time.Until(a.TrustedUntil); left < tc.min-time.Second || left > tc.max {
				t.Errorf("second instance may keep the answer %v more, want between %v and %v", left, tc.min, tc.max)
			}
		})
	}
}

func TestSubscriptionsErrorsAreNotShared(t *testing.T) {
	srv := startRedis(t)
	s := newClient(t, srv, Options{}).Subscriptions()
	failure := errors.New("service down")
	if _, err := s.Resolve(withTimeout(t), testKey, testPolicy, func(context.Context) (subscription.Answer, error) {
		return subscription.Answer{}, failure
	}); !errors.Is(err, failure) {
		t.Fatalf("error %v, want the query's", err)
	}
	// The next caller asks again at once: nothing kept, no lock left.
	start := time.Now()
	a, err := s.Resolve(withTimeout(t), testKey, testPolicy, func(context.Context) (subscription.Answer, error) { return active(time.Hour), nil })
	if err != nil || a.Status != subscription.Active {
		t.Fatalf("%+v, %v", a, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the next caller waited %v for a lock the failed query should have released", d)
	}
}

func TestSubscriptionsForgetReachesEveryInstance(t *testing.T) {
	srv := startRedis(t)
	a := newClient(t, srv, Options{}).Subscriptions()
	b := newClient(t, srv, Options{}).Subscriptions()
	heard := make(chan string, 4)
	stop := b.OnForget(func(org string) { heard <- org })
	defer stop()
	// Give the listener its subscription before publishing.
	waitSubscribed(t, srv, "servicegate:subscription-forget")

	answer := func(context.Context) (subscription.Answer, error) { return active(time.Hour), nil }
	for _, k := range []subscription.Key{
		testKey,
		{BaseURL: "http://service.test", App: "other-app", Organization: "acme"},
		{BaseURL: "http://service.test", App: "my-app", Organization: "acme2"},
		{BaseURL: "http://service.test", App: "my-app", Organization: "acm?"},
		{BaseURL: "http://service.test", App: "my-app", Organization: "x:o:acme"},
	} {
		if _, err := a.Resolve(withTimeout(t), k, testPolicy, answer); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.Forget(context.Background(), "acme")
	if err != nil || n != 2 {
		t.Fatalf("Forget(acme) = %d, %v; want 2 answers", n, err)
	}
	if keys, _ := srv.Do("KEYS", "servicegate:subscription:*"); countLines(keys) != 3 {
		t.Errorf("left %q, want the 3 answers of other organizations", keys)
	}
	select {
	case org := <-heard:
		if org != "acme" {
			t.Errorf("heard %q", org)
		}
	case <-time.After(time.Second):
		t.Fatal("the other instance did not hear of the purge within a second")
	}
}

func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := 1
	for i := range len(s) {
		if s[i] == '\n' {
			n++
		}
	}
	return n
}

// waitSubscribed waits until some client listens on channel.
func waitSubscribed(t *testing.T, srv *redistest.Server, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := srv.Do("PUBSUB", "NUMSUB", channel)
		if err == nil && out == channel+"\n1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody subscribed to %s: %q %v", channel, out, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRedisDownFallsBackAndRecovers(t *testing.T) {
	srv := startRedis(t)
	var failures atomic.Int32
	var logMu sync.Mutex
	var logged []error
	c := newClient(t, srv, Options{
		Timeout:     500 * time.Millisecond,
		LogInterval: time.Hour,
		OnError:     func(Op, error) { failures.Add(1) },
		Log: func(_ Op, err error, _ int) {
			logMu.Lock()
			logged = append(logged, err)
			logMu.Unlock()
		},
	})
	s := c.Subscriptions()
	heard := make(chan string, 4)
	defer s.OnForget(func(org string) { heard <- org })()
	waitSubscribed(t, srv, "servicegate:subscription-forget")
	srv.Stop()

	var queries atomic.Int32
	query := func(context.Context) (subscription.Answer, error) {
		queries.Add(1)
		return active(time.Hour), nil
	}
	for i := range 20 {
		start := time.Now()
		a, err := s.Resolve(withTimeout(t), testKey, testPolicy, query)
		if err != nil || a.Status != subscription.Active {
			t.Fatalf("request %d with Redis down: %+v, %v; want the direct query's answer", i, a, err)
		}
		// Held by Redis's 500 ms timeout at most, never by the request's
		// own 5 s: the bound leaves room for a loaded machine.
		if d := time.Since(start); d > 5*time.Second/2 {
			t.Fatalf("request %d took %v with Redis down", i, d)
		}
	}
	if n := queries.Load(); n != 20 {
		t.Errorf("%d direct queries, want 20", n)
	}
	if failures.Load() < 20 {
		t.Errorf("%d failures counted, want at least 20", failures.Load())
	}
	logMu.Lock()
	if len(logged) != 1 || logged[0] == nil {
		t.Errorf("logged %v, want one failure line", logged)
	}
	logMu.Unlock()

	srv.Restart()
	queries.Store(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := s.Resolve(withTimeout(t), testKey, testPolicy, query); err != nil {
			t.Fatal(err)
		}
		if key, _ := s.keys(testKey); mustDo(t, srv, "EXISTS", key) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("answers not shared again within 5s of Redis' return")
		}
		time.Sleep(20 * time.Millisecond)
	}
	logMu.Lock()
	if last := logged[len(logged)-1]; last != nil {
		t.Errorf("no recovery line after Redis came back; last line %v", last)
	}
	logMu.Unlock()

	// The listener is back too: a purge from another instance is heard.
	waitSubscribed(t, srv, "servicegate:subscription-forget")
	other := newClient(t, srv, Options{}).Subscriptions()
	if _, err := other.Forget(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(time.Second):
		t.Fatal("the purge was not heard after Redis came back")
	}
}

func mustDo(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	out, err := srv.Do(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNewRefusesABadURLWithoutQuotingIt(t *testing.T) {
	_, err := New(Options{URL: "http://user:hunter2@host:6379"})
	if err == nil {
		t.Fatal("accepted an http URL")
	}
	if s := err.Error(); strings.Contains(s, "hunter2") {
		t.Errorf("error quotes the password: %s", s)
	}
}

func TestGlobEscape(t *testing.T) {
	if got := globEscape(`a*b?c[d]e\f^g-h`); got != `a\*b\?c\[d\]e\\f\^g\-h` {
		t.Errorf("%s", got)
	}
}

func TestListenerStartedWhileRedisIsDownHearsOnceItIsUp(t *testing.T) {
	srv := startRedis(t)
	srv.Stop()
	s := newClient(t, srv, Options{Timeout: 200 * time.Millisecond}).Subscriptions()
	heard := make(chan string, 1)
	defer s.OnForget(func(org string) { heard <- org })()
	time.Sleep(300 * time.Millisecond) // a few failed reconnections
	srv.Restart()
	waitSubscribed(t, srv, "servicegate:subscription-forget")
	if _, err := srv.Do("PUBLISH", "servicegate:subscription-forget", "initech"); err != nil {
		t.Fatal(err)
	}
	select {
	case org := <-heard:
		if org != "initech" {
			t.Errorf("heard %q", org)
		}
	case <-time.After(time.Second):
		t.Fatal("the purge was not heard")
	}
}
