package oauth

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMemoryStoreBounded(t *testing.T) {
	ctx := context.Background()
	now := testNow
	m := NewMemoryStore(3, func() time.Time { return now })
	put := func(key string, ends time.Duration) {
		t.Helper()
		if err := m.Put(ctx, key, Session{Expires: now.Add(ends)}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(key string) bool {
		_, ok, _ := m.Get(ctx, key)
		return ok
	}
	put("a", time.Hour)
	put("b", 3*time.Hour)
	put("c", 2*time.Hour)
	put("d", 4*time.Hour) // full: "a" ends first and goes
	if m.Len() != 3 || has("a") || !has("b") || !has("c") || !has("d") {
		t.Fatalf("after overflow: len %d a %v b %v c %v d %v", m.Len(), has("a"), has("b"), has("c"), has("d"))
	}
	put("b", 5*time.Hour) // replacing a key evicts nothing
	if m.Len() != 3 || !has("c") {
		t.Fatal("replacing an entry evicted another")
	}
	now = now.Add(150 * time.Minute) // "c" has expired
	put("e", time.Hour)
	if has("c") || !has("b") || !has("d") || !has("e") {
		t.Fatal("the expired entry was not the one dropped")
	}
	if err := m.Delete(ctx, "e"); err != nil || has("e") {
		t.Fatal("delete kept the entry")
	}
}

// mapKV is a KeyValue in a map, as certmagic's storages behave.
type mapKV struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (kv *mapKV) Store(_ context.Context, key string, value []byte) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.m[key] = append([]byte(nil), value...)
	return nil
}

func (kv *mapKV) Load(_ context.Context, key string) ([]byte, error) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	v, ok := kv.m[key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return append([]byte(nil), v...), nil
}

func (kv *mapKV) Delete(_ context.Context, key string) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if _, ok := kv.m[key]; !ok {
		return fs.ErrNotExist
	}
	delete(kv.m, key)
	return nil
}

type brokenKV struct{ mapKV }

func (*brokenKV) Load(context.Context, string) ([]byte, error) {
	return nil, errors.New("disk on fire")
}

func TestStorageStore(t *testing.T) {
	ctx := context.Background()
	kv := &mapKV{m: map[string][]byte{}}
	first := NewStorageStore(kv, "servicegate/oauth_sessions")
	id := NewID()
	sess := Session{
		Token:        Token{AccessToken: "access-secret-value", RefreshToken: "refresh-secret-value", Expiry: testNow.Add(time.Hour)},
		UserID:       "7",
		Organization: "acme.example",
		Expires:      testNow.Add(24 * time.Hour),
	}
	if err := first.Put(ctx, id, sess); err != nil {
		t.Fatal(err)
	}
	if len(kv.m) != 1 {
		t.Fatalf("%d entries, want 1", len(kv.m))
	}
	for key, value := range kv.m {
		name := strings.TrimPrefix(key, "servicegate/oauth_sessions/")
		if _, err := hex.DecodeString(name); err != nil || len(name) != 64 || strings.Contains(key, id) {
			t.Fatalf("entry named %q: want a hex digest, never the id", key)
		}
		for _, secret := range []string{id, "access-secret-value", "refresh-secret-value", "acme.example"} {
			if strings.Contains(string(value), secret) {
				t.Fatalf("the stored entry shows %q", secret)
			}
		}
	}

	// A second store over the same storage (another instance, or after a
	// restart) reads the session.
	second := NewStorageStore(kv, "servicegate/oauth_sessions")
	got, ok, err := second.Get(ctx, id)
	if err != nil || !ok {
		t.Fatalf("second store: ok %v err %v", ok, err)
	}
	if got.AccessToken != sess.AccessToken || got.RefreshToken != sess.RefreshToken || got.UserID != "7" ||
		!got.Expiry.Equal(sess.Expiry) || !got.Expires.Equal(sess.Expires) {
		t.Fatalf("read back %+v", got)
	}
	if _, ok, err := second.Get(ctx, NewID()); ok || err != nil {
		t.Fatalf("unknown id: ok %v err %v", ok, err)
	}

	// A tampered entry is an error, not a session.
	tampered := &mapKV{m: maps.Clone(kv.m)}
	for k, v := range tampered.m {
		v[len(v)-1] ^= 1
		tampered.m[k] = v
	}
	if _, ok, err := NewStorageStore(tampered, "servicegate/oauth_sessions").Get(ctx, id); ok || err == nil {
		t.Fatalf("tampered entry: ok %v err %v", ok, err)
	}
	if _, _, err := NewStorageStore(&brokenKV{}, "p").Get(ctx, id); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("a failing storage: %v", err)
	}

	if err := second.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := second.Delete(ctx, id); err != nil {
		t.Fatalf("deleting a missing entry: %v", err)
	}
	if _, ok, _ := first.Get(ctx, id); ok {
		t.Fatal("the session outlived its deletion")
	}
}
