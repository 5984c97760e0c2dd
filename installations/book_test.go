package installations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/signature"
)

// fakeService issues app tokens for the secrets it gave, and counts the
// requests.
type fakeService struct {
	mu       sync.Mutex
	secrets  map[string]string // organization → app secret
	requests atomic.Int64
	down     atomic.Bool
	// badClient: the service refuses the gateway's client credentials.
	badClient atomic.Bool
	lifetime  time.Duration
	now       func() time.Time
	delay     time.Duration
}

func newFakeService(now func() time.Time) *fakeService {
	return &fakeService{secrets: map[string]string{}, lifetime: 2 * time.Hour, now: now}
}

func (s *fakeService) give(org, secret string) {
	s.mu.Lock()
	s.secrets[org] = secret
	s.mu.Unlock()
}

// testDomains are the domains of the organizations the fake service
// knows.
var testDomains = map[string]string{"42": "acme", "43": "globex", "44": "initech"}

// grant issues a token for the organization the secret was given to, as
// the service does: whatever organization the installation names.
func (s *fakeService) grant(ctx context.Context, in *Installation) (Token, error) {
	n := s.requests.Add(1)
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if s.down.Load() {
		return Token{}, errors.New("dial tcp: connection refused")
	}
	if s.badClient.Load() {
		return Token{}, ErrClientRefused
	}
	s.mu.Lock()
	org := ""
	for o, secret := range s.secrets {
		if secret == in.AppSecret {
			org = o
		}
	}
	s.mu.Unlock()
	if org == "" || (in.Domain != "" && testDomains[org] != "" && in.Domain != testDomains[org]) {
		return Token{}, ErrRefused
	}
	now := s.now()
	return Token{AccessToken: "app-token-" + org + "-" + strconv.FormatInt(n, 10), IssuedAt: now, Expires: now.Add(s.lifetime)}, nil
}

// prove names the organization of a token the fake service issued.
func (s *fakeService) prove(_ context.Context, tok string) (Org, error) {
	rest, ok := strings.CutPrefix(tok, "app-token-")
	org, _, ok2 := strings.Cut(rest, "-")
	if !ok || !ok2 {
		return Org{}, errors.New("not a token of the service")
	}
	return Org{ID: org, Domain: testDomains[org]}, nil
}

// clock is a settable clock for tests.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func testInstallation(org, domain, secret string) *Installation {
	return &Installation{OrganizationID: org, Domain: domain, BaseURL: "https://" + domain + ".service.example",
		AppID: "demo-app", AppSecret: secret, UserID: "7", InstalledAt: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
}

func newTestBook(t *testing.T, store Store, svc *fakeService, c *clock) *Book {
	t.Helper()
	s, err := NewSealer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBook(BookConfig{Store: store, Sealer: s, Grant: svc.grant, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBookKeepsInstallationsSealedOnDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "installations.db")
	store, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	svc := newFakeService(c.now)
	b := newTestBook(t, store, svc, c)
	in := testInstallation("42", "acme", "s3cret-of-acme-installation")
	in.Token = Token{AccessToken: "app-token-in-clear", IssuedAt: c.now(), Expires: c.now().Add(time.Hour)}
	if err := b.Install(in); err != nil {
		t.Fatal(err)
	}
	if err := b.Install(testInstallation("43", "globex", "s3cret-of-globex-installation")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []Org{{ID: "42"}, {Domain: "acme"}, {ID: "42", Domain: "acme"}} {
		if secret, ok := b.Secret(key); !ok || secret != "s3cret-of-acme-installation" {
			t.Errorf("Secret(%v) = %q, %v", key, secret, ok)
		}
	}
	for _, key := range []Org{{Domain: "initech"}, {Domain: "42"}, {ID: "acme"}, {ID: "43", Domain: "acme"}} {
		if _, ok := b.Secret(key); ok {
			t.Errorf("Secret(%+v) finds an installation: ids and domains are one namespace, or a mismatch passes", key)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, clear := range []string{"s3cret-of-acme", "s3cret-of-globex", "app-token-in-clear"} {
		if bytes.Contains(raw, []byte(clear)) {
			t.Errorf("the store file holds %q in clear", clear)
		}
	}

	// Reopened, as after a restart: everything is there.
	store, err = OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b = newTestBook(t, store, svc, c)
	if b.Len() != 2 {
		t.Fatalf("Len = %d after reopening", b.Len())
	}
	got, err := b.Get("42")
	if err != nil || got.AppSecret != "s3cret-of-acme-installation" || got.Token.AccessToken != "app-token-in-clear" || got.BaseURL != in.BaseURL {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	list, err := b.List()
	if err != nil || len(list) != 2 || list[0].OrganizationID != "42" || list[0].Domain != "acme" || list[0].TokenExpiresAt.IsZero() {
		t.Fatalf("List = %+v, %v", list, err)
	}

	// A record copied under another organization's name does not open.
	sealed, _ := store.Get("42")
	if err := store.Put("43", sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get("43"); !errors.Is(err, ErrSealed) {
		t.Errorf("a record copied to another organization opened: %v", err)
	}
	// Opened again, the bad record is skipped and the good one served.
	s, _ := NewSealer(testKey)
	again, err := NewBook(BookConfig{Store: store, Sealer: s})
	if err != nil || again.Len() != 1 || !again.Unreadable("", "43") {
		t.Errorf("a book over a record that does not open: %v, %d held", err, again.Len())
	}
}

func TestBookReplaceAndRemove(t *testing.T) {
	c := newClock()
	b := newTestBook(t, NewMemoryStore(), newFakeService(c.now), c)
	if err := b.Install(testInstallation("42", "acme", "first")); err != nil {
		t.Fatal(err)
	}
	// Installed again under a new domain: the old domain is gone.
	if err := b.Install(testInstallation("42", "acme-renamed", "second")); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Secret(Org{Domain: "acme"}); ok {
		t.Error("the old domain still finds the installation")
	}
	if s, _ := b.Secret(Org{Domain: "acme-renamed"}); s != "second" {
		t.Errorf("secret = %q", s)
	}
	if err := b.Remove("42"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Secret(Org{ID: "42"}); ok || b.Len() != 0 {
		t.Error("a removed installation is still held")
	}
	if _, err := b.Get("42"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
	if err := b.Remove("never-installed"); err != nil {
		t.Errorf("removing nothing: %v", err)
	}
}

func TestBookRefusesAnotherOrganizationsDomain(t *testing.T) {
	c := newClock()
	b := newTestBook(t, NewMemoryStore(), newFakeService(c.now), c)
	if err := b.Install(testInstallation("42", "acme", "first")); err != nil {
		t.Fatal(err)
	}
	if err := b.Install(testInstallation("43", "acme", "second")); !errors.Is(err, ErrTaken) {
		t.Fatalf("another organization under acme's domain: %v", err)
	}
	if s, _ := b.Secret(Org{Domain: "acme"}); s != "first" {
		t.Errorf("acme's secret = %q after a takeover was tried", s)
	}
	// An id that is another organization's domain is a key of its own.
	if err := b.Install(testInstallation("acme", "", "third")); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Secret(Org{Domain: "acme"}); s != "first" {
		t.Errorf("acme's secret = %q after an id named acme was stored", s)
	}
	if _, err := b.Find("acme"); err == nil {
		t.Error("Find of a name that is an id and another organization's domain is not refused")
	}
}

func TestBookRefreshFollowsTheStore(t *testing.T) {
	c := newClock()
	store := NewMemoryStore()
	svc := newFakeService(c.now)
	one, other := newTestBook(t, store, svc, c), newTestBook(t, store, svc, c)
	if err := one.Install(testInstallation("42", "acme", "s")); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Secret(Org{Domain: "acme"}); ok {
		t.Fatal("the other book saw the change before it was told")
	}
	if err := other.Refresh("42"); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Secret(Org{Domain: "acme"}); !ok {
		t.Fatal("Refresh did not read the installation")
	}
	if err := one.Remove("42"); err != nil {
		t.Fatal(err)
	}
	if err := other.Refresh("42"); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Secret(Org{Domain: "acme"}); ok {
		t.Fatal("Refresh did not drop the removed installation")
	}
}

func TestBookTokenRenewedOncePerOrganization(t *testing.T) {
	c := newClock()
	svc := newFakeService(c.now)
	svc.delay = 20 * time.Millisecond
	b := newTestBook(t, NewMemoryStore(), svc, c)
	svc.give("42", "s")
	if err := b.Install(testInstallation("42", "acme", "s")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Token(context.Background(), Org{Domain: "initech"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token of an organization with no installation: %v", err)
	}
	tokens := func() map[string]bool {
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				org := Org{ID: "42"}
				if i%2 == 0 {
					org = Org{Domain: "acme"}
				}
				tok, exp, err := b.Token(context.Background(), org)
				if err != nil || exp.IsZero() {
					t.Errorf("Token = %v, %v", exp, err)
				}
				mu.Lock()
				seen[tok] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		return seen
	}
	if seen := tokens(); len(seen) != 1 || svc.requests.Load() != 1 {
		t.Fatalf("200 callers: %d tokens, %d requests to the service", len(seen), svc.requests.Load())
	}
	// Far from expiry: no request.
	c.advance(time.Hour)
	tokens()
	if n := svc.requests.Load(); n != 1 {
		t.Fatalf("a fresh token was renewed: %d requests", n)
	}
	// Within the last fifth of its lifetime (2h: 24 min, capped at 5 min).
	c.advance(56 * time.Minute)
	if seen := tokens(); len(seen) != 1 || seen["app-token-42-1"] || svc.requests.Load() != 2 {
		t.Fatalf("renewal: tokens %v, %d requests", seen, svc.requests.Load())
	}
	// The renewed token was stored: a book reading the store does not ask.
	got, err := b.Get("42")
	if err != nil || got.Token.AccessToken != "app-token-42-2" {
		t.Fatalf("stored token = %+v, %v", got, err)
	}
	// The service down: an error, and the next caller asks again.
	c.advance(2 * time.Hour)
	svc.down.Store(true)
	if _, _, err := b.Token(context.Background(), Org{ID: "42"}); err == nil {
		t.Fatal("no error with the service down")
	}
	svc.down.Store(false)
	if tok, _, err := b.Token(context.Background(), Org{ID: "42"}); err != nil || tok != "app-token-42-4" {
		t.Fatalf("Token = %q, %v", tok, err)
	}
}

func TestBookRenewalDoesNotBringBackRemovedInstallation(t *testing.T) {
	c := newClock()
	svc := newFakeService(c.now)
	svc.delay = 50 * time.Millisecond
	store := NewMemoryStore()
	b := newTestBook(t, store, svc, c)
	svc.give("42", "s")
	if err := b.Install(testInstallation("42", "acme", "s")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, _, err := b.Token(context.Background(), Org{ID: "42"})
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	if err := b.Remove("42"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("a token of a removed installation was given")
	}
	if _, err := store.Get("42"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the renewal stored the removed installation again: %v", err)
	}
}

func TestBookMemoryPerInstallation(t *testing.T) {
	c := newClock()
	b := newTestBook(t, NewMemoryStore(), newFakeService(c.now), c)
	const n = 20000
	token := string(bytes.Repeat([]byte("t"), 240))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		org := strconv.Itoa(100000 + i)
		in := testInstallation(org, "organization-"+org, "a-random-app-secret-0123456789abcdef")
		in.Token = Token{AccessToken: token + org, IssuedAt: c.now(), Expires: c.now().Add(time.Hour)}
		b.keep(in, KeyCurrent)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(b)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	// The key (the organization id, 6 bytes) is not counted apart: the
	// budget of 512 bytes beyond it holds it here.
	t.Logf("%.0f bytes per installation held (a 240-byte app token included)", per)
	if per > 512 {
		t.Errorf("%.0f bytes per installation held, want at most 512", per)
	}
}

func TestBookInstallationVerifiesWithItsSecret(t *testing.T) {
	c := newClock()
	b := newTestBook(t, NewMemoryStore(), newFakeService(c.now), c)
	if err := b.Install(testInstallation("42", "acme", "s3cret-42")); err != nil {
		t.Fatal(err)
	}
	v, id, domain, ok := b.Installation("acme", "")
	if !ok || id != "42" || domain != "acme" {
		t.Fatalf("Installation = %v %q %q", ok, id, domain)
	}
	body := []byte(`{"events":[]}`)
	if err := v.Verify(body, signature.Sign("s3cret-42", body)); err != nil {
		t.Fatal(err)
	}
	if v2, _, _, _ := b.Installation("", "42"); v2 != v {
		t.Error("the verifier is made again for each delivery")
	}
	if _, _, _, ok := b.Installation("globex", ""); ok {
		t.Error("an organization with no installation has a verifier")
	}
}

// TestBookSkipsRecordsThatDoNotOpen: a damaged record, one sealed under
// no configured key and one of another app are skipped and reported once
// each; every other organization is served.
func TestBookSkipsRecordsThatDoNotOpen(t *testing.T) {
	c := newClock()
	store := NewMemoryStore()
	sealer, _ := NewSealer(testKey)
	good := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer})
	if err := good.Install(testInstallation("42", "acme", "s3cret-42")); err != nil {
		t.Fatal(err)
	}
	other, _ := NewSealer([]byte("another key of at least 32 bytes!!"))
	foreign, _ := other.Bind("app-a").sealRecord(testInstallation("43", "globex", "s"))
	otherApp, _ := sealer.Bind("app-b").sealRecord(testInstallation("44", "initech", "s"))
	_ = store.Put("43", foreign)
	_ = store.Put("44", otherApp)
	_ = store.Put("999", []byte("garbage"))
	var told []string
	b := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer, Now: c.now,
		Unreadable: func(org string, err error) { told = append(told, org) }})
	if s, ok := b.Secret(Org{Domain: "acme"}); !ok || s != "s3cret-42" || b.Len() != 1 {
		t.Fatalf("the good record: %v, %d held", ok, b.Len())
	}
	sort.Strings(told)
	if strings.Join(told, ",") != "43,44,999" {
		t.Fatalf("told of %v", told)
	}
	for _, org := range []string{"43", "44", "999"} {
		if !b.Unreadable("", org) {
			t.Errorf("%s is not reported unreadable", org)
		}
	}
	if b.Unreadable("", "42") || b.Unreadable("acme", "") {
		t.Error("a good or domain-only organization is reported unreadable")
	}
	if _, err := b.Get("999"); !errors.Is(err, ErrSealed) || len(told) != 3 {
		t.Fatalf("reading a bad record again: %v, told %d times", err, len(told))
	}
	if st := b.KeyStates(); st[KeyCurrent] != 1 || st[KeyNone] != 3 {
		t.Errorf("key states %v", st)
	}
	list, err := b.List()
	if err != nil || len(list) != 4 || list[3].OrganizationID != "999" || list[3].Key != "unreadable" || list[0].App != "app-a" {
		t.Errorf("list %+v %v", list, err)
	}
	// Installed again, the organization is repaired.
	if err := b.Install(testInstallation("999", "hooli", "fresh")); err != nil || b.Unreadable("", "999") {
		t.Fatalf("reinstall: %v", err)
	}
}

// TestBookSealsRetiredRecordsAgain: records under a retired key open and
// are sealed again under the current key at start.
func TestBookSealsRetiredRecordsAgain(t *testing.T) {
	store := NewMemoryStore()
	old, _ := NewSealer(testKey)
	first := newTestBookWith(t, store, BookConfig{App: "app", Sealer: old})
	for _, org := range []string{"42", "43"} {
		if err := first.Install(testInstallation(org, "d"+org, "s"+org)); err != nil {
			t.Fatal(err)
		}
	}
	next := []byte("the next installations key, 32+ bytes")
	rotated, _ := NewSealer(next, testKey)
	var resealed, failed int
	b := newTestBookWith(t, store, BookConfig{App: "app", Sealer: rotated, Resealed: func(r, f int) { resealed, failed = r, f }})
	if s, _ := b.Secret(Org{ID: "43"}); s != "s43" || resealed != 2 || failed != 0 {
		t.Fatalf("rotated: %q, resealed %d, failed %d", s, resealed, failed)
	}
	if st := b.KeyStates(); st[KeyCurrent] != 2 || st[KeyRetired] != 0 {
		t.Errorf("key states %v", st)
	}
	onlyNext, _ := NewSealer(next)
	if n := newTestBookWith(t, store, BookConfig{App: "app", Sealer: onlyNext}).Len(); n != 2 {
		t.Fatalf("after the retired key went: %d held", n)
	}
}

func newTestBookWith(t *testing.T, store Store, cfg BookConfig) *Book {
	t.Helper()
	cfg.Store = store
	b, err := NewBook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegisterFileNamesTheOtherApps(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.db", "b.db", "c.db", "old.db"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// An app with installations, and a second app of its own beside it:
	// the second is not told of the first.
	if others, err := RegisterFile(filepath.Join(dir, "a.db"), "client-a", "app-one", 3); err != nil || len(others) != 0 {
		t.Fatalf("first: %v %v", others, err)
	}
	if others, _ := RegisterFile(filepath.Join(dir, "c.db"), "client-c", "app-two", 0); len(others) != 0 {
		t.Fatalf("a second app was told of the first: %v", others)
	}
	// The first app back with another client id: its own store is named,
	// never the second app's nor a file of unknown app.
	if others, _ := RegisterFile(filepath.Join(dir, "b.db"), "client-b", "app-one", 0); len(others) != 1 || !strings.HasPrefix(others[0], "client-a (") {
		t.Fatalf("the same app under another client id: %v", others)
	}
	// An empty store is not named.
	if others, _ := RegisterFile(filepath.Join(dir, "a.db"), "client-a", "app-one", 3); len(others) != 0 {
		t.Fatalf("an empty store is named: %v", others)
	}
	if msg := ClientIDChanged("client-b", []string{"client-a (a.db)"}); !strings.Contains(msg, "client-b") || !strings.Contains(msg, "client-a (a.db)") {
		t.Fatal(msg)
	}
}

// TestBookUnreadableByDomain: a domain names an organization whose record
// does not open when the book knew it as that organization's, and, named
// without an id, any domain that is no readable installation's while a
// record whose domain was never known does not open.
func TestBookUnreadableByDomain(t *testing.T) {
	store := NewMemoryStore()
	sealer, _ := NewSealer(testKey)
	b := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer})
	for _, in := range []*Installation{testInstallation("42", "acme", "s42"), testInstallation("43", "globex", "s43")} {
		if err := b.Install(in); err != nil {
			t.Fatal(err)
		}
	}
	// Damaged while the book knows it: its domain stays known.
	_ = store.Put("43", []byte("damaged"))
	if _, err := b.Get("43"); !errors.Is(err, ErrSealed) {
		t.Fatalf("damaged record: %v", err)
	}
	for _, c := range []struct {
		domain, id string
		want       bool
	}{
		{"globex", "", true}, {"globex", "43", true}, {"", "43", true}, {"globex", "7", true}, {"acme", "43", true},
		{"acme", "", false}, {"acme", "42", false}, {"hooli", "", false}, {"hooli", "7", false}, {"", "", false},
	} {
		if got := b.Unreadable(c.domain, c.id); got != c.want {
			t.Errorf("known domain: Unreadable(%q, %q) = %v, want %v", c.domain, c.id, got, c.want)
		}
	}
	// Read at a start, the damaged record's domain is not known: a domain
	// named alone that is no readable installation's may be its.
	again := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer})
	for _, c := range []struct {
		domain, id string
		want       bool
	}{
		{"globex", "", true}, {"hooli", "", true}, {"", "43", true}, {"globex", "43", true},
		{"acme", "", false}, {"globex", "7", false}, {"acme", "42", false},
	} {
		if got := again.Unreadable(c.domain, c.id); got != c.want {
			t.Errorf("unknown domain: Unreadable(%q, %q) = %v, want %v", c.domain, c.id, got, c.want)
		}
	}
	if err := again.Install(testInstallation("43", "globex", "fresh")); err != nil {
		t.Fatal(err)
	}
	if again.Unreadable("hooli", "") || again.Unreadable("", "43") {
		t.Error("repaired, the organization is still reported unreadable")
	}
}

// sealFormat1 seals in as a record of the earlier format: bound to its
// organization only.
func sealFormat1(t *testing.T, s *Sealer, in *Installation) []byte {
	t.Helper()
	plain, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	aead := s.keys[0]
	ns := aead.NonceSize()
	out := make([]byte, 1+ns)
	out[0] = sealV1
	return aead.Seal(out, out[1:1+ns], plain, []byte("organization:"+in.OrganizationID))
}

// failingSwaps is a store whose bulk sealing-again stores nothing.
type failingSwaps struct{ *MemoryStore }

func (failingSwaps) Swap([]Swap) (int, error) { return 0, errors.New("the store is read-only now") }

// TestBookOpensFormat1OnlyWhileItsStoreIsMigrated: records of format 1
// open in a store written before format 2 (no format recorded, no record
// of format 2), are sealed again, and the store records format 2; then
// a format-1 record copied in does not open, nor one in a store created at
// format 2, nor in a store whose migration another app began.
func TestBookOpensFormat1OnlyWhileItsStoreIsMigrated(t *testing.T) {
	sealer, _ := NewSealer(testKey)
	store := NewMemoryStore()
	_ = store.Put("42", sealFormat1(t, sealer, testInstallation("42", "acme", "s42")))
	b := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer})
	if s, ok := b.Secret(Org{ID: "42"}); !ok || s != "s42" {
		t.Fatal("a format-1 record of a store written before format 2 does not open")
	}
	if raw, _ := store.Get("42"); raw[0] != sealVersion {
		t.Fatalf("not sealed again: format %d", raw[0])
	}
	if f, known, _ := store.Format(); !known || f != (Format{Version: 2}) {
		t.Fatalf("the migrated store records %+v %v", f, known)
	}
	// Copied in after the migration: unreadable, at a start and at run time.
	_ = store.Put("43", sealFormat1(t, sealer, testInstallation("43", "globex", "s43")))
	if _, err := b.Get("43"); !errors.Is(err, ErrSealed) || !b.Unreadable("", "43") {
		t.Fatalf("a format-1 record copied in at run time: %v", err)
	}
	again := newTestBookWith(t, store, BookConfig{App: "app-a", Sealer: sealer})
	if !again.Unreadable("", "43") || again.Unreadable("", "42") {
		t.Fatal("a format-1 record copied into a migrated store opens at a start")
	}

	// A store created at format 2 by a version that recorded no format:
	// its format-2 records say so.
	made := NewMemoryStore()
	_ = made.Put("42", sealer.Bind("app-b").Seal("42", []byte(`{"organizationId":"42","appSecret":"s"}`)))
	_ = made.Put("43", sealFormat1(t, sealer, testInstallation("43", "globex", "s43")))
	if nb := newTestBookWith(t, made, BookConfig{App: "app-b", Sealer: sealer}); !nb.Unreadable("", "43") || nb.Unreadable("", "42") {
		t.Fatal("a format-1 record beside format-2 ones opens")
	}

	// A migration left unfinished (the store took no record sealed again)
	// goes on for its app only.
	half := failingSwaps{NewMemoryStore()}
	_ = half.Put("42", sealFormat1(t, sealer, testInstallation("42", "acme", "s42")))
	if nb := newTestBookWith(t, half, BookConfig{App: "app-a", Sealer: sealer}); nb.Unreadable("", "42") {
		t.Fatal("the migration's own app cannot open its store")
	}
	if f, _, _ := half.Format(); f.Migrating != "app-a" {
		t.Fatalf("an unfinished migration is not recorded: %+v", f)
	}
	if nb := newTestBookWith(t, half, BookConfig{App: "app-a", Sealer: sealer}); nb.Unreadable("", "42") {
		t.Fatal("an unfinished migration does not go on at the next start")
	}
	if nb := newTestBookWith(t, half, BookConfig{App: "app-c", Sealer: sealer}); !nb.Unreadable("", "42") {
		t.Fatal("another app opens a format-1 record of a migration it did not begin")
	}
}

// TestBoltStoreKeepsItsFormat: the format a file store records outlives
// the file's closing, and is kept apart from the records.
func TestBoltStoreKeepsItsFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "i.db")
	s, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, known, err := s.Format(); known || err != nil {
		t.Fatalf("a new file records a format: %v %v", known, err)
	}
	sealer, _ := NewSealer(testKey)
	_ = newTestBookWith(t, s, BookConfig{App: "app-a", Sealer: sealer})
	s.Close()
	if s, err = OpenBolt(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	_ = s.Each(func(string, []byte) error { n++; return nil })
	if f, known, err := s.Format(); !known || err != nil || f != (Format{Version: 2}) || n != 0 {
		t.Fatalf("the file's format after a book opened it empty: %+v %v %v, %d records", f, known, err, n)
	}
}
