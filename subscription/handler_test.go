package subscription

import (
	"strings"
	"testing"

	"github.com/servicegate/servicegate/token"
)

func TestBearerToken(t *testing.T) {
	tests := map[string]string{
		"Bearer abc":        "abc",
		"bearer abc":        "abc",
		"BEARER  abc ":      "abc",
		"Bearer":            "",
		"Bearer ":           "",
		"Basic abc":         "",
		"Bearerabc":         "",
		"":                  "",
		"Token x Bearer":    "",
		"Bearer \v":         "",
		"Bearer a b":        "",
		"Bearer a\x00":      "",
		"Bearer ===":        "",
		"Bearer ab+/_~.-==": "ab+/_~.-==",
	}
	for in, want := range tests {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer ")
	f.Add("Basic x")
	f.Fuzz(func(t *testing.T, header string) {
		tok := BearerToken(header)
		if tok != "" && !strings.Contains(header, tok) {
			t.Fatalf("token %q not from %q", tok, header)
		}
		if tok != strings.TrimSpace(tok) {
			t.Fatalf("token %q has surrounding space", tok)
		}
		if tok != "" && !token.IsB64Token(tok) {
			t.Fatalf("token %q is not of bearer token syntax", tok)
		}
	})
}

func FuzzValidBaseValue(f *testing.F) {
	f.Add("acme")
	f.Add("evil.example/x")
	f.Add("a@b")
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidBaseValue(s) {
			return
		}
		if strings.ContainsAny(s, "/?#@:[] \\%") || s == "" {
			t.Fatalf("%q accepted", s)
		}
	})
}
