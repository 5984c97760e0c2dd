package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/contract"
)

// spillKeys is the key space of spilled payloads: <prefix>spill:<name>.
const spillKeys = "spill:"

// Spill keeps spilled payloads in Redis, so that a link minted by one
// instance downloads on any other, once: each payload is one Redis string
// that lives as long as its link, and a download takes it with GETDEL, so
// of any number of downloads at once, on any instances, exactly one gets
// it. Links are signed as contract.Store signs them; every instance needs
// the same key. It implements contract.Payloads.
//
// A payload is held in memory while it is written and while it is
// downloaded, and each Redis call that carries it is bounded by the
// Client's timeout. When Redis fails, Close of a payload being written
// fails (the payload is not kept) and Take returns an error other than
// contract.ErrLinkInvalid.
type Spill struct {
	c     *Client
	links contract.Links
}

// Spill returns the payload store on c whose links are signed and checked
// by links; its TTL is the lifetime of the payloads in Redis.
func (c *Client) Spill(links contract.Links) *Spill {
	return &Spill{c: c, links: links}
}

func (s *Spill) key(name string) string { return s.c.prefix + spillKeys + name }

// Create starts a payload of kind; it is kept in Redis when the returned
// writer is closed.
func (s *Spill) Create(kind string) (io.WriteCloser, string, error) {
	name := contract.NewName(kind)
	return &spillWriter{s: s, name: name}, name, nil
}

// Link returns the query of the signed link to the payload called name.
func (s *Spill) Link(name string) string {
	q, _ := s.links.Sign(name)
	return q
}

// Remove deletes the payload called name; a failure is only reported to
// the Client (the payload expires with its link anyway).
func (s *Spill) Remove(name string) {
	if !contract.ValidName(name) {
		return
	}
	_ = s.c.Call(context.Background(), OpSpillTake, func(ctx context.Context) error {
		return s.c.rdb.Del(ctx, s.key(name)).Err()
	})
}

// Take checks the link (before any Redis call) and takes the payload out
// of Redis: the first download gets it, every later one ErrLinkInvalid.
func (s *Spill) Take(name string, query url.Values) (contract.Payload, error) {
	if err := s.links.Check(name, query); err != nil {
		return contract.Payload{}, err
	}
	var b []byte
	err := s.c.Call(context.Background(), OpSpillTake, func(ctx context.Context) error {
		var err error
		b, err = s.c.rdb.GetDel(ctx, s.key(name)).Bytes()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return contract.Payload{}, contract.ErrLinkInvalid
	}
	if err != nil {
		return contract.Payload{}, err
	}
	return contract.Payload{ReadCloser: io.NopCloser(bytes.NewReader(b)), Size: int64(len(b))}, nil
}

// spillWriter gathers a payload and keeps it in Redis on Close.
type spillWriter struct {
	s    *Spill
	name string
	buf  bytes.Buffer
	done bool
}

func (w *spillWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("payload already closed")
	}
	return w.buf.Write(p)
}

// Close keeps the payload in Redis for the links' TTL.
func (w *spillWriter) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.s.links.TTL <= 0 {
		return errors.New("spilled payloads need a positive lifetime")
	}
	err := w.s.c.Call(context.Background(), OpSpillStore, func(ctx context.Context) error {
		return w.s.c.rdb.Set(ctx, w.s.key(w.name), w.buf.Bytes(), w.s.links.TTL).Err()
	})
	w.buf = bytes.Buffer{}
	return err
}

// Interface guard.
var _ contract.Payloads = (*Spill)(nil)
