package installations

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// benchBook is a book of n installations with fresh tokens, over a
// memory store.
func benchBook(b *testing.B, n int) *Book {
	b.Helper()
	c := newClock()
	book := newTestBook(&testing.T{}, NewMemoryStore(), newFakeService(c.now), c)
	for i := range n {
		org := strconv.Itoa(100000 + i)
		in := testInstallation(org, "organization-"+org, "a-random-app-secret-0123456789abcdef")
		in.Token = Token{AccessToken: "app-token-" + org, IssuedAt: c.now(), Expires: c.now().Add(2 * time.Hour)}
		if err := book.Install(in); err != nil {
			b.Fatal(err)
		}
	}
	return book
}

// BenchmarkAppTokenHeader is the hot path of a forwarded request: find the
// organization's installation by domain and set its app token header.
func BenchmarkAppTokenHeader(b *testing.B) {
	for _, n := range []int{1, 100000} {
		b.Run(strconv.Itoa(n)+"-installations", func(b *testing.B) {
			book := benchBook(b, n)
			h := http.Header{}
			ctx := context.Background()
			org := Org{Domain: "organization-" + strconv.Itoa(100000+n/2)}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				tok, _, err := book.Token(ctx, org)
				if err != nil {
					b.Fatal(err)
				}
				h["X-Service-App-Token"] = []string{tok}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkWebhookSecret is the look-up of a delivery's verifier.
func BenchmarkWebhookSecret(b *testing.B) {
	book := benchBook(b, 100000)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, ok := book.Installation("organization-150000", ""); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkBookLoad100000 is a start: every installation read from the
// store and opened.
func BenchmarkBookLoad100000(b *testing.B) {
	c := newClock()
	store := NewMemoryStore()
	sealer, _ := NewSealer(testKey)
	for i := range 100000 {
		org := strconv.Itoa(100000 + i)
		in := testInstallation(org, "organization-"+org, "a-random-app-secret-0123456789abcdef")
		in.Token = Token{AccessToken: "app-token-" + org, IssuedAt: c.now(), Expires: c.now().Add(2 * time.Hour)}
		sealed, err := sealer.sealRecord(in)
		if err != nil {
			b.Fatal(err)
		}
		_ = store.Put(org, sealed)
	}
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		book, err := NewBook(BookConfig{Store: store, Sealer: sealer, Now: c.now})
		if err != nil || book.Len() != 100000 {
			b.Fatalf("NewBook: %v", err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used (user and system): on a
// shared machine a steadier measure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBookRotation100000 is a start after a key rotation: 100,000
// records in a bbolt file, sealed under the retired key, each opened and
// sealed again under the current key in one transaction.
func BenchmarkBookRotation100000(b *testing.B) {
	c := newClock()
	old, _ := NewSealer(testKey)
	next := []byte("the next installations key, 32+ bytes")
	rotated, _ := NewSealer(next, testKey)
	b.StopTimer()
	for range b.N {
		store, err := OpenBolt(filepath.Join(b.TempDir(), "installations.db"))
		if err != nil {
			b.Fatal(err)
		}
		records := make([]Swap, 0, 100000)
		for i := range 100000 {
			org := strconv.Itoa(100000 + i)
			in := testInstallation(org, "organization-"+org, "a-random-app-secret-0123456789abcdef")
			in.Token = Token{AccessToken: "app-token-" + org, IssuedAt: c.now(), Expires: c.now().Add(2 * time.Hour)}
			sealed, _ := old.Bind("app").sealRecord(in)
			records = append(records, Swap{Organization: org, New: sealed})
		}
		if err := store.db.Update(func(tx *bolt.Tx) error {
			for _, r := range records {
				if err := tx.Bucket(bucketInstallations).Put([]byte(r.Organization), r.New); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		var resealed int
		b.StartTimer()
		book, err := NewBook(BookConfig{Store: store, Sealer: rotated, App: "app", Now: c.now, Resealed: func(r, _ int) { resealed = r }})
		if err != nil || book.Len() != 100000 || resealed != 100000 {
			b.Fatalf("NewBook: %v, %d held, %d resealed", err, book.Len(), resealed)
		}
		b.StopTimer()
		store.Close()
	}
}
