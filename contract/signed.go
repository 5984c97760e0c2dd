package contract

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Create opens a new payload file of kind (KindStrings, KindContent or
// KindPreview) for writing; name is its name in links.
func (s *Store) Create(kind string) (f *os.File, name string, err error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("payload directory: %w", err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails
	name = hex.EncodeToString(id[:]) + kind
	path := filepath.Join(s.Dir, name)
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("payload file: %w", err)
	}
	// A payload file is dated by its expiry, so that Sweep needs no
	// record of its own, and stores of other TTLs can share a directory.
	exp := s.now().Add(s.TTL)
	_ = os.Chtimes(path, exp, exp)
	return f, name, nil
}

// Remove deletes the payload called name (a payload whose answer was
// never sent).
func (s *Store) Remove(name string) {
	if validName(name) {
		_ = os.Remove(filepath.Join(s.Dir, name))
	}
}

// Link returns the query of the signed link to the payload called name:
// "expires=<unix seconds>&sig=<hex>", valid for the store's TTL from now.
// Call it once the payload is written and closed.
func (s *Store) Link(name string) string {
	t := s.now().Add(s.TTL)
	if validName(name) {
		_ = os.Chtimes(filepath.Join(s.Dir, name), t, t)
	}
	exp := strconv.FormatInt(t.Unix(), 10)
	return "expires=" + exp + "&sig=" + s.sign(name, exp)
}

func (s *Store) sign(name, exp string) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(exp))
	return hex.EncodeToString(m.Sum(nil))
}

// Take checks the signed link of the payload called name (query is the
// link's query) and hands the payload over once: the file is opened and
// removed from the directory, so a second download finds nothing. The
// caller closes it. Any failure is ErrLinkInvalid.
func (s *Store) Take(name string, query url.Values) (*os.File, error) {
	exp, sig := query.Get("expires"), query.Get("sig")
	if !validName(name) || exp == "" || sig == "" {
		return nil, ErrLinkInvalid
	}
	want := s.sign(name, exp)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return nil, ErrLinkInvalid
	}
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || s.now().Unix() > t {
		return nil, ErrLinkInvalid
	}
	// A rename claims the payload: of two downloads at once, one wins.
	path := filepath.Join(s.Dir, name)
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	claimed := path + ".taken-" + hex.EncodeToString(tag[:])
	if err := os.Rename(path, claimed); err != nil {
		return nil, ErrLinkInvalid
	}
	f, err := os.Open(claimed)
	_ = os.Remove(claimed) // the open file stays readable
	if err != nil {
		return nil, ErrLinkInvalid
	}
	return f, nil
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
		if validName(e.Name()) || strings.Contains(e.Name(), ".taken-") {
			if os.Remove(filepath.Join(s.Dir, e.Name())) == nil {
				n++
			}
		}
	}
	return n
}

// validName accepts only the names Create makes: 32 hex digits and a kind.
func validName(name string) bool {
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
