package installations

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Store keeps sealed installation records by organization id. It never
// sees a secret in clear. Every method is safe for concurrent use.
type Store interface {
	// Put stores a sealed record, replacing the organization's earlier
	// one; it is durable when Put returns.
	Put(organization string, sealed []byte) error
	// Get returns the organization's sealed record, or ErrNotFound.
	Get(organization string) ([]byte, error)
	// Delete removes the organization's record; removing none is not an
	// error.
	Delete(organization string) error
	// Each calls fn with every record until fn returns an error.
	Each(fn func(organization string, sealed []byte) error) error
	// Close releases the store.
	Close() error
}

// Replacer is a Store shared by several processes that can replace a
// record only while it exists: a token renewed on one instance must not
// bring back an installation another instance removed meanwhile.
type Replacer interface {
	// Replace stores a sealed record when the organization has one, and
	// reports whether it had.
	Replace(organization string, sealed []byte) (bool, error)
}

// Pinger is a Store that can tell whether it answers now (a shared store
// over the network); a Store without it always does once open.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Swapper is a Store that can seal records again in bulk: each record is
// replaced only while it still holds what was read, so that sealing it
// again never brings back an installation removed or replaced meanwhile
// (by another instance, say). It announces no change: the records hold
// what they held.
type Swapper interface {
	// Swap replaces each record that still holds Old with New, and says
	// how many it replaced.
	Swap(records []Swap) (swapped int, err error)
}

// Swap is one record to seal again.
type Swap struct {
	Organization string
	Old, New     []byte
}

// ErrNotFound is an organization with no installation.
var ErrNotFound = errors.New("no installation for this organization")

var bucketInstallations = []byte("installations")

// BoltStore is a Store in one bbolt file: each Put and Delete is synced to
// disk before it returns, so a killed process keeps every installation it
// acknowledged.
type BoltStore struct {
	db *bolt.DB
}

// OpenBolt opens (or creates) the store file at path, readable by its
// owner only.
func OpenBolt(path string) (*BoltStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("installations store: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("installations store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketInstallations)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("installations store %s: %w", path, err)
	}
	return &BoltStore{db: db}, nil
}

// Put implements Store.
func (s *BoltStore) Put(organization string, sealed []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInstallations).Put([]byte(organization), sealed)
	})
}

// Get implements Store.
func (s *BoltStore) Get(organization string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketInstallations).Get([]byte(organization))
		if v == nil {
			return ErrNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// Delete implements Store.
func (s *BoltStore) Delete(organization string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInstallations).Delete([]byte(organization))
	})
}

// Each implements Store.
func (s *BoltStore) Each(fn func(organization string, sealed []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInstallations).ForEach(func(k, v []byte) error {
			return fn(string(k), append([]byte(nil), v...))
		})
	})
}

// Swap implements Swapper, in one transaction.
func (s *BoltStore) Swap(records []Swap) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInstallations)
		for _, r := range records {
			if !bytes.Equal(b.Get([]byte(r.Organization)), r.Old) {
				continue
			}
			if err := b.Put([]byte(r.Organization), r.New); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Close implements Store.
func (s *BoltStore) Close() error { return s.db.Close() }

// MemoryStore is a Store in the process's memory, for tests and for a Go
// app that keeps installations elsewhere.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string][]byte
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{records: make(map[string][]byte)} }

// Put implements Store.
func (s *MemoryStore) Put(organization string, sealed []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[organization] = append([]byte(nil), sealed...)
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(organization string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.records[organization]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(organization string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, organization)
	return nil
}

// Each implements Store.
func (s *MemoryStore) Each(fn func(organization string, sealed []byte) error) error {
	s.mu.Lock()
	copied := make(map[string][]byte, len(s.records))
	for k, v := range s.records {
		copied[k] = v
	}
	s.mu.Unlock()
	for k, v := range copied {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Swap implements Swapper.
func (s *MemoryStore) Swap(records []Swap) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range records {
		if old, ok := s.records[r.Organization]; ok && bytes.Equal(old, r.Old) {
			s.records[r.Organization] = append([]byte(nil), r.New...)
			n++
		}
	}
	return n, nil
}

// Close implements Store.
func (s *MemoryStore) Close() error { return nil }
