package installations

import (
	"bytes"
	"context"
	"encoding/json"
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

// Format is what a store records of the format of its records, beside
// them (see Formats).
type Format struct {
	// Version is the format the store was created at, or migrated to:
	// 2 for every store this version writes.
	Version int `json:"version"`
	// Migrating is the client id of the app whose records of the
	// earlier format (1) were still being sealed again when the store
	// was last opened; empty once none is left. Only then, and only for
	// that app, does a record of format 1 open.
	Migrating string `json:"migrating,omitempty"`
}

// Formats is a Store that records the format of its records. A store
// without it opens no record of format 1.
type Formats interface {
	// Format returns what the store recorded, and false when it has
	// recorded nothing (a store written before format 2, or empty).
	Format() (f Format, known bool, err error)
	// SetFormat records f.
	SetFormat(f Format) error
}

// ErrNotFound is an organization with no installation.
var ErrNotFound = errors.New("no installation for this organization")

var (
	bucketInstallations = []byte("installations")
	// bucketFormat holds the store's Format, under keyFormat.
	bucketFormat = []byte("format")
	keyFormat    = []byte("format")
)

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

// Format implements Formats.
func (s *BoltStore) Format() (f Format, known bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketFormat)
		if b == nil {
			return nil
		}
		raw := b.Get(keyFormat)
		if raw == nil {
			return nil
		}
		known = true
		return json.Unmarshal(raw, &f)
	})
	if err != nil {
		return Format{}, false, fmt.Errorf("reading the installations store's format: %w", err)
	}
	return f, known, nil
}

// SetFormat implements Formats.
func (s *BoltStore) SetFormat(f Format) error {
	raw, _ := json.Marshal(f)
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketFormat)
		if err != nil {
			return err
		}
		return b.Put(keyFormat, raw)
	})
}

// Close implements Store.
func (s *BoltStore) Close() error { return s.db.Close() }

// MemoryStore is a Store in the process's memory, for tests and for a Go
// app that keeps installations elsewhere.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string][]byte
	format  *Format
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

// Format implements Formats.
func (s *MemoryStore) Format() (Format, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.format == nil {
		return Format{}, false, nil
	}
	return *s.format, true, nil
}

// SetFormat implements Formats.
func (s *MemoryStore) SetFormat(f Format) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.format = &f
	return nil
}

// Close implements Store.
func (s *MemoryStore) Close() error { return nil }
