// Package jsonscan reads JSON text (RFC 8259) held in a byte slice, checking
// it as it goes. It is the one JSON scanner of servicegate: the webhook's
// events check and the contract's check of module answers use it.
//
// It is made for checks on the request path: one tight loop over the bytes,
// no reflection, and no allocation per value. Values are skipped (and
// checked) without being decoded; only the keys and strings a caller asks
// for are decoded, and only those holding escapes or invalid UTF-8 are
// copied, into a buffer the Scanner reuses.
//
// It accepts what encoding/json accepts: strings may hold invalid UTF-8,
// which decodes to U+FFFD as encoding/json decodes it. Nesting deeper than
// MaxDepth is refused with ErrTooDeep, so a hostile document cannot make it
// use more stack than that.
//
//	var s jsonscan.Scanner
//	s.Reset(body)
//	err := s.Object(func(key []byte) error {
//		if string(key) == "name" {
//			name, err := s.String()
//			…
//			return err
//		}
//		return s.Skip()
//	})
//	if err == nil {
//		err = s.Finish()
//	}
package jsonscan

import (
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Errors of a Scanner. Neither repeats any of the input.
var (
	// ErrSyntax means the input is not JSON, or not the kind of value
	// the caller asked for.
	ErrSyntax = errors.New("not valid JSON")
	// ErrTooDeep means arrays and objects are nested deeper than
	// MaxDepth.
	ErrTooDeep = errors.New("nested too deeply")
)

// DefaultMaxDepth is the nesting a Scanner follows when its MaxDepth is 0.
const DefaultMaxDepth = 512

// EncodingJSONMaxDepth is the nesting encoding/json follows: a Scanner
// with this MaxDepth refuses exactly the documents it refuses for depth.
const EncodingJSONMaxDepth = 10000

// Scanner reads one JSON document. The zero value reads an empty input;
// Reset gives it a document. A Scanner is not safe for concurrent use.
type Scanner struct {
	// MaxDepth is how many arrays and objects may be nested; 0 means
	// DefaultMaxDepth.
	MaxDepth int

	data    []byte
	pos     int
	depth   int    // arrays and objects open around pos
	scratch []byte // decoded strings, reused
}

// Reset makes s read data from its start. It keeps MaxDepth and the
// memory of decoded strings.
func (s *Scanner) Reset(data []byte) {
	s.data, s.pos, s.depth = data, 0, 0
}

// Pos is the offset of the next byte to read.
func (s *Scanner) Pos() int { return s.pos }

// SetPos moves s to offset pos of its document: a reader that stepped
// over values itself (with StringEnd, say) hands the rest back to s. pos
// should be where a value, a key or a separator starts; s checks what it
// reads from there, so a wrong pos gives ErrSyntax, never a panic.
func (s *Scanner) SetPos(pos int) { s.pos = min(max(pos, 0), len(s.data)) }

// Depth is the number of arrays and objects open around the next byte to
// read, which MaxDepth bounds.
func (s *Scanner) Depth() int { return s.depth }

// SetDepth sets that number. A caller that reads a document a value at a
// time as encoding/json's Decoder does (Token for the outer arrays and
// objects, Decode for each value), and refuses for depth what the Decoder
// refuses, counts each such value's nesting from 0: it calls SetDepth(0)
// before reading the value and SetDepth with the former Depth after.
func (s *Scanner) SetDepth(depth int) { s.depth = depth }

func (s *Scanner) maxDepth() int {
	if s.MaxDepth > 0 {
		return s.MaxDepth
	}
	return DefaultMaxDepth
}

func (s *Scanner) skipSpace() {
	// most documents between values have no space at all
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte, 0 at the end of the
// input: '{', '[', '"', 't', 'f', 'n', '-' or a digit starts a value.
func (s *Scanner) Peek() byte {
	s.skipSpace()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// Finish reports ErrSyntax unless only white space is left.
func (s *Scanner) Finish() error {
	s.skipSpace()
	if s.pos != len(s.data) {
		return ErrSyntax
	}
	return nil
}

// Skip reads one value of any kind, checking it.
func (s *Scanner) Skip() error {
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '"' { // most values
		return s.skipString()
	}
	return s.skip(s.depth)
}

// Value reads one value of any kind, checking it, and returns its text.
func (s *Scanner) Value() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	var err error
	if start < len(s.data) && s.data[start] == '"' { // most values
		err = s.skipString()
	} else {
		err = s.skip(s.depth)
	}
	if err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// Valid checks that data is one JSON value, nested at most maxDepth deep
// (0 means DefaultMaxDepth), with nothing but white space around it.
func Valid(data []byte, maxDepth int) error {
	s := Scanner{MaxDepth: maxDepth, data: data}
	if err := s.Skip(); err != nil {
		return err
	}
	return s.Finish()
}

// skip reads the value at s.pos, inside depth arrays and objects.
func (s *Scanner) skip(depth int) error {
	if s.pos >= len(s.data) {
		return ErrSyntax
	}
	switch c := s.data[s.pos]; c {
	case '"':
		return s.skipString()
	case '{':
		if depth >= s.maxDepth() {
			return ErrTooDeep
		}
		s.pos++
		if s.Peek() == '}' {
			s.pos++
			return nil
		}
		for {
			if s.pos >= len(s.data) || s.data[s.pos] != '"' {
				return ErrSyntax
			}
			if err := s.skipString(); err != nil {
				return err
			}
			if s.Peek() != ':' {
				return ErrSyntax
			}
			s.pos++
			s.skipSpace()
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.Peek() {
			case ',':
				s.pos++
				s.skipSpace()
			case '}':
				s.pos++
				return nil
			default:
				return ErrSyntax
			}
		}
	case '[':
		if depth >= s.maxDepth() {
			return ErrTooDeep
		}
		s.pos++
		if s.Peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.Peek() {
			case ',':
				s.pos++
				s.skipSpace()
			case ']':
				s.pos++
				return nil
			default:
				return ErrSyntax
			}
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return s.number()
		}
		return ErrSyntax
	}
}

func (s *Scanner) literal(word string) error {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return ErrSyntax
	}
	s.pos += len(word)
	return nil
}

func (s *Scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

func (s *Scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if s.digits() == 0 {
		return ErrSyntax
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return ErrSyntax
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return ErrSyntax
		}
	}
	return nil
}

// IsInteger reports whether value, the text of one JSON value, is a number
// without a fraction or an exponent.
func IsInteger(value []byte) bool {
	s := Scanner{data: value}
	if len(value) == 0 || (value[0] != '-' && (value[0] < '0' || value[0] > '9')) || s.number() != nil || s.pos != len(value) {
		return false
	}
	for _, c := range value {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// stop marks the bytes that end a run of plain string content: the
// quote, the backslash and the control characters, which a string may
// not hold unescaped. stopHigh marks the bytes from 0x80 besides, where a
// string may hold invalid UTF-8.
var stop, stopHigh = stopTables()

func stopTables() (lo, hi [256]bool) {
	for c := range 256 {
		lo[c] = c < 0x20 || c == '"' || c == '\\'
		hi[c] = lo[c] || c >= utf8.RuneSelf
	}
	return lo, hi
}

// plainRun returns the index of the first quote, backslash or control
// character from d[i] on, found a word of 8 bytes at a time, or the index
// of the last bytes, fewer than 8, for the byte loop after it: strings are
// most of a document, and a word at a time is several times faster over
// them than a byte at a time. In each word, the lowest byte flagged is
// exact (a borrow only carries upwards), so its index needs no byte loop.
func plainRun(d []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		q, b := x^(ones*'"'), x^(ones*'\\')
		// a byte below 0x20, a zero byte of q (a quote) or of b (a backslash)
		if m := ((x-ones*0x20)&^x | (q-ones)&^q | (b-ones)&^b) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// asciiRun is plainRun that stops also at a byte from 0x80 on, where
// String checks UTF-8: long strings of ASCII (base64 contents, previews)
// are decoded a word at a time.
func asciiRun(d []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		q, b := x^(ones*'"'), x^(ones*'\\')
		if m := (x | (x-ones*0x20)&^x | (q-ones)&^q | (b-ones)&^b) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// escapeLen returns the length of the escape sequence at d[i] (a
// backslash), 0 when it is not a valid one.
func escapeLen(d []byte, i int) int {
	if i+1 >= len(d) {
		return 0
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(d)-i < 6 {
			return 0
		}
		for _, h := range d[i+2 : i+6] {
			if hexValue(h) < 0 {
				return 0
			}
		}
		return 6
	}
	return 0
}

func hexValue(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// skipString reads the string at s.pos (its opening quote) without
// decoding it.
func (s *Scanner) skipString() error {
	end := StringEnd(s.data, s.pos)
	if end < 0 {
		return ErrSyntax
	}
	s.pos = end
	return nil
}

// StringEnd checks the string whose opening quote is data[i], as Skip
// checks it, and returns the offset after its closing quote, or -1 when
// it is not a valid string. It lets a reader that knows the shape of the
// document it reads (see SetPos) step over a string without a Scanner.
func StringEnd(data []byte, i int) int {
	d := data
	i++
	for {
		i = plainRun(d, i)
		for i < len(d) && !stop[d[i]] {
			i++
		}
		if i >= len(d) {
			return -1
		}
		switch d[i] {
		case '"':
			return i + 1
		case '\\':
			n := escapeLen(d, i)
			if n == 0 {
				return -1
			}
			i += n
		default:
			return -1
		}
	}
}

// String reads a string value and returns its contents decoded as
// encoding/json decodes them: escapes resolved, invalid UTF-8 as U+FFFD.
// Plain contents are a slice of the input; others are decoded into a
// buffer of s that the next decoded key or string overwrites.
func (s *Scanner) String() ([]byte, error) {
	if s.Peek() != '"' {
		return nil, ErrSyntax
	}
	return s.readString()
}

func (s *Scanner) readString() ([]byte, error) {
	d := s.data
	start := s.pos + 1
	i := start
	plain := true
	for {
		i = asciiRun(d, i)
		for i < len(d) && !stopHigh[d[i]] {
			i++
		}
		if i >= len(d) {
			return nil, ErrSyntax
		}
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			if plain {
				return d[start:i], nil
			}
			s.scratch = unquote(s.scratch[:0], d[start:i])
			return s.scratch, nil
		case c == '\\':
			n := escapeLen(d, i)
			if n == 0 {
				return nil, ErrSyntax
			}
			plain = false
			i += n
		case c < 0x20:
			return nil, ErrSyntax
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			i += size
		}
	}
}

// unquote appends the decoded contents of a string (without its quotes,
// escapes known to be valid) to dst, as encoding/json decodes them.
func unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		dst, i = unquoteNext(dst, raw, i, len(raw))
	}
	return dst
}

// unquoteNext appends to dst the decoded form of what starts at raw[i], a
// string's contents whose escapes are known to be valid: a run of plain
// ASCII of at most room bytes, one escape (a surrogate pair whole) or one
// rune (U+FFFD for an invalid byte), at most 4 bytes but for the run. It
// returns dst and the index after what it decoded.
func unquoteNext(dst, raw []byte, i, room int) ([]byte, int) {
	switch c := raw[i]; {
	case c == '\\':
		switch raw[i+1] {
		case 'b':
			return append(dst, '\b'), i + 2
		case 'f':
			return append(dst, '\f'), i + 2
		case 'n':
			return append(dst, '\n'), i + 2
		case 'r':
			return append(dst, '\r'), i + 2
		case 't':
			return append(dst, '\t'), i + 2
		case 'u':
			r := u4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, u4(raw[i+2:])); dec != unicode.ReplacementChar {
						return utf8.AppendRune(dst, dec), i + 6
					}
				}
				r = unicode.ReplacementChar
			}
			return utf8.AppendRune(dst, r), i
		default: // '"', '\\', '/'
			return append(dst, raw[i+1]), i + 2
		}
	case c < utf8.RuneSelf:
		end := min(len(raw), i+max(room, 1))
		j := asciiRun(raw[:end], i+1) // no quote or control character is left in raw
		for j < end && raw[j] != '\\' && raw[j] < utf8.RuneSelf {
			j++
		}
		return append(dst, raw[i:j]...), j
	default:
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			return utf8.AppendRune(dst, utf8.RuneError), i + 1
		}
		return append(dst, raw[i:i+size]...), i + size
	}
}

// StringReader reads the decoded contents of a string a piece at a time,
// as String decodes them: a string too large to be decoded whole (a file
// in base64, say) is decoded as it is read, into a buffer of 4 KB.
type StringReader struct {
	raw []byte // the contents, between the quotes
	i   int    // next byte of raw to decode
	buf []byte // decoded, not yet read from off
	off int
}

// Reset makes r read value, the text of a string as Value returns it
// (read and checked by a Scanner), from its start.
func (r *StringReader) Reset(value []byte) {
	r.raw, r.i, r.buf, r.off = nil, 0, r.buf[:0], 0
	if len(value) >= 2 {
		r.raw = value[1 : len(value)-1]
	}
}

// Read decodes into p.
func (r *StringReader) Read(p []byte) (int, error) {
	if r.off == len(r.buf) {
		if r.i >= len(r.raw) {
			return 0, io.EOF
		}
		if c := r.raw[r.i]; c != '\\' && c < utf8.RuneSelf && len(p) > 0 {
			// plain ASCII goes to p as it is
			run, i := unquoteNext(p[:0], r.raw, r.i, len(p))
			r.i = i
			return len(run), nil
		}
		if r.buf == nil {
			r.buf = make([]byte, 0, 4<<10)
		}
		r.buf, r.off = r.buf[:0], 0
		// each step adds at most 4 bytes, or a run that fits
		for r.i < len(r.raw) && cap(r.buf)-len(r.buf) >= 4 {
			r.buf, r.i = unquoteNext(r.buf, r.raw, r.i, cap(r.buf)-len(r.buf))
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// u4 decodes the four hex digits at the start of b, known to be valid.
func u4(b []byte) rune {
	return hexValue(b[0])<<12 | hexValue(b[1])<<8 | hexValue(b[2])<<4 | hexValue(b[3])
}

// Object reads an object, calling member with each key positioned before
// the member's value, which member must read (with Skip, Value, String,
// Object or Array) unless it returns an error, which Object returns. The
// key is decoded as String decodes; it stays valid until the next key or
// string is decoded. The next value must be an object, else ErrSyntax.
func (s *Scanner) Object(member func(key []byte) error) error {
	if s.Peek() != '{' {
		return ErrSyntax
	}
	if s.depth >= s.maxDepth() {
		return ErrTooDeep
	}
	s.pos++
	s.depth++
	if s.Peek() == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		key, err := s.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.depth--
			return nil
		default:
			return ErrSyntax
		}
	}
}

// key reads a member's key and the colon after it. Most keys are short
// and plain: their closing quote is the first byte asciiRun stops at, and
// a colon follows at once.
func (s *Scanner) key() ([]byte, error) {
	d, i := s.data, s.pos
	if i >= len(d) || d[i] != '"' {
		return nil, ErrSyntax
	}
	if j := asciiRun(d, i+1); j+1 < len(d) && d[j] == '"' && d[j+1] == ':' {
		s.pos = j + 2
		return d[i+1 : j], nil
	}
	key, err := s.readString()
	if err != nil {
		return nil, err
	}
	if s.Peek() != ':' {
		return nil, ErrSyntax
	}
	s.pos++
	return key, nil
}

// PlainKey reads the key whose opening quote is data[i] and the colon
// after it, when the key is plain: printable ASCII without escapes, which
// is then its own decoded value, found a word at a time. It returns the
// key and the offset of the member's value (white space skipped), or
// next -1 when the key is not plain or no colon follows: a reader that
// steps over a document itself (see StringEnd) hands such a key to a
// Scanner.
func PlainKey(data []byte, i int) (key []byte, next int) {
	d := data
	if i >= len(d) || d[i] != '"' {
		return nil, -1
	}
	j := asciiRun(d, i+1)
	for j < len(d) && !stopHigh[d[j]] {
		j++
	}
	if j >= len(d) || d[j] != '"' {
		return nil, -1
	}
	k := j + 1
	if k < len(d) && d[k] != ':' {
		k = spaceEnd(d, k)
	}
	if k >= len(d) || d[k] != ':' {
		return nil, -1
	}
	k++
	if k < len(d) && d[k] <= ' ' {
		k = spaceEnd(d, k)
	}
	return d[i+1 : j], k
}

// spaceEnd returns the offset of the first byte from d[i] on that is not
// white space.
func spaceEnd(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Array reads an array, calling element positioned before each element,
// which element must read unless it returns an error, which Array
// returns. The next value must be an array, else ErrSyntax.
func (s *Scanner) Array(element func() error) error {
	if s.Peek() != '[' {
		return ErrSyntax
	}
	if s.depth >= s.maxDepth() {
		return ErrTooDeep
	}
	s.pos++
	s.depth++
	if s.Peek() == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if err := element(); err != nil {
			return err
		}
		switch s.Peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return nil
		default:
			return ErrSyntax
		}
	}
}
