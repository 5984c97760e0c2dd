package token

import "testing"

func TestIsB64Token(t *testing.T) {
	tests := map[string]bool{
		"abc": true,
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI3In0.sig-_": true,
		"ab+/_~.-==": true,
		"a=":         true,
		"":           false,
		"==":         false,
		"a=b":        false,
		"a b":        false,
		"\v":         false,
		"a\tb":       false,
		"a\x00":      false,
		"ä":          false,
		"a,b":        false,
	}
	for in, want := range tests {
		if got := IsB64Token(in); got != want {
			t.Errorf("IsB64Token(%q) = %v, want %v", in, got, want)
		}
	}
}
