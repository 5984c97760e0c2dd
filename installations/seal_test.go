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
