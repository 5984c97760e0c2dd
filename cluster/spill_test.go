package cluster

import (
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/contract"
)

var spillLinks = contract.Links{Key: []byte("0123456789abcdef0123456789abcdef"), TTL: 10 * time.Minute}

// spillPayload keeps body through s and returns its name and link.
func spillPayload(t *testing.T, s *Spill, kind, body string) (string, url.Values) {
	t.Helper()
	w, name, err := s.Create(kind)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	q, err := url.ParseQuery(s.Link(name))
	if err != nil {
		t.Fatal(err)
	}
	return name, q
}

func readPayload(t *testing.T, p contract.Payload) string {
	t.Helper()
	b, err := io.ReadAll(p)
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != p.Size {
		t.Errorf("payload of %d bytes says it has %d", len(b), p.Size)
	}
	return string(b)
}

func TestSpillLinkMintedOnOneInstanceTakenOnAnotherOnce(t *testing.T) {
	srv := startRedis(t)
	a := newClient(t, srv, Options{KeyPrefix: "sg1:"}).Spill(spillLinks)
	b := newClient(t, srv, Options{KeyPrefix: "sg1:"}).Spill(spillLinks)
	name, q := spillPayload(t, a, contract.KindStrings, "{\"identifier\":\"a\"}\n")

	ttl, err := srv.Do("PTTL", "sg1:spill:"+name)
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := strconv.Atoi(ttl); ms <= int((9*time.Minute).Milliseconds()) || ms > int(spillLinks.TTL.Milliseconds()) {
		t.Errorf("payload lives %s ms in Redis, want about the link's lifetime of %s", ttl, spillLinks.TTL)
	}

	p, err := b.Take(name, q)
	if err != nil {
		t.Fatalf("Take on the other instance: %v", err)
	}
	if got := readPayload(t, p); got != "{\"identifier\":\"a\"}\n" {
		t.Errorf("payload %q", got)
	}
	for _, s := range []*Spill{a, b} {
		if _, err := s.Take(name, q); !errors.Is(err, contract.ErrLinkInvalid) {
			t.Errorf("second Take = %v, want ErrLinkInvalid", err)
		}
	}
	if n := srv.Dbsize(t); n != 0 {
		t.Errorf("%d keys left in Redis after the download", n)
	}
}

func TestSpillConcurrentTakesOneWins(t *testing.T) {
	srv := startRedis(t)
	instances := []*Spill{
		newClient(t, srv, Options{}).Spill(spillLinks),
		newClient(t, srv, Options{}).Spill(spillLinks),
	}
	name, q := spillPayload(t, instances[0], contract.KindContent, strings.Repeat("x", 1<<20))
	var wg sync.WaitGroup
	var won, refused atomic.Int32
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			p, err := instances[i%2].Take(name, q)
			switch {
			case err == nil:
				if got := readPayload(t, p); len(got) != 1<<20 {
					t.Errorf("the winner got %d bytes", len(got))
				}
				won.Add(1)
			case errors.Is(err, contract.ErrLinkInvalid):
				refused.Add(1)
			default:
				t.Errorf("Take: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if won.Load() != 1 || refused.Load() != 19 {
		t.Errorf("20 concurrent downloads of one link: %d got the payload, %d were refused; want 1 and 19", won.Load(), refused.Load())
	}
}

func TestSpillRefusesBadLinksWithoutCallingRedis(t *testing.T) {
	srv := startRedis(t)
	s := newClient(t, srv, Options{}).Spill(spillLinks)
	name, q := spillPayload(t, s, contract.KindPreview, "<html>")
	other := newClient(t, srv, Options{}).Spill(contract.Links{Key: []byte("another key, not the same at all"), TTL: time.Minute})
	srv.ResetStats()
	bad := url.Values{"expires": q["expires"], "sig": {strings.Repeat("0", 64)}}
	expired := time.Now().Add(time.Hour)
	late := s.c.Spill(contract.Links{Key: spillLinks.Key, TTL: spillLinks.TTL, Now: func() time.Time { return expired }})
	for what, take := range map[string]func() error{
		"bad signature":   func() error { _, err := s.Take(name, bad); return err },
		"other key":       func() error { _, err := other.Take(name, q); return err },
		"expired":         func() error { _, err := late.Take(name, q); return err },
		"name never made": func() error { _, err := s.Take("../"+name, q); return err },
		"no signature":    func() error { _, err := s.Take(name, url.Values{}); return err },
	} {
		if err := take(); !errors.Is(err, contract.ErrLinkInvalid) {
			t.Errorf("%s: Take = %v, want ErrLinkInvalid", what, err)
		}
	}
	if calls := srv.CommandCalls(); calls["getdel"] != 0 {
		t.Errorf("refused links made %d GETDEL calls, want none", calls["getdel"])
	}
	if p, err := s.Take(name, q); err != nil || readPayload(t, p) != "<html>" {
		t.Errorf("the good link after the bad ones: %v", err)
	}
}

func TestSpillRemove(t *testing.T) {
	srv := startRedis(t)
	s := newClient(t, srv, Options{}).Spill(spillLinks)
	name, q := spillPayload(t, s, contract.KindContent, "never sent")
	s.Remove(name)
	if _, err := s.Take(name, q); !errors.Is(err, contract.ErrLinkInvalid) {
		t.Errorf("Take of a removed payload = %v, want ErrLinkInvalid", err)
	}
}

func TestSpillRedisDown(t *testing.T) {
	srv := startRedis(t)
	var failures atomic.Int32
	s := newClient(t, srv, Options{Timeout: 200 * time.Millisecond, OnError: func(Op, error) { failures.Add(1) }}).Spill(spillLinks)
	name, q := spillPayload(t, s, contract.KindContent, "kept before the outage")
	srv.Stop()

	w, _, err := s.Create(contract.KindContent)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, "payload")
	if err := w.Close(); err == nil {
		t.Error("Close with Redis down succeeded: the payload was not kept")
	}
	if _, err := s.Take(name, q); err == nil || errors.Is(err, contract.ErrLinkInvalid) {
		t.Errorf("Take with Redis down = %v, want an error other than ErrLinkInvalid (the link is good)", err)
	}
	if failures.Load() < 2 {
		t.Errorf("%d failures reported to the client, want at least 2", failures.Load())
	}
	srv.Restart() // an empty Redis: the payload is gone, the link is refused
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.Take(name, q)
		if errors.Is(err, contract.ErrLinkInvalid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Take 5s after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
