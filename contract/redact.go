package contract

import "strings"

// RedactQuoted replaces each quoted string in s (as %q writes them) with
// "…": a message of this package (a job's parse error, a Breach's Rule)
// for a log line, without the text it quotes from a job or an answer.
func RedactQuoted(s string) string {
	if !strings.Contains(s, `"`) {
		return s
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // an escaped character, perhaps a quote
		case c == '"':
			if quoted {
				b.WriteString(`"…"`)
			}
			quoted = !quoted
		case !quoted:
			b.WriteByte(c)
		}
	}
	if quoted {
		b.WriteString(`"…`) // an open quote runs to the end
	}
	return b.String()
}
