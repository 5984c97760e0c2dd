package installations

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// MinKeyLength is the shortest key a Sealer accepts, in bytes.
const MinKeyLength = 32

// sealInfo names what the derived key is for, so that the configured key
// used elsewhere gives an unrelated key here.
const sealInfo = "servicegate installations v1"

// sealVersion is the first byte of every sealed record.
const sealVersion = 1

// ErrSealed is a record that does not open: another key, another
// organization's name, or damaged bytes.
var ErrSealed = errors.New("the installation record does not open with this key for this organization")

// A Sealer seals installation records with AES-256-GCM under a key derived
// from the configured key with HKDF-SHA256. The organization a record
// belongs to is its additional data: a record copied under another
// organization's name does not open. A Sealer is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer derives the sealing key from key, which must be at least
// MinKeyLength bytes. The error never holds the key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) < MinKeyLength {
		return nil, fmt.Errorf("the installations key must be at least %d bytes, it is %d", MinKeyLength, len(key))
	}
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
	return &Sealer{aead: aead}, nil
}

// Seal returns plaintext sealed for organization: a version byte, a random
// nonce and the ciphertext with its tag.
func (s *Sealer) Seal(organization string, plaintext []byte) []byte {
	ns := s.aead.NonceSize()
	out := make([]byte, 1+ns, 1+ns+len(plaintext)+s.aead.Overhead())
	out[0] = sealVersion
	_, _ = rand.Read(out[1 : 1+ns]) // crypto/rand never fails
	return s.aead.Seal(out, out[1:1+ns], plaintext, additionalData(organization))
}

// Open returns the plaintext of a record sealed for organization, or
// ErrSealed.
func (s *Sealer) Open(organization string, sealed []byte) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(sealed) < 1+ns+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrSealed
	}
	out, err := s.aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], additionalData(organization))
	if err != nil {
		return nil, ErrSealed
	}
	return out, nil
}

func additionalData(organization string) []byte {
	return []byte("organization:" + organization)
}
