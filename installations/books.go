package installations

import (
	"context"
	"net/http"
	"sync"

	"github.com/servicegate/servicegate/webhook"
)

// Books holds the books of the loaded configs, by the store each keeps its
// installations in (a file, or a Redis server and app): the latest
// config's book of each store. The zero value is ready to use.
type Books struct {
	mu      sync.Mutex
	byStore map[string]*Book
}

// Keep files b as the book of store until release, in place of the book
// of an older config.
func (s *Books) Keep(store string, b *Book) (release func()) {
	s.mu.Lock()
	if s.byStore == nil {
		s.byStore = map[string]*Book{}
	}
	s.byStore[store] = b
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.byStore[store] == b {
			delete(s.byStore, store)
		}
		s.mu.Unlock()
	}
}

// Of is the book of store, nil when none is kept.
func (s *Books) Of(store string) *Book {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byStore[store]
}

// each calls fn with every book until it returns false.
func (s *Books) each(fn func(*Book) bool) {
	s.mu.Lock()
	books := make([]*Book, 0, len(s.byStore))
	for _, b := range s.byStore {
		books = append(books, b)
	}
	s.mu.Unlock()
	for _, b := range books {
		if !fn(b) {
			return
		}
	}
}

// Len counts the installations the books hold.
func (s *Books) Len() int {
	n := 0
	s.each(func(b *Book) bool { n += b.Len(); return true })
	return n
}

// KeyStates adds up the records of every book by key state.
func (s *Books) KeyStates() [NumKeyStates]int {
	var out [NumKeyStates]int
	s.each(func(b *Book) bool {
		for k, n := range b.KeyStates() {
			out[k] += n
		}
		return true
	})
	return out
}

// QueuedToken sets, on the header h of a queued delivery when it is sent,
// the app token of the organization its verified organization headers
// name, from the book kept for store (the queue outlives config reloads),
// under header; inbound copies are removed.
func (s *Books) QueuedToken(store, header string) func(ctx context.Context, organization string, h http.Header) {
	return func(ctx context.Context, _ string, h http.Header) {
		delete(h, header)
		b := s.Of(store)
		o := Org{ID: h.Get(webhook.HeaderOrgID), Domain: h.Get(webhook.HeaderDomain)}
		if b == nil || (o.ID == "" && o.Domain == "") {
			return
		}
		if tok, _, err := b.Token(ctx, o); err == nil {
			h[header] = []string{tok}
		}
	}
}
