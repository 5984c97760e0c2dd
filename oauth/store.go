package oauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"
)

// Session is what the gateway keeps for one signed-in browser: the token
// pair and whom it names. A login in progress is kept as a Session too,
// under its state, holding only ReturnTo, RedirectURI and Expires.
type Session struct {
	Token
	// UserID is the user the tokens act for (the token's
	// context.user_id, else its sub claim).
	UserID string `json:"user_id,omitempty"`
	// Organization is the organization key: the token's domain claim
	// when set, else its context.organization_id.
	Organization string `json:"organization,omitempty"`
	// Expires ends the session (or the login in progress), whatever the
	// tokens say.
	Expires time.Time `json:"expires"`
	// ReturnTo is the same-site path the user goes back to after login.
	ReturnTo string `json:"return_to,omitempty"`
	// RedirectURI is the redirect_uri of the authorization request, which
	// the code exchange must repeat.
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// Store keeps sessions under their ids. Get reports ok=false for a key it
// does not hold. Implementations are safe for concurrent use.
type Store interface {
	Get(ctx context.Context, key string) (s Session, ok bool, err error)
	Put(ctx context.Context, key string, s Session) error
	Delete(ctx context.Context, key string) error
}

// MemoryStore is a Store in memory holding at most a fixed number of
// entries: when it is full, expired entries go first, then the one closest
// to its end.
type MemoryStore struct {
	max int
	now func() time.Time

	mu      sync.RWMutex
	entries map[string]Session
}

// NewMemoryStore returns a MemoryStore for at most max entries (at least
// one), reading the clock now (time.Now when nil) to drop expired entries.
func NewMemoryStore(max int, now func() time.Time) *MemoryStore {
	if max < 1 {
		max = 1
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{max: max, now: now, entries: make(map[string]Session)}
}

// Get returns the entry under key.
func (m *MemoryStore) Get(_ context.Context, key string) (Session, bool, error) {
	m.mu.RLock()
	s, ok := m.entries[key]
	m.mu.RUnlock()
	return s, ok, nil
}

// Put keeps s under key, making room when the store is full.
func (m *MemoryStore) Put(_ context.Context, key string, s Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[key]; !ok && len(m.entries) >= m.max {
		m.makeRoom()
	}
	m.entries[key] = s
	return nil
}

// makeRoom drops every expired entry, or when none has expired the one
// that ends first. m.mu is held.
func (m *MemoryStore) makeRoom() {
	now := m.now()
	var first string
	var firstEnd time.Time
	dropped := false
	for k, s := range m.entries {
		if !now.Before(s.Expires) {
			delete(m.entries, k)
			dropped = true
			continue
		}
		if first == "" || s.Expires.Before(firstEnd) {
			first, firstEnd = k, s.Expires
		}
	}
	if !dropped && first != "" {
		delete(m.entries, first)
	}
}

// Delete forgets the entry under key.
func (m *MemoryStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	delete(m.entries, key)
	m.mu.Unlock()
	return nil
}

// Len returns the number of entries held.
func (m *MemoryStore) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}

// KeyValue is the part of a key-value storage a StorageStore uses. Caddy's
// storage (certmagic.Storage) has these methods; Load reports a missing key
// with an error matching fs.ErrNotExist.
type KeyValue interface {
	Store(ctx context.Context, key string, value []byte) error
	Load(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
}

// StorageStore is a Store in a shared key-value storage, so that sessions
// outlive a restart and are seen by every instance using that storage.
// Entries are named by a hash of the key and sealed (AES-256-GCM) with a
// key derived from it: whoever reads the storage without the session id
// (which only the browser holds) learns neither the id nor the tokens.
type StorageStore struct {
	kv     KeyValue
	prefix string
}

// NewStorageStore returns a StorageStore keeping its entries in kv under
// the folder prefix (e.g. "servicegate/oauth/sessions").
func NewStorageStore(kv KeyValue, prefix string) *StorageStore {
	return &StorageStore{kv: kv, prefix: prefix}
}

// EntryName is the name a shared store files the session key under: a
// hash of it, from which the key cannot be learnt (hex, 64 characters).
func EntryName(key string) string {
	name := sha256.Sum256([]byte("servicegate oauth entry name\x00" + key))
	return hex.EncodeToString(name[:])
}

// sealer derives the AEAD that seals the entry of a session key: a key
// derived from the session key, which only the browser holds.
func sealer(key string) (cipher.AEAD, error) {
	secret := sha256.Sum256([]byte("servicegate oauth entry key\x00" + key))
	block, err := aes.NewCipher(secret[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encodes s and seals it (AES-256-GCM) with a key derived from the
// session key, bound to where (the name it is stored under), for a store
// shared with others: StorageStore and the Redis store of package cluster.
func Seal(key, where string, s Session) ([]byte, error) {
	aead, err := sealer(key)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding a session: %w", err)
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, []byte(where)), nil
}

// ErrDamaged: a sealed session does not open with its key, or is not a
// session.
var ErrDamaged = errors.New("a stored session is damaged")

// Open opens what Seal sealed under the same key and where.
func Open(key, where string, sealed []byte) (Session, error) {
	aead, err := sealer(key)
	if err != nil {
		return Session{}, err
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return Session{}, ErrDamaged
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(where))
	if err != nil {
		return Session{}, ErrDamaged
	}
	var sess Session
	if err := json.Unmarshal(plain, &sess); err != nil {
		return Session{}, ErrDamaged
	}
	return sess, nil
}

// path is the storage path of a session key.
func (s *StorageStore) path(key string) string {
	return s.prefix + "/" + EntryName(key)
}

// Get loads and opens the entry under key.
func (s *StorageStore) Get(ctx context.Context, key string) (Session, bool, error) {
	path := s.path(key)
	sealed, err := s.kv.Load(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, fmt.Errorf("loading a session from storage: %w", err)
	}
	sess, err := Open(key, path, sealed)
	if err != nil {
		return Session{}, false, err
	}
	return sess, true, nil
}

// Put seals sess and stores it under key.
func (s *StorageStore) Put(ctx context.Context, key string, sess Session) error {
	path := s.path(key)
	sealed, err := Seal(key, path, sess)
	if err != nil {
		return err
	}
	if err := s.kv.Store(ctx, path, sealed); err != nil {
		return fmt.Errorf("storing a session: %w", err)
	}
	return nil
}

// Delete removes the entry under key; a missing entry is not an error.
func (s *StorageStore) Delete(ctx context.Context, key string) error {
	if err := s.kv.Delete(ctx, s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting a session from storage: %w", err)
	}
	return nil
}
