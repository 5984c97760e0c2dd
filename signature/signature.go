package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
)

// Errors returned by Parse and Verify. They say what failed and never
// repeat the header, the body or a secret. Malformed headers wrap
// ErrMalformed with the reason; test with errors.Is.
var (
	// ErrMissing means there was no signature at all.
	ErrMissing = errors.New("signature: missing")
	// ErrMalformed means the header is not an HMAC-SHA256 in one of the
	// accepted encodings.
	ErrMalformed = errors.New("signature: malformed")
	// ErrMismatch means the signature is well formed but matches no secret.
	ErrMismatch = errors.New("signature: matches no secret")
	// ErrNoSecret means a verifier was asked for without any secret.
	ErrNoSecret = errors.New("signature: no secret")
)

// The reasons a header is malformed, made once so that refusing a bad
// header costs no allocation.
var (
	errLength   = fmt.Errorf("%w: want 64 hex digits or 43 base64 characters (44 padded)", ErrMalformed)
	errHex      = fmt.Errorf("%w: not hexadecimal", ErrMalformed)
	errBase64   = fmt.Errorf("%w: not base64", ErrMalformed)
	errAlphabet = fmt.Errorf("%w: mixes the standard and URL-safe base64 alphabets", ErrMalformed)
	errMACSize  = fmt.Errorf("%w: want %d bytes", ErrMalformed, sha256.Size)
)

// prefix is the optional algorithm prefix of the header, matched without
// regard to case.
const prefix = "sha256="

// Parse decodes an X-Service-Signature header into the 32 bytes of the
// HMAC-SHA256 it carries. Accepted: hex in either case, base64 in the
// standard or URL-safe alphabet, padded or not, each with or without a
// "sha256=" prefix; spaces and tabs around the value are ignored.
// Base64 must be canonical (unused trailing bits zero).
func Parse(header string) (mac []byte, err error) {
	// Small enough to be inlined, so that the bytes can live on the
	// caller's stack when the caller keeps them there.
	m := new([sha256.Size]byte)
	if err = parse(m, header); err == nil {
		mac = m[:]
	}
	return mac, err
}

func parse(dst *[sha256.Size]byte, h string) error {
	h = strings.Trim(h, " \t")
	if h == "" {
		return ErrMissing
	}
	if len(h) >= len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		h = h[len(prefix):]
	}
	switch len(h) {
	case 2 * sha256.Size:
		return decodeHex(dst, h)
	case 44:
		if h[43] != '=' {
			return errLength
		}
		return decodeBase64(dst, h[:43])
	case 43:
		return decodeBase64(dst, h)
	}
	return errLength
}

// invalid marks a byte that is no digit in the tables below.
const invalid = 0xff

var hexValue, base64Value = tables()

func tables() (hx, b64 [256]byte) {
	for i := range 256 {
		hx[i], b64[i] = invalid, invalid
	}
	for i, c := range "0123456789abcdef" {
		hx[c] = byte(i)
	}
	for i, c := range "ABCDEF" {
		hx[c] = byte(10 + i)
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" {
		b64[c] = byte(i)
	}
	b64['+'], b64['-'] = 62, 62
	b64['/'], b64['_'] = 63, 63
	return hx, b64
}

func decodeHex(dst *[sha256.Size]byte, h string) error {
	for i := range dst {
		hi, lo := hexValue[h[2*i]], hexValue[h[2*i+1]]
		if hi == invalid || lo == invalid {
			return errHex
		}
		dst[i] = hi<<4 | lo
	}
	return nil
}

// decodeBase64 decodes the 43 characters that carry 32 bytes (256 of
// their 258 bits; the last two must be zero).
func decodeBase64(dst *[sha256.Size]byte, h string) error {
	var std, url bool
	var v [43]byte
	for i := range len(v) {
		c := h[i]
		switch c {
		case '+', '/':
			std = true
		case '-', '_':
			url = true
		}
		if v[i] = base64Value[c]; v[i] == invalid {
			return errBase64
		}
	}
	if std && url {
		return errAlphabet
	}
	for g := range 10 { // 10 groups of 4 characters make 30 bytes
		a, b, c, d := v[4*g], v[4*g+1], v[4*g+2], v[4*g+3]
		dst[3*g] = a<<2 | b>>4
		dst[3*g+1] = b<<4 | c>>2
		dst[3*g+2] = c<<6 | d
	}
	a, b, c := v[40], v[41], v[42]
	if c&3 != 0 {
		return errBase64
	}
	dst[30] = a<<2 | b>>4
	dst[31] = b<<4 | c>>2
	return nil
}

// Verifier checks signatures against a fixed set of secrets, any one of
// which may have signed (several secrets allow rotation). The keyed hash
// state of each secret is kept between calls, so a check costs one pass of
// SHA-256 over the body per secret tried and no allocation. A Verifier is
// safe for concurrent use.
type Verifier struct {
	keys []*keyState
}

// keyState pools the HMAC states of one secret.
type keyState struct {
	pool sync.Pool // of *macState
}

type macState struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// NewVerifier returns a Verifier for secrets, the app secrets used as HMAC
// keys byte for byte. It refuses an empty list and an empty secret (an
// empty key lets anyone sign).
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecret
	}
	v := &Verifier{keys: make([]*keyState, len(secrets))}
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("signature: secret %d of %d is empty", i+1, len(secrets))
		}
		key := []byte(s)
		v.keys[i] = &keyState{pool: sync.Pool{New: func() any {
			return &macState{h: hmac.New(sha256.New, key)}
		}}}
	}
	return v, nil
}

// Verify checks that header (an X-Service-Signature value, see Parse) is
// the HMAC-SHA256 of body under one of v's secrets.
func (v *Verifier) Verify(body []byte, header string) error {
	var mac [sha256.Size]byte
	if err := parse(&mac, header); err != nil {
		return err
	}
	return v.VerifyMAC(body, mac[:])
}

// VerifyMAC checks that mac, a signature already decoded by Parse, is the
// HMAC-SHA256 of body under one of v's secrets. Secrets are tried in order
// and the first match ends the search; each comparison takes constant time.
func (v *Verifier) VerifyMAC(body, mac []byte) error {
	if len(mac) != sha256.Size {
		return errMACSize
	}
	for _, k := range v.keys {
		st := k.pool.Get().(*macState)
		st.h.Reset()
		st.h.Write(body)
		ok := hmac.Equal(st.h.Sum(st.sum[:0]), mac)
		k.pool.Put(st)
		if ok {
			return nil
		}
	}
	return ErrMismatch
}

// Verify checks that header (an X-Service-Signature value, see Parse) is
// the HMAC-SHA256 of body under one of secrets. It builds fresh hash state
// on every call: to check many deliveries against the same secrets, make a
// Verifier once.
func Verify(body []byte, header string, secrets ...string) error {
	var mac [sha256.Size]byte
	if err := parse(&mac, header); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	for i, s := range secrets {
		if s == "" {
			return fmt.Errorf("signature: secret %d of %d is empty", i+1, len(secrets))
		}
	}
	for _, s := range secrets {
		h := hmac.New(sha256.New, []byte(s))
		h.Write(body)
		if hmac.Equal(h.Sum(nil), mac[:]) {
			return nil
		}
	}
	return ErrMismatch
}

// Sign returns the signature of body under secret for an
// X-Service-Signature header: the HMAC-SHA256 in lowercase hex, one of the
// encodings Parse accepts. Tools that send test deliveries use it.
func Sign(secret string, body []byte) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Stream computes the HMAC of a body under every secret of a Verifier as
// the body's bytes arrive, so that the check costs no pass over the body
// after its last byte is in: one MAC state per candidate secret, each fed
// while the body is read. Streams are pooled; a Stream is for one body and
// one goroutine, and must be released.
type Stream struct {
	v      *Verifier
	states []*macState
	src    io.Reader
}

var streams = sync.Pool{New: func() any { return new(Stream) }}

// Stream starts the MACs of one body under v's secrets.
func (v *Verifier) Stream() *Stream {
	s := streams.Get().(*Stream)
	s.v = v
	for _, k := range v.keys {
		st := k.pool.Get().(*macState)
		st.h.Reset()
		s.states = append(s.states, st)
	}
	return s
}

// Reader returns src, read through the stream: every byte read from it is
// fed to the MACs.
func (s *Stream) Reader(src io.Reader) io.Reader {
	s.src = src
	return s
}

// Read reads from the source given to Reader and feeds what it read to the
// MACs.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.src.Read(p)
	if n > 0 {
		s.Write(p[:n])
	}
	return n, err
}

// Write feeds p to the MACs.
func (s *Stream) Write(p []byte) (int, error) {
	for _, st := range s.states {
		st.h.Write(p)
	}
	return len(p), nil
}

// Verify checks that mac, a signature decoded by Parse, is the HMAC-SHA256
// of what was fed under one of the secrets; each comparison takes
// constant time.
func (s *Stream) Verify(mac []byte) error {
	if len(mac) != sha256.Size {
		return errMACSize
	}
	for _, st := range s.states {
		if hmac.Equal(st.h.Sum(st.sum[:0]), mac) {
			return nil
		}
	}
	return ErrMismatch
}

// Release returns the stream and its MAC states to their pools.
func (s *Stream) Release() {
	for i, st := range s.states {
		s.v.keys[i].pool.Put(st)
		s.states[i] = nil
	}
	s.states, s.v, s.src = s.states[:0], nil, nil
	streams.Put(s)
}
