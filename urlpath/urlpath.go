// Package urlpath decides what a request path means to the apps behind
// servicegate, whose frameworks read paths in more ways than one: some
// match routes in any case, ignore a trailing slash or a ";param", decode
// a path twice, or take a backslash for a slash. Check refuses the paths
// that one of those readings could take out of the segment they are
// written in ("/assets/..;/api", "/a/%252e%252e/b", "/a%2fb", "/a\b");
// Canonical is the one form by which a path is compared with the paths the
// app declares, so that every spelling of a declared path gets the same
// checks.
package urlpath

import (
	"strings"
	"unicode/utf8"
)

// maxDecodes is how many times Check decodes a path before it gives up on
// it: a path still encoded after that many rounds is no path a client
// means.
const maxDecodes = 3

// Unsafe is a path Check refuses; it says why, in words for the person
// whose client sent it.
type Unsafe struct {
	// Reason is what the path holds, e.g. "a \"..\" segment".
	Reason string
}

func (u *Unsafe) Error() string {
	return "The request path is not accepted: it holds " + u.Reason +
		", which an app could read as a different path than the one asked for."
}

// Check tells whether escaped, a request path as sent (percent-encoded), is
// one that no common decoder reads as leaving the segment it appears in.
// It refuses, at every depth of percent-decoding: "." and ".." segments
// (also with a ";param", or as dots and spaces alone, which Windows reads
// as ".."), a backslash, an encoded "/", control characters and bytes that
// are not UTF-8 (overlong forms of "." and "/" among them), and a path
// still encoded after maxDecodes rounds.
func Check(escaped string) error {
	if plain(escaped) {
		return nil
	}
	return check(escaped)
}

// check is Check at every depth of decoding, without its fast path.
func check(escaped string) error {
	s := escaped
	for depth := 0; ; depth++ {
		if err := checkLevel(s); err != nil {
			return err
		}
		next := decode(s)
		if next == s {
			return nil
		}
		if depth == maxDecodes {
			return &Unsafe{Reason: "percent-encoding nested too deep"}
		}
		if strings.Count(next, "/") != strings.Count(s, "/") {
			return &Unsafe{Reason: "an encoded \"/\""}
		}
		s = next
	}
}

// plain tells whether s holds nothing Check looks for: printable ASCII
// without ".", "%", ";" and "\\", as most API paths are. Such a path
// decodes to itself and has no dot segment, so it passes Check.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x21 || c >= 0x7f, c == '.', c == '%', c == ';', c == '\\':
			return false
		}
	}
	return true
}

// checkLevel checks one decoding of the path.
func checkLevel(s string) error {
	if strings.IndexByte(s, '\\') >= 0 {
		return &Unsafe{Reason: "a backslash"}
	}
	if !utf8.ValidString(s) {
		return &Unsafe{Reason: "bytes that are not UTF-8 text"}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return &Unsafe{Reason: "a control character"}
		}
	}
	for seg := range strings.SplitSeq(s, "/") {
		name, _, _ := strings.Cut(seg, ";")
		if name != "" && strings.Trim(name, ". ") == "" && strings.Contains(name, ".") {
			return &Unsafe{Reason: "a \".\" or \"..\" segment"}
		}
	}
	return nil
}

// decode is one round of percent-decoding that leaves a "%" not followed
// by two hex digits as it is, as lenient decoders do.
func decode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// Canonical is the form in which servicegate compares a request path with
// the paths an app declares: decoded as Check decodes it, in one case
// (Unicode letters that fold to ASCII ones, such as the Kelvin sign,
// folded too), each segment without its ";param" and without spaces
// around it (routers that trim path tokens), and without empty
// segments (so without a trailing or doubled "/"). Every spelling that a
// case-insensitive or lenient router takes for a declared path has that
// path's canonical form. path is a path Check accepts, decoded once or
// not at all.
func Canonical(path string) string {
	if isCanonical(path) {
		return path
	}
	for range maxDecodes + 1 {
		next := decode(path)
		if next == path {
			break
		}
		path = next
	}
	path = strings.ToLower(strings.ToUpper(path))
	var b strings.Builder
	b.Grow(len(path) + 1)
	for seg := range strings.SplitSeq(path, "/") {
		seg, _, _ = strings.Cut(seg, ";")
		seg = strings.Trim(seg, " \t")
		if seg == "" {
			continue
		}
		b.WriteByte('/')
		b.WriteString(seg)
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// isCanonical tells, without allocating, whether path is its own canonical
// form: the common case of a request path.
func isCanonical(path string) bool {
	if path == "/" {
		return true
	}
	if len(path) < 2 || path[0] != '/' || path[len(path)-1] == '/' {
		return false
	}
	for i := 1; i < len(path); i++ {
		switch c := path[i]; {
		case c >= 0x80, 'A' <= c && c <= 'Z', c == '%', c == ';', c == ' ', c == '\t':
			return false
		case c == '/' && path[i-1] == '/':
			return false
		}
	}
	return true
}
