package installations

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/servicegate/servicegate/internal/names"
)

// MinKeyLength is the shortest key a Sealer accepts, in bytes.
const MinKeyLength = 32

// sealInfo names what the derived key is for, so that the configured key
// used elsewhere gives an unrelated key here.
const sealInfo = "servicegate installations v1"

// The first byte of a sealed record names its format. Version 1 records
// are bound to their organization only; version 2 records to the app (its
// client id) and the organization, so that a record copied into another
// app's store does not open. Version 1 records still open, and are sealed
// again as version 2 (see Book).
const (
	sealV1      = 1
	sealVersion = 2
)

// ErrSealed is a record that does not open: another key, another app's or
// organization's record, or damaged bytes.
var ErrSealed = errors.New("the installation record does not open with the configured keys for this app and organization")

// KeyState is which of the configured keys a record is sealed under.
type KeyState int

// The key states of a record.
const (
	// KeyCurrent: the record is sealed under key, as this version seals.
	KeyCurrent KeyState = iota
	// KeyRetired: the record opens, but with one of retired_keys, or is in
	// the earlier format: it is to be sealed again under key.
	KeyRetired
	// KeyNone: the record opens under no configured key for this app
	// and organization (or is damaged).
	KeyNone
	// NumKeyStates is the number of key states, for arrays indexed by
	// KeyState.
	NumKeyStates
)

var keyStateNames = [NumKeyStates]string{KeyCurrent: "current", KeyRetired: "retired", KeyNone: "unreadable"}

// String is the key state's metric label.
func (k KeyState) String() string { return names.Of(keyStateNames[:], k, "key state") }

// A Sealer seals installation records with AES-256-GCM under a key derived
// from the configured key with HKDF-SHA256, and opens them with it or with
// a retired key. The app and the organization a record belongs to are its
// additional data. A Sealer is safe for concurrent use.
type Sealer struct {
	keys []cipher.AEAD // keys[0] seals; every one opens
	app  string
	// noV1: records of the earlier format do not open (see Book: only
	// while a store written before format 2 is migrated do they).
	noV1 bool
}

// NewSealer derives the sealing key from key and the opening keys from key
// and retired; each must be at least MinKeyLength bytes. The error never
// holds a key.
func NewSealer(key []byte, retired ...[]byte) (*Sealer, error) {
	s := &Sealer{}
	for i, k := range append([][]byte{key}, retired...) {
		if len(k) < MinKeyLength {
			what := "the installations key"
			if i > 0 {
				what = fmt.Sprintf("retired key %d", i)
			}
			return nil, fmt.Errorf("%s must be at least %d bytes, it is %d", what, MinKeyLength, len(k))
		}
		aead, err := deriveAEAD(k)
		if err != nil {
			return nil, err
		}
		s.keys = append(s.keys, aead)
	}
	return s, nil
}

func deriveAEAD(key []byte) (cipher.AEAD, error) {
	derived, err := hkdf.Key(sha256.New, key, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the installations key: %w", err)
	}
	block, err := aes.NewCipher(derived)
	if err != nil {
		return nil, fmt.Errorf("installations cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("installations cipher: %w", err)
	}
	return aead, nil
}

// Bind returns a Sealer with the same keys whose records are bound to app
// (its client id) as well as to their organization.
func (s *Sealer) Bind(app string) *Sealer {
	return &Sealer{keys: s.keys, app: app, noV1: s.noV1}
}

// withV1 returns a Sealer with the same keys and app that opens records
// of the earlier format, or, when open is false, does not.
func (s *Sealer) withV1(open bool) *Sealer {
	return &Sealer{keys: s.keys, app: s.app, noV1: !open}
}

// Seal returns plaintext sealed for organization under the current key: a
// version byte, a random nonce and the ciphertext with its tag.
func (s *Sealer) Seal(organization string, plaintext []byte) []byte {
	aead := s.keys[0]
	ns := aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+aead.Overhead())
	out[0] = sealVersion
	_, _ = rand.Read(out[1 : 1+ns]) // crypto/rand never fails
	return aead.Seal(out, out[1:1+ns], plaintext, s.additionalData(sealVersion, organization))
}

// Open returns the plaintext of a record sealed for organization, or
// ErrSealed.
func (s *Sealer) Open(organization string, sealed []byte) ([]byte, error) {
	plain, _, err := s.OpenState(organization, sealed)
	return plain, err
}

// OpenState is Open, and says which key the record is sealed under:
// KeyRetired for a retired key or the earlier format, which are to be
// sealed again.
func (s *Sealer) OpenState(organization string, sealed []byte) ([]byte, KeyState, error) {
	if len(sealed) == 0 || (sealed[0] != sealVersion && (sealed[0] != sealV1 || s.noV1)) {
		return nil, KeyNone, ErrSealed
	}
	ad := s.additionalData(sealed[0], organization)
	for i, aead := range s.keys {
		ns := aead.NonceSize()
		if len(sealed) < 1+ns+aead.Overhead() {
			return nil, KeyNone, ErrSealed
		}
		out, err := aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], ad)
		if err != nil {
			continue
		}
		if i > 0 || sealed[0] != sealVersion {
			return out, KeyRetired, nil
		}
		return out, KeyCurrent, nil
	}
	return nil, KeyNone, ErrSealed
}

// additionalData binds a record of the format version to its app and
// organization.
func (s *Sealer) additionalData(version byte, organization string) []byte {
	if version == sealV1 {
		return []byte("organization:" + organization)
	}
	return []byte("servicegate installation\x00app:" + s.app + "\x00organization:" + organization)
}
