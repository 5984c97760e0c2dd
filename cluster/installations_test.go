package cluster

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/installations"
)

var installationsKey = []byte("an installations key of 32 bytes+")

// installationsInstance is one instance's book over the shared store.
func installationsInstance(t *testing.T, srv *redistest.Server, grant func(context.Context, *installations.Installation) (installations.Token, error),
	now func() time.Time) *installations.Book {
	t.Helper()
	c := newClient(t, srv, Options{})
	store := c.Installations("demo-client")
	sealer, err := installations.NewSealer(installationsKey)
	if err != nil {
		t.Fatal(err)
	}
	book, err := installations.NewBook(installations.BookConfig{Store: store, Sealer: sealer, Grant: grant, Now: now,
		Lock: func(ctx context.Context, org string) (func(), error) { return store.Lock(ctx, org, 30*time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	stop := store.OnChange(func(org string) { _ = book.Refresh(org) })
	t.Cleanup(stop)
	return book
}

func TestInstallationsSharedByInstances(t *testing.T) {
	srv := startRedis(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	var grants atomic.Int64
	grant := func(ctx context.Context, in *installations.Installation) (installations.Token, error) {
		grants.Add(1)
		time.Sleep(50 * time.Millisecond) // long enough for every caller to find the renewal under way
		return installations.Token{AccessToken: "app-token-" + in.OrganizationID + "-" + time.Unix(0, clock.Load()).Format(time.RFC3339Nano),
			IssuedAt: now(), Expires: now().Add(2 * time.Hour)}, nil
	}
	one, two := installationsInstance(t, srv, grant, now), installationsInstance(t, srv, grant, now)

	in := &installations.Installation{OrganizationID: "42", Domain: "acme.example", AppID: "demo-app", AppSecret: "s3cret-of-acme",
		Token: installations.Token{AccessToken: "first-app-token", IssuedAt: now(), Expires: now().Add(2 * time.Hour)}}
	if err := one.Install(in); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other instance sees the installation", time.Second, func() bool {
		s, ok := two.Secret(installations.Org{Domain: "acme.example"})
		return ok && s == "s3cret-of-acme"
	})

	// Redis holds nothing in clear.
	dump, err := srv.Do("HGETALL", newClient(t, srv, Options{}).Installations("demo-client").key)
	if err != nil {
		t.Fatal(err)
	}
	if dump == "" || strings.Contains(dump, "s3cret") || strings.Contains(dump, "first-app-token") {
		t.Fatalf("the hash holds a secret in clear, or nothing: %q", dump)
	}

	// A local hit makes no Redis call.
	srv.ResetStats()
	for range 100 {
		if tok, _, err := two.Token(context.Background(), installations.Org{Domain: "acme.example"}); err != nil || tok != "first-app-token" {
			t.Fatalf("Token = %q, %v", tok, err)
		}
		if _, _, _, ok := two.Installation("acme.example", ""); !ok {
			t.Fatal("no installation")
		}
	}
	for cmd, n := range srv.WorkCalls() {
		if n > 0 {
			t.Errorf("a local hit made %d %s calls", n, cmd)
		}
	}

	// The token near its expiry: 200 requests over both instances, one
	// request to the service.
	clock.Add(int64(2*time.Hour - time.Minute))
	var wg sync.WaitGroup
	tokens := sync.Map{}
	for i := range 200 {
		book := one
		if i%2 == 1 {
			book = two
		}
		wg.Go(func() {
			tok, _, err := book.Token(context.Background(), installations.Org{ID: "42"})
			if err != nil {
				t.Error(err)
			}
			tokens.Store(tok, true)
		})
	}
	wg.Wait()
	n := 0
	tokens.Range(func(any, any) bool { n++; return true })
	if grants.Load() != 1 || n != 1 {
		t.Fatalf("200 requests over two instances: %d token requests, %d tokens", grants.Load(), n)
	}

	// Removed on one: gone on the other within a second.
	if err := two.Remove("42"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other instance drops the installation", time.Second, func() bool {
		_, ok := one.Secret(installations.Org{Domain: "acme.example"})
		return !ok
	})
}

// TestInstallationsRenewalDoesNotBringBackRemoved: a token renewed on one
// instance while another removes the installation does not store it again.
func TestInstallationsRenewalDoesNotBringBackRemoved(t *testing.T) {
	srv := startRedis(t)
	now := func() time.Time { return time.Now() }
	started := make(chan struct{})
	release := make(chan struct{})
	grant := func(ctx context.Context, in *installations.Installation) (installations.Token, error) {
		close(started)
		<-release
		return installations.Token{AccessToken: "renewed", IssuedAt: now(), Expires: now().Add(2 * time.Hour)}, nil
	}
	one, two := installationsInstance(t, srv, grant, now), installationsInstance(t, srv, grant, now)
	// No token yet: the first Token asks the service.
	if err := one.Install(&installations.Installation{OrganizationID: "42", Domain: "acme.example", AppID: "demo-app", AppSecret: "s"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the announcement of the installation heard and done with
	done := make(chan error)
	go func() {
		_, _, err := one.Token(context.Background(), installations.Org{ID: "42"})
		done <- err
	}()
	<-started
	// Removed by another instance while the first waits on the service,
	// the announcement not yet heard (HDEL alone, as if it were late).
	c := newClient(t, srv, Options{})
	if _, err := srv.Do("HDEL", c.Installations("demo-client").key, "42"); err != nil {
		t.Fatal(err)
	}
	_ = two
	close(release)
	if err := <-done; err == nil {
		t.Error("a token was given for a removed installation")
	}
	if _, err := c.Installations("demo-client").Get("42"); err != installations.ErrNotFound {
		t.Fatalf("the renewal stored the removed installation again: %v", err)
	}
}
