package contract

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrLinkInvalid is a payload link that is tampered with, expired, or whose
// payload is gone (downloaded or swept).
var ErrLinkInvalid = errors.New("the link is invalid or has expired")

// Payloads keeps the payloads handed over by URL, each readable once
// through a signed, expiring link: Store on this machine's disk, or
// cluster.Spill in Redis, shared by every instance.
type Payloads interface {
	// Create starts a new payload of kind (KindStrings, KindContent or
	// KindPreview); name is its name in links. The payload is kept when
	// w is closed: an error from Close means it was not.
	Create(kind string) (w io.WriteCloser, name string, err error)
	// Link returns the query of the signed link to the payload called
	// name; call it once the payload is closed.
	Link(name string) string
	// Remove deletes the payload called name (one whose answer was never
	// sent).
	Remove(name string)
	// Take checks the signed link of the payload called name and hands
	// the payload over once. A refused link (tampered with, expired, used)
	// is ErrLinkInvalid; any other error means the payloads could not be
	// reached, and the link may work later.
	Take(name string, query url.Values) (Payload, error)
}

// Payload is a payload handed over by Take; the caller closes it.
type Payload struct {
	io.ReadCloser
	// Size is its length in bytes.
	Size int64
}

// Links signs and checks the links to payloads: HMAC-SHA256 of the
// payload's name and expiry. Every instance that serves another's links
// needs the same Key.
type Links struct {
	// Key signs the links.
	Key []byte
	// TTL is how long a link stays valid.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (l Links) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Sign returns the query of the link to the payload called name,
// "expires=<unix seconds>&sig=<hex>", valid for TTL from now, and when it
// expires.
func (l Links) Sign(name string) (query string, expires time.Time) {
	t := l.now().Add(l.TTL)
	exp := strconv.FormatInt(t.Unix(), 10)
	return "expires=" + exp + "&sig=" + l.sign(name, exp), t
}

func (l Links) sign(name, exp string) string {
	m := hmac.New(sha256.New, l.Key)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(exp))
	return hex.EncodeToString(m.Sum(nil))
}

// Check accepts a link (query is the link's query) to a payload called by
// a name NewName makes, signed with Key and not expired; any failure is
// ErrLinkInvalid.
func (l Links) Check(name string, query url.Values) error {
	exp, sig := query.Get("expires"), query.Get("sig")
	if !ValidName(name) || exp == "" || sig == "" {
		return ErrLinkInvalid
	}
	want := l.sign(name, exp)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return ErrLinkInvalid
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || l.now().Unix() > t {
		return ErrLinkInvalid
	}
	return nil
}

// NewName returns a new random name for a payload of kind: 32 hex digits
// and the kind.
func NewName(kind string) string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails
	return hex.EncodeToString(id[:]) + kind
}

// Store keeps payloads handed over by URL (strings in new-line delimited
// JSON, file contents, previews) as files of one directory, under random
// names, each readable once through a signed, expiring link.
type Store struct {
	// Dir is the directory of the payloads; it is created (0700) on first use.
	Dir string
	// Key signs the links (HMAC-SHA256).
	Key []byte
	// TTL is how long a link stays valid.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Payload kinds, as the extension of a payload's name.
const (
	KindStrings = ".ndjson"
	KindContent = ".bin"
	KindPreview = ".html"
)

func (s *Store) now() time.Time { return s.links().now() }

func (s *Store) links() Links { return Links{Key: s.Key, TTL: s.TTL, Now: s.Now} }

// Create opens a new payload file of kind (KindStrings, KindContent or
// KindPreview) for writing; name is its name in links.
func (s *Store) Create(kind string) (f io.WriteCloser, name string, err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("payload directory: %w", err)
	}
	name = NewName(kind)
	path := filepath.Join(s.Dir, name)
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("payload file: %w", err)
	}
	// A payload file is dated by its expiry, so that Sweep needs no
	// record of its own, and stores of other TTLs can share a directory.
	exp := s.now().Add(s.TTL)
	_ = os.Chtimes(path, exp, exp)
	return file, name, nil
}

// Remove deletes the payload called name (a payload whose answer was
// never sent).
func (s *Store) Remove(name string) {
	if ValidName(name) {
		_ = os.Remove(filepath.Join(s.Dir, name))
	}
}

// Link returns the query of the signed link to the payload called name:
// "expires=<unix seconds>&sig=<hex>", valid for the store's TTL from now.
// Call it once the payload is written and closed.
func (s *Store) Link(name string) string {
	q, t := s.links().Sign(name)
	if ValidName(name) {
		_ = os.Chtimes(filepath.Join(s.Dir, name), t, t)
	}
	return q
}

// Take checks the signed link of the payload called name (query is the
// link's query) and hands the payload over once: the file is opened and
// removed from the directory, so a second download finds nothing. The
// caller closes it. Any failure is ErrLinkInvalid.
func (s *Store) Take(name string, query url.Values) (Payload, error) {
	if err := s.links().Check(name, query); err != nil {
		return Payload{}, err
	}
	// A rename claims the payload: of two downloads at once, one wins.
	path := filepath.Join(s.Dir, name)
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	claimed := path + ".taken-" + hex.EncodeToString(tag[:])
	if err := os.Rename(path, claimed); err != nil {
		return Payload{}, ErrLinkInvalid
	}
	f, err := os.Open(claimed)
	_ = os.Remove(claimed) // the open file stays readable
	if err != nil {
		return Payload{}, ErrLinkInvalid
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return Payload{}, ErrLinkInvalid
	}
	return Payload{ReadCloser: f, Size: info.Size()}, nil
}

// sweepGrace is how long past its date a file is kept: a payload being
// written is dated by its last write until it is linked.
const sweepGrace = time.Minute

// Sweep removes payloads expired for more than a minute (and files a
// download cut short left), and returns how many it removed. A payload file
// is dated by its expiry once linked.
func (s *Store) Sweep() int {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return 0
	}
	cutoff := s.now().Add(-sweepGrace)
	n := 0
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.ModTime().After(cutoff) {
			continue
		}
		if ValidName(e.Name()) || strings.Contains(e.Name(), ".taken-") {
			if os.Remove(filepath.Join(s.Dir, e.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// ValidName accepts only the names NewName makes: 32 hex digits and a kind.
func ValidName(name string) bool {
	dot := strings.IndexByte(name, '.')
	if dot != 32 {
		return false
	}
	switch name[dot:] {
	case KindStrings, KindContent, KindPreview:
	default:
		return false
	}
	for _, c := range name[:dot] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Interface guard.
var _ Payloads = (*Store)(nil)
