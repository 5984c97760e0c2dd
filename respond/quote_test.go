package respond

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"demo-client":                     `"demo-client"`,
		"":                                `""`,
		"a\"b\n\x00\xff":                  `"a\"b\n\x00\xff"`,
		strings.Repeat("x", 150):          `"` + strings.Repeat("x", 100) + `"…`,
		strings.Repeat("x", 99) + "élan!": `"` + strings.Repeat("x", 99) + `"…`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
