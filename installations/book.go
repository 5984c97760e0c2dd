package installations

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/servicegate/servicegate/signature"
)

// DefaultRenewBefore is how long before it expires an app token is
// renewed, at most: a token is renewed once less than a fifth of its
// lifetime or less than this is left, whichever comes first.
const DefaultRenewBefore = 5 * time.Minute

// grantTimeout bounds one app token request.
const grantTimeout = 15 * time.Second

// BookConfig configures a Book.
type BookConfig struct {
	// Store keeps the sealed records. Required.
	Store Store
	// Sealer seals and opens them. Required.
	Sealer *Sealer
	// Grant asks the service for an app token for an installation (the
	// service_app grant). Required for Token.
	Grant func(ctx context.Context, in *Installation) (Token, error)
	// RenewBefore: see DefaultRenewBefore, the default.
	RenewBefore time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Lock, when set, is taken around a token renewal of an
	// organization, so that of several instances sharing the store one
	// asks the service and the others read the token it stored. It
	// returns what releases it.
	Lock func(ctx context.Context, organization string) (unlock func(), err error)
	// Renewed, when set, is told of every token request Token makes,
	// with its error, for metrics. err never holds a secret or a token.
	Renewed func(organization string, err error)
	// App is the app's client id: every record is bound to it, so that a
	// record copied from another app's store does not open.
	App string
	// Unreadable, when set, is told once of each organization whose
	// record does not open (damaged, sealed under no configured key, or
	// another app's): it is skipped, and the rest go on.
	Unreadable func(organization string, err error)
	// Resealed, when set, is told how many records sealed under a retired
	// key (or in the earlier format) were sealed again under the current
	// key, and how many could not be, each time the book does so.
	Resealed func(resealed, failed int)
}

// A Book holds the installations of an app: sealed in its Store, and in a
// local copy that answers look-ups by organization id or domain without a
// call to the store. The local copy holds what the hot paths need (the
// organization's names, its app secret and its current app token); the
// rest is read from the store when needed. A Book is safe for concurrent
// use.
type Book struct {
	cfg BookConfig

	mu       sync.RWMutex
	byID     map[string]*entry
	byDomain map[string]*entry

	// bad holds the organizations (ids) whose record does not open, each
	// with its domain when the book knew it before (a record that opened
	// once in this process), else "". hasBad is len(bad) > 0, read
	// without the lock on the hot path.
	bad    map[string]string
	hasBad atomic.Bool

	flight singleflight.Group
	// writes orders Install, Remove and the storing of a renewed token,
	// so that a token renewed during an uninstall does not bring the
	// installation back.
	writes sync.Mutex
}

// entry is the local copy of one installation.
type entry struct {
	id, domain string
	secret     string
	retired    bool // the stored record is still sealed under a retired key
	token      atomic.Pointer[tokenState]
	verifier   atomic.Pointer[signature.Verifier] // made at the first delivery
	paidAt     atomic.Int64                       // unix nanos of the last subscription_paid purge
}

// tokenState is an app token and when to renew it.
type tokenState struct {
	value   string
	renewAt int64 // unix nanos
	expires int64 // unix nanos
}

// NewBook returns a Book over cfg.Store, with its local copy loaded from
// it. Records sealed under a retired key are sealed again under the
// current one. A record that does not open is skipped (see
// BookConfig.Unreadable): one bad record harms no other organization.
//
// A record of the earlier format (1, bound to its organization only)
// opens only while a store written before format 2 is migrated, and only
// for the app that began the migration: a store that records no format
// and holds no record of format 2, or one that records a migration of
// this app's still under way (see Formats). Anywhere else (a store
// created at format 2, into which a record of format 1 was copied, or
// another app's migration) it does not open, like a copy of a format-2
// record of another app.
func NewBook(cfg BookConfig) (*Book, error) {
	if cfg.Store == nil || cfg.Sealer == nil {
		return nil, errors.New("installations: a store and a sealer are required")
	}
	if cfg.RenewBefore <= 0 {
		cfg.RenewBefore = DefaultRenewBefore
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	formats, hasFormats := cfg.Store.(Formats)
	var format Format
	var known bool
	if hasFormats {
		var err error
		if format, known, err = formats.Format(); err != nil {
			return nil, fmt.Errorf("reading the installations: %w", err)
		}
	}
	current := cfg.Sealer.Bind(cfg.App).withV1(false)
	cfg.Sealer = current
	b := &Book{cfg: cfg, byID: make(map[string]*entry), byDomain: make(map[string]*entry), bad: map[string]string{}}
	var retired, earlier []Swap
	seenV2 := false
	err := cfg.Store.Each(func(org string, sealed []byte) error {
		if len(sealed) > 0 && sealed[0] == sealV1 {
			earlier = append(earlier, Swap{Organization: org, Old: sealed})
			return nil // decided once every record is seen
		}
		seenV2 = seenV2 || (len(sealed) > 0 && sealed[0] == sealVersion)
		retired = b.load(current, org, sealed, retired)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the installations: %w", err)
	}
	migrating := hasFormats && len(earlier) > 0 &&
		((known && format.Migrating == cfg.App) || (!known && !seenV2))
	opener := current.withV1(migrating)
	for _, r := range earlier {
		retired = b.load(opener, r.Organization, r.Old, retired)
	}
	resealed := b.reseal(retired)
	if hasFormats {
		now := Format{Version: sealVersion}
		if migrating && resealed < len(retired) {
			now.Migrating = cfg.App // some are left for the next start
			b.cfg.Sealer = opener
		}
		if !known || now != format {
			if err := formats.SetFormat(now); err != nil {
				return nil, fmt.Errorf("recording the installations store's format: %w", err)
			}
		}
	}
	return b, nil
}

// load opens one stored record with sealer into the local copy, or marks
// its organization unreadable, and returns retired with the record added
// when it is to be sealed again.
func (b *Book) load(sealer *Sealer, org string, sealed []byte, retired []Swap) []Swap {
	in, state, err := sealer.openRecord(org, sealed)
	if err != nil {
		b.markUnreadable(org, err)
		return retired
	}
	b.keep(in, state)
	if state == KeyRetired {
		if again, err := sealer.sealRecord(in); err == nil {
			retired = append(retired, Swap{Organization: org, Old: sealed, New: again})
		}
	}
	return retired
}

// markUnreadable skips an organization whose record does not open,
// telling Unreadable the first time.
func (b *Book) markUnreadable(org string, err error) {
	b.mu.Lock()
	domain, seen := b.bad[org]
	if old := b.byID[org]; old != nil {
		domain = old.domain
	}
	b.dropLocked(org)
	b.bad[org] = domain
	b.hasBad.Store(true)
	b.mu.Unlock()
	if !seen && b.cfg.Unreadable != nil {
		b.cfg.Unreadable(org, err)
	}
}

// Unreadable tells whether the organization named by id, by domain, or
// by both may be one whose stored record does not open: its deliveries
// are to be tried again later, not verified with any other secret nor
// refused as not installed. An id names such an organization when its
// record is one of them; a domain when it was the domain of one (known
// when the record opened earlier in this process), or, named without an
// id, when it is no readable installation's domain while a record whose
// domain was never known does not open: such a delivery may be that
// organization's, and the service sends it again.
func (b *Book) Unreadable(domain, id string) bool {
	if !b.hasBad.Load() || (domain == "" && id == "") {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if _, ok := b.bad[id]; ok && id != "" {
		return true
	}
	if domain == "" {
		return false
	}
	if b.byDomain[domain] != nil {
		return false // a readable installation's domain
	}
	unknown := false
	for _, d := range b.bad {
		if d == domain {
			return true
		}
		unknown = unknown || d == ""
	}
	return unknown && id == ""
}

// forgetBadLocked: the organization's record opens again, or is gone.
func (b *Book) forgetBadLocked(org string) {
	delete(b.bad, org)
	b.hasBad.Store(len(b.bad) > 0)
}

// reseal stores the records sealed again under the current key, each only
// while the store still holds what was read, marks the entries that are,
// and says how many were stored.
func (b *Book) reseal(records []Swap) int {
	if len(records) == 0 {
		return 0
	}
	b.writes.Lock()
	done := 0
	if sw, ok := b.cfg.Store.(Swapper); ok {
		done, _ = sw.Swap(records)
	} else {
		for _, r := range records {
			if r.New != nil && b.cfg.Store.Put(r.Organization, r.New) == nil {
				done++
			}
		}
	}
	b.writes.Unlock()
	if done == len(records) {
		b.mu.Lock()
		for _, r := range records {
			if e := b.byID[r.Organization]; e != nil {
				e.retired = false
			}
		}
		b.mu.Unlock()
	}
	if b.cfg.Resealed != nil {
		b.cfg.Resealed(done, len(records)-done)
	}
	return done
}

// Ping tells whether the store answers now: the health of the
// installations (the local copy serves the hot paths meanwhile).
func (b *Book) Ping(ctx context.Context) error {
	if p, ok := b.cfg.Store.(Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// KeyStates counts the stored records by the key they are sealed under: a
// retired key may go once no record is KeyRetired on any instance.
func (b *Book) KeyStates() [NumKeyStates]int {
	var out [NumKeyStates]int
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, e := range b.byID {
		if e.retired {
			out[KeyRetired]++
		} else {
			out[KeyCurrent]++
		}
	}
	out[KeyNone] = len(b.bad)
	return out
}

// Len is the number of installations held.
func (b *Book) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.byID)
}

// keep puts in into the local copy, replacing the organization's earlier
// entry; state is the key its stored record is sealed under.
func (b *Book) keep(in *Installation, state KeyState) {
	e := &entry{id: in.OrganizationID, domain: in.Domain, secret: in.AppSecret, retired: state == KeyRetired}
	if in.Token.AccessToken != "" {
		e.token.Store(b.tokenState(in.Token))
	}
	b.mu.Lock()
	b.dropLocked(in.OrganizationID)
	b.forgetBadLocked(in.OrganizationID)
	b.byID[e.id] = e
	if e.domain != "" {
		b.byDomain[e.domain] = e
	}
	b.mu.Unlock()
}

func (b *Book) dropLocked(org string) {
	if old := b.byID[org]; old != nil {
		delete(b.byID, org)
		if old.domain != "" && b.byDomain[old.domain] == old {
			delete(b.byDomain, old.domain)
		}
	}
}

// tokenState is t with its renewal moment: a fifth of its lifetime or
// RenewBefore ahead of its expiry, whichever is later.
func (b *Book) tokenState(t Token) *tokenState {
	exp := t.Expires.UnixNano()
	ahead := t.Expires.Sub(t.IssuedAt) / 5
	if ahead > b.cfg.RenewBefore || ahead <= 0 {
		ahead = b.cfg.RenewBefore
	}
	return &tokenState{value: t.AccessToken, renewAt: exp - int64(ahead), expires: exp}
}

// Org names an organization: by its domain, or by its id. The two are
// kept apart: a look-up by domain never finds an organization whose id is
// that string, nor the reverse.
type Org struct {
	ID, Domain string
}

// String is the name a log line gives the organization.
func (o Org) String() string {
	if o.Domain != "" {
		return o.Domain
	}
	return o.ID
}

// lookup finds the entry of an organization: by its domain when o names
// one, else by its id. When o names both, the entry found must have both.
func (b *Book) lookup(o Org) *entry {
	b.mu.RLock()
	var e *entry
	if o.Domain != "" {
		e = b.byDomain[o.Domain]
		if e != nil && o.ID != "" && e.id != o.ID {
			e = nil
		}
	} else if o.ID != "" {
		e = b.byID[o.ID]
	}
	b.mu.RUnlock()
	return e
}

// lookupID finds the entry of the organization whose id is id.
func (b *Book) lookupID(id string) *entry { return b.lookup(Org{ID: id}) }

// Secret returns the app secret of the organization o names, from the
// local copy.
func (b *Book) Secret(o Org) (string, bool) {
	if e := b.lookup(o); e != nil {
		return e.secret, true
	}
	return "", false
}

// Installation returns the verifier of the app secret of the organization
// named by domain when it is not empty, else by id, with the
// organization's id and domain: the secret source of webhook.Checker.
func (b *Book) Installation(domain, id string) (*signature.Verifier, string, string, bool) {
	o := Org{Domain: domain}
	if domain == "" {
		o.ID = id
	}
	e := b.lookup(o)
	if e == nil {
		return nil, "", "", false
	}
	v := e.verifier.Load()
	if v == nil {
		var err error
		if v, err = signature.NewVerifier(e.secret); err != nil {
			return nil, "", "", false // an empty secret is never stored
		}
		e.verifier.Store(v)
	}
	return v, e.id, e.domain, true
}

// Find returns the organization named by name, an id or a domain, for an
// operator's request: ErrNotFound when none has it, an error when one
// organization has it as its id and another as its domain.
func (b *Book) Find(name string) (Org, error) {
	byID, byDomain := b.lookup(Org{ID: name}), b.lookup(Org{Domain: name})
	switch {
	case byID != nil && byDomain != nil && byID != byDomain:
		return Org{}, fmt.Errorf("%q is the id of organization %s and the domain of organization %s: name it by the other", name, byID.id, byDomain.id)
	case byID != nil:
		return Org{ID: byID.id, Domain: byID.domain}, nil
	case byDomain != nil:
		return Org{ID: byDomain.id, Domain: byDomain.domain}, nil
	}
	if b.Unreadable("", name) {
		return Org{ID: name}, nil // its record does not open: it may be removed
	}
	return Org{}, ErrNotFound
}

// ErrTaken is an installation whose domain is already another
// organization's: storing it would take that organization's place.
var ErrTaken = errors.New("the domain belongs to another organization's installation")

// Install stores in, sealed, replacing the organization's earlier
// installation, and puts it in the local copy.
func (b *Book) Install(in *Installation) error {
	sealed, err := b.cfg.Sealer.sealRecord(in)
	if err != nil {
		return err
	}
	b.writes.Lock()
	defer b.writes.Unlock()
	if e := b.lookup(Org{Domain: in.Domain}); in.Domain != "" && e != nil && e.id != in.OrganizationID {
		return fmt.Errorf("storing the installation of %s: %w (organization %s)", in, ErrTaken, e.id)
	}
	if err := b.cfg.Store.Put(in.OrganizationID, sealed); err != nil {
		return fmt.Errorf("storing the installation of %s: %w", in, err)
	}
	b.keep(in, KeyCurrent)
	return nil
}

// Remove deletes the installation of the organization whose id is id, and
// its token. Removing none is not an error.
func (b *Book) Remove(id string) error {
	b.writes.Lock()
	defer b.writes.Unlock()
	if err := b.cfg.Store.Delete(id); err != nil {
		return fmt.Errorf("removing the installation of organization %s: %w", id, err)
	}
	b.Forget(id)
	b.mu.Lock()
	b.forgetBadLocked(id)
	b.mu.Unlock()
	return nil
}

// Forget drops an organization from the local copy only, so that the next
// Refresh or look-up reads it again: what a change made by another
// instance calls.
func (b *Book) Forget(org string) {
	b.mu.Lock()
	b.dropLocked(org)
	b.mu.Unlock()
}

// Refresh reads one organization (by id) from the store into the local
// copy, or drops it from the copy when the store has none: what a change
// announced by another instance calls.
func (b *Book) Refresh(org string) error {
	in, err := b.Get(org)
	switch {
	case errors.Is(err, ErrNotFound):
		b.Forget(org)
		b.mu.Lock()
		b.forgetBadLocked(org)
		b.mu.Unlock()
		return nil
	case errors.Is(err, ErrSealed):
		return nil // Get skipped it
	case err != nil:
		return err
	}
	b.keep(in, KeyCurrent)
	return nil
}

// Get reads the whole installation of the organization whose id is id
// from the store. A record sealed under a retired key is sealed again
// under the current one; one that does not open is skipped (ErrSealed).
func (b *Book) Get(id string) (*Installation, error) {
	sealed, err := b.cfg.Store.Get(id)
	if err != nil {
		return nil, err
	}
	in, state, err := b.cfg.Sealer.openRecord(id, sealed)
	if err != nil {
		b.markUnreadable(id, err)
		return nil, err
	}
	if state == KeyRetired {
		if again, err := b.cfg.Sealer.sealRecord(in); err == nil {
			b.reseal([]Swap{{Organization: id, Old: sealed, New: again}})
		}
	}
	return in, nil
}

// Summary is what may be shown of an installation: never a secret or a
// token.
type Summary struct {
	// App is the app's client id.
	App            string    `json:"app"`
	OrganizationID string    `json:"organization_id"`
	Domain         string    `json:"domain,omitempty"`
	BaseURL        string    `json:"base_url,omitempty"`
	InstalledAt    time.Time `json:"installed_at"`
	TokenExpiresAt time.Time `json:"token_expires_at,omitzero"`
	// Key is the key the record is sealed under: current, retired, or
	// unreadable (it does not open, and is skipped).
	Key string `json:"key"`
}

// List returns a summary of every stored installation, by organization id.
func (b *Book) List() ([]Summary, error) {
	var out []Summary
	err := b.cfg.Store.Each(func(org string, sealed []byte) error {
		in, state, err := b.cfg.Sealer.openRecord(org, sealed)
		if err != nil {
			out = append(out, Summary{OrganizationID: org, App: b.cfg.App, Key: KeyNone.String()})
			return nil
		}
		out = append(out, Summary{OrganizationID: in.OrganizationID, App: b.cfg.App, Domain: in.Domain, BaseURL: in.BaseURL,
			InstalledAt: in.InstalledAt, TokenExpiresAt: in.Token.Expires, Key: state.String()})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].OrganizationID < out[j].OrganizationID })
	return out, err
}

// Token returns a fresh app token of the organization o names, and when it
// expires: the one held while it is far from expiry,
// else a new one asked of the service, one request per organization
// however many callers ask at once. ErrNotFound: no installation.
func (b *Book) Token(ctx context.Context, o Org) (string, time.Time, error) {
	e := b.lookup(o)
	if e == nil {
		return "", time.Time{}, ErrNotFound
	}
	if t := e.token.Load(); t != nil && b.cfg.Now().UnixNano() < t.renewAt {
		return t.value, time.Unix(0, t.expires), nil
	}
	v, err, _ := b.flight.Do(e.id, func() (any, error) { return b.renew(ctx, e) })
	if err != nil {
		return "", time.Time{}, err
	}
	t := v.(*tokenState)
	return t.value, time.Unix(0, t.expires), nil
}

// renew asks the service for a new app token of e's organization and
// stores it, unless the store already holds a fresh one (renewed by
// another instance).
func (b *Book) renew(ctx context.Context, e *entry) (*tokenState, error) {
	if t := e.token.Load(); t != nil && b.cfg.Now().UnixNano() < t.renewAt {
		return t, nil // renewed by the flight that just ended
	}
	if b.cfg.Grant == nil {
		return nil, errors.New("installations: no way to ask the service for app tokens")
	}
	if b.cfg.Lock != nil {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grantTimeout)
		unlock, err := b.cfg.Lock(lctx, e.id)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("app token of organization %s: waiting for another instance's renewal: %w", e.id, err)
		}
		defer unlock()
	}
	in, err := b.Get(e.id)
	if err != nil {
		return nil, err
	}
	if in.Token.AccessToken != "" {
		if t := b.tokenState(in.Token); b.cfg.Now().UnixNano() < t.renewAt {
			e.token.Store(t)
			return t, nil
		}
	}
	// The token serves every caller of the flight: one caller leaving
	// does not cancel it, a deadline bounds it.
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grantTimeout)
	tok, err := b.cfg.Grant(gctx, in)
	cancel()
	if b.cfg.Renewed != nil {
		b.cfg.Renewed(e.id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("app token of %s: %w", in, err)
	}
	in.Token = tok
	sealed, err := b.cfg.Sealer.sealRecord(in)
	if err != nil {
		return nil, err
	}
	b.writes.Lock()
	defer b.writes.Unlock()
	// The entry may have been read again from the store meanwhile (a
	// change announced by an instance, this one included): the same
	// installation still counts, another or none does not.
	cur := b.lookupID(e.id)
	if cur == nil || cur.secret != in.AppSecret {
		return nil, fmt.Errorf("app token of %s: the installation was removed or replaced meanwhile", in)
	}
	if r, ok := b.cfg.Store.(Replacer); ok {
		// Another instance may have removed it: only an existing record
		// is replaced.
		kept, err := r.Replace(in.OrganizationID, sealed)
		if err != nil {
			return nil, fmt.Errorf("storing the app token of %s: %w", in, err)
		}
		if !kept {
			b.Forget(in.OrganizationID)
			return nil, fmt.Errorf("app token of %s: the installation was removed meanwhile", in)
		}
	} else if err := b.cfg.Store.Put(in.OrganizationID, sealed); err != nil {
		return nil, fmt.Errorf("storing the app token of %s: %w", in, err)
	}
	t := b.tokenState(tok)
	e.token.Store(t)
	cur.token.Store(t)
	return t, nil
}
