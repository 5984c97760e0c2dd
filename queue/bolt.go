package queue

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Store keeps deliveries durably. Every method is safe for concurrent use.
type Store interface {
	// Add stores d, giving it its ID and Seq; the delivery is durable when
	// Add returns. With a dedup window, an identical delivery (same
	// organization and body) stored within it is not stored again and
	// Add returns ErrDuplicate.
	Add(d *Delivery, dedup time.Duration) error
	// Pending lists the deliveries waiting to be sent, in received order.
	Pending() ([]Meta, error)
	// Payload reads a delivery's headers and body.
	Payload(id string) (http.Header, []byte, error)
	// Update records an attempt.
	Update(m Meta) error
	// Done removes a delivered delivery.
	Done(id string) error
	// Bury turns a pending delivery into a dead letter.
	Bury(m Meta) error
	// Dead lists the dead letters, in received order.
	Dead() ([]Meta, error)
	// Revive turns a dead letter back into a pending delivery with no
	// attempts, due now.
	Revive(id string, now time.Time) (Meta, error)
	// Drop removes a dead letter and its payload.
	Drop(id string) error
	// Close releases the store.
	Close() error
}

// Errors of a Store.
var (
	ErrDuplicate = errors.New("an identical delivery was queued within the dedup window")
	ErrNotFound  = errors.New("no such delivery")
	ErrNotOurs   = errors.New("not a delivery id of this queue")
)

// Buckets of the bbolt file.
var (
	bucketPending = []byte("pending") // seq → Meta JSON
	bucketDead    = []byte("dead")    // seq → Meta JSON
	bucketPayload = []byte("payload") // seq → headers and body
	bucketDedup   = []byte("dedup")   // sha256(org, body) → unix nanos
	bucketInfo    = []byte("info")    // "epoch" → random id prefix
	keyEpoch      = []byte("epoch")
	allBuckets    = [][]byte{bucketPending, bucketDead, bucketPayload, bucketDedup, bucketInfo}
	boltOpenLimit = 5 * time.Second
)

// BoltStore is a Store in one bbolt file: each write is a transaction synced
// to disk before it returns, so a process killed at any moment keeps every
// delivery it acknowledged. Concurrent writes of the request path (Add) and
// of the delivering workers (Update, Done, Bury) share one sync each
// (bbolt's batch).
type BoltStore struct {
	db    *bolt.DB
	epoch string
}

// OpenBolt opens (or creates) the store file at path.
func OpenBolt(path string) (*BoltStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("webhook queue: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: boltOpenLimit})
	if err != nil {
		return nil, fmt.Errorf("webhook queue %s: %w", path, err)
	}
	// A delivery is acknowledged when its batch is on disk: wait little for
	// others to join a batch (bbolt's default is 10ms), since concurrent
	// deliveries arrive together anyway.
	db.MaxBatchDelay = 2 * time.Millisecond
	s := &BoltStore{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		info := tx.Bucket(bucketInfo)
		e := info.Get(keyEpoch)
		if e == nil {
			buf := make([]byte, 6)
			_, _ = rand.Read(buf)
			e = []byte(hex.EncodeToString(buf))
			if err := info.Put(keyEpoch, e); err != nil {
				return err
			}
		}
		s.epoch = string(e)
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook queue %s: %w", path, err)
	}
	return s, nil
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// id is a delivery's ID: the store's random epoch and its sequence number,
// unique across restarts of the same store.
func (s *BoltStore) id(seq uint64) string { return fmt.Sprintf("%s-%012x", s.epoch, seq) }

// seqOf parses an ID of this store.
func (s *BoltStore) seqOf(id string) ([]byte, error) {
	var seq uint64
	prefix := s.epoch + "-"
	if len(id) <= len(prefix) || id[:len(prefix)] != prefix {
		return nil, ErrNotOurs
	}
	if _, err := fmt.Sscanf(id[len(prefix):], "%x", &seq); err != nil {
		return nil, ErrNotOurs
	}
	return seqKey(seq), nil
}

// DedupKey is what identifies a delivery for the dedup window: the SHA-256
// of its organization and body.
func DedupKey(org string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(org))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// Add implements Store.
func (s *BoltStore) Add(d *Delivery, dedup time.Duration) error {
	payload, err := EncodePayload(d.Header, d.Body)
	if err != nil {
		return err
	}
	d.Size = len(d.Body)
	return s.db.Batch(func(tx *bolt.Tx) error {
		if dedup > 0 {
			dd := tx.Bucket(bucketDedup)
			k := DedupKey(d.Organization, d.Body)
			if v := dd.Get(k); len(v) == 8 {
				seen := time.Unix(0, int64(binary.BigEndian.Uint64(v)))
				if d.Received.Sub(seen) < dedup {
					return ErrDuplicate
				}
			}
			var v [8]byte
			binary.BigEndian.PutUint64(v[:], uint64(d.Received.UnixNano()))
			if err := dd.Put(k, v[:]); err != nil {
				return err
			}
		}
		pending := tx.Bucket(bucketPending)
		seq, err := pending.NextSequence()
		if err != nil {
			return err
		}
		d.Seq, d.ID = seq, s.id(seq)
		meta, err := json.Marshal(d.Meta)
		if err != nil {
			return err
		}
		if err := pending.Put(seqKey(seq), meta); err != nil {
			return err
		}
		return tx.Bucket(bucketPayload).Put(seqKey(seq), payload)
	})
}

func (s *BoltStore) list(bucket []byte) ([]Meta, error) {
	var out []Meta
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, v []byte) error {
			var m Meta
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("%w: %v", errCorrupt, err)
			}
			out = append(out, m)
			return nil
		})
	})
	return out, err
}

// Pending implements Store.
func (s *BoltStore) Pending() ([]Meta, error) { return s.list(bucketPending) }

// Dead implements Store.
func (s *BoltStore) Dead() ([]Meta, error) { return s.list(bucketDead) }

// Payload implements Store.
func (s *BoltStore) Payload(id string) (http.Header, []byte, error) {
	k, err := s.seqOf(id)
	if err != nil {
		return nil, nil, err
	}
	var h http.Header
	var body []byte
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPayload).Get(k)
		if v == nil {
			return ErrNotFound
		}
		hh, b, err := DecodePayload(v)
		h, body = hh, bytes.Clone(b) // v lives only as long as the transaction
		return err
	})
	return h, body, err
}

// Update implements Store.
func (s *BoltStore) Update(m Meta) error {
	return s.db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPending)
		k := seqKey(m.Seq)
		if b.Get(k) == nil {
			return ErrNotFound
		}
		v, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	})
}

// Done implements Store.
func (s *BoltStore) Done(id string) error {
	k, err := s.seqOf(id)
	if err != nil {
		return err
	}
	return s.db.Batch(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPending).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bucketPayload).Delete(k)
	})
}

// Bury implements Store.
func (s *BoltStore) Bury(m Meta) error {
	return s.db.Batch(func(tx *bolt.Tx) error {
		k := seqKey(m.Seq)
		if tx.Bucket(bucketPending).Get(k) == nil {
			return ErrNotFound
		}
		v, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketPending).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bucketDead).Put(k, v)
	})
}

// Revive implements Store.
func (s *BoltStore) Revive(id string, now time.Time) (Meta, error) {
	var m Meta
	k, err := s.seqOf(id)
	if err != nil {
		return m, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDead).Get(k)
		if v == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		m.Dead, m.Attempts, m.NextAttempt, m.LastStatus, m.LastError = "", 0, now, 0, ""
		nv, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketDead).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bucketPending).Put(k, nv)
	})
	return m, err
}

// Drop implements Store.
func (s *BoltStore) Drop(id string) error {
	k, err := s.seqOf(id)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDead).Get(k) == nil {
			return ErrNotFound
		}
		if err := tx.Bucket(bucketDead).Delete(k); err != nil {
			return err
		}
		return tx.Bucket(bucketPayload).Delete(k)
	})
}

// SweepDedup forgets dedup entries older than window.
func (s *BoltStore) SweepDedup(now time.Time, window time.Duration) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDedup).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 8 || now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) >= window {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Close implements Store.
func (s *BoltStore) Close() error { return s.db.Close() }
