package contract

import "testing"

func TestRedactQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"has no text": "has no text",
		`has a translation into "de", which is not a target language of the job`: `has a translation into "…", which is not a target language of the job`,
		`a status for the plural form "a\"b", which is not`:                      `a status for the plural form "…", which is not`,
		`two "a" and "b"`: `two "…" and "…"`,
		`open "quote`:     `open "…`,
	} {
		if got := RedactQuoted(in); got != want {
			t.Errorf("RedactQuoted(%s) = %s, want %s", in, got, want)
		}
	}
}
