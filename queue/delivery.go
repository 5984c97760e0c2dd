// Package queue delivers verified webhook deliveries to an app durably: a
// delivery is stored (and synced to disk) before the service is answered,
// then sent to the app with retries, in the order received for each
// organization, until the app acknowledges it with a 2xx or the delivery is
// set aside as a dead letter for an operator to replay or drop.
//
// The package knows nothing of Caddy. A Queue runs over a Store (BoltStore,
// an embedded bbolt file, is the default) and a Sender (HTTPSender posts to
// the app).
package queue

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Meta is what the queue knows of a delivery besides its headers and body:
// everything an operator may list. It never holds a signature or a body.
type Meta struct {
	// ID names the delivery on every attempt (the app deduplicates by it).
	ID string `json:"id"`
	// Seq orders deliveries as they were received.
	Seq uint64 `json:"seq"`
	// Organization is X-Service-Domain, else X-Service-Id, else "".
	Organization string `json:"organization"`
	// To is the app's base address; Method and URI are the request's.
	To     string `json:"to"`
	Method string `json:"method"`
	URI    string `json:"uri"`
	// Size is the body's length in bytes.
	Size int `json:"size"`
	// Received is when the service's request was acknowledged.
	Received time.Time `json:"received"`
	// Attempts counts the sends so far; NextAttempt is when the next is due.
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt"`
	// LastStatus and LastError say how the last attempt ended.
	LastStatus int    `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	// Dead is set on a dead letter: why it was given up.
	Dead string `json:"dead,omitempty"`
	// Traceparent is the W3C trace context of the request that queued
	// the delivery, kept with it so that every attempt, after a restart
	// too, joins that request's trace.
	Traceparent string `json:"traceparent,omitempty"`
}

// Delivery is a delivery to enqueue: its metadata, and the headers and
// body to send to the app exactly as they were received.
type Delivery struct {
	Meta
	Header http.Header
	Body   []byte
}

// EncodePayload packs headers and body into the one value every store keeps
// for a delivery: the length of the headers' JSON, the JSON, then the body
// bytes as received.
func EncodePayload(h http.Header, body []byte) ([]byte, error) {
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, binary.MaxVarintLen64, binary.MaxVarintLen64+len(hj)+len(body))
	n := binary.PutUvarint(out, uint64(len(hj)))
	out = append(out[:n], hj...)
	return append(out, body...), nil
}

var errCorrupt = errors.New("stored delivery is corrupt")

// DecodePayload is the inverse of EncodePayload; a corrupt value is an
// error, never a panic.
func DecodePayload(v []byte) (http.Header, []byte, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return nil, nil, errCorrupt
	}
	var h http.Header
	if err := json.Unmarshal(v[k:k+int(n)], &h); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return h, v[k+int(n):], nil
}

// Deliveries is a durable webhook queue as its users see it: Queue keeps it
// on one machine's disk, cluster.Queue in Redis for several instances.
type Deliveries interface {
	// Enqueue stores d durably, giving it its ID; once it returns without
	// error, d will reach the app or become a dead letter. ErrDuplicate
	// says an identical delivery was queued within the dedup window.
	Enqueue(d *Delivery) error
	// Stats reports the depth and the oldest delivery, for metrics.
	Stats() Stats
	// Pending lists the deliveries waiting or in flight, metadata only.
	Pending() ([]Meta, error)
	// Dead lists the dead letters, metadata only.
	Dead() ([]Meta, error)
	// Replay sends a dead letter again, as a new first attempt.
	Replay(id string) error
	// ReplayOrganization replays every dead letter of an organization and
	// says how many.
	ReplayOrganization(org string) (int, error)
	// Drop removes a dead letter.
	Drop(id string) error
	// Close stops delivering; attempts under way are cancelled and kept.
	Close() error
}

var _ Deliveries = (*Queue)(nil)
