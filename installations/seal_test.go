package installations

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestSealerOpensOnlyForItsOrganization(t *testing.T) {
	s, err := NewSealer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("42", []byte("the app secret"))
	if bytes.Contains(sealed, []byte("the app secret")) {
		t.Fatal("the sealed record holds the plaintext")
	}
	got, err := s.Open("42", sealed)
	if err != nil || string(got) != "the app secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open("43", sealed); !errors.Is(err, ErrSealed) {
		t.Errorf("a record opened under another organization: %v", err)
	}
	other, _ := NewSealer([]byte("another key of at least 32 bytes!!"))
	if _, err := other.Open("42", sealed); !errors.Is(err, ErrSealed) {
		t.Errorf("a record opened under another key: %v", err)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	if _, err := s.Open("42", tampered); !errors.Is(err, ErrSealed) {
		t.Errorf("a damaged record opened: %v", err)
	}
	for _, short := range [][]byte{nil, sealed[:5], {2}} {
		if _, err := s.Open("42", short); !errors.Is(err, ErrSealed) {
			t.Errorf("Open(%x) = %v", short, err)
		}
	}
	if again := s.Seal("42", []byte("the app secret")); bytes.Equal(again, sealed) {
		t.Error("two seals of one record are equal: the nonce is not fresh")
	}
}

func TestSealerRefusesShortKey(t *testing.T) {
	_, err := NewSealer([]byte("too short a key, 31 bytes long."))
	if err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "too short") {
		t.Error("the error quotes the key")
	}
}

func TestSealerRotation(t *testing.T) {
	old, _ := NewSealer(testKey)
	next := []byte("the next installations key, 32+ bytes")
	rotated, err := NewSealer(next, testKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed := old.Bind("app").Seal("42", []byte("record"))
	got, state, err := rotated.Bind("app").OpenState("42", sealed)
	if err != nil || string(got) != "record" || state != KeyRetired {
		t.Fatalf("a record under the retired key: %q %v %v", got, state, err)
	}
	again := rotated.Bind("app").Seal("42", got)
	if _, state, err := rotated.Bind("app").OpenState("42", again); err != nil || state != KeyCurrent {
		t.Fatalf("sealed again: %v %v", state, err)
	}
	if _, err := old.Bind("app").Open("42", again); !errors.Is(err, ErrSealed) {
		t.Error("a record under the new key opens with the old one alone")
	}
	if _, err := NewSealer(next, []byte("short")); err == nil || !strings.Contains(err.Error(), "retired key 1") {
		t.Errorf("a short retired key: %v", err)
	}
}

func TestSealerBindsTheApp(t *testing.T) {
	s, _ := NewSealer(testKey)
	sealed := s.Bind("app-a").Seal("42", []byte("record"))
	if _, err := s.Bind("app-b").Open("42", sealed); !errors.Is(err, ErrSealed) {
		t.Fatalf("app A's record opened as app B's: %v", err)
	}
	// A record of the earlier format (bound to its organization only)
	// opens, to be sealed again.
	aead := s.keys[0]
	ns := aead.NonceSize()
	v1 := make([]byte, 1+ns)
	v1[0] = sealV1
	v1 = aead.Seal(v1, v1[1:1+ns], []byte("record"), []byte("organization:42"))
	if got, state, err := s.Bind("app-a").OpenState("42", v1); err != nil || string(got) != "record" || state != KeyRetired {
		t.Fatalf("a record of the earlier format: %q %v %v", got, state, err)
	}
}
