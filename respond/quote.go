package respond

import (
	"strconv"
	"unicode/utf8"
)

// maxQuoted is how much of a value a client sent Quote keeps.
const maxQuoted = 100

// Quote is a value a client sent, to be named in a message or a log line:
// cut to its first 100 bytes (at a character boundary, marked with "…")
// and quoted with Go's escapes, so that control characters, quotes and
// invalid UTF-8 cannot change what the line says.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
