package contract

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"

	"github.com/servicegate/servicegate/jsonscan"
)

// readRecordFast reads the string record at c.s, an object, in the shape
// apps write it, straight from the answer: keys of plain ASCII matched by
// recordKey, strings stepped over a word at a time by jsonscan.StringEnd,
// labels of strings, true and false, and translations that are objects of
// text and status; any other value is read by the general readers
// (recordMember, transMember) from where it starts. It fills c.rec as readRecord's general walk does. It
// returns false when the record is not valid JSON, or holds a key with an
// escape or a byte outside printable ASCII, or a translation that is not
// an object: what it read is then to be dropped, and the record read again
// by the general walk, whose errors are the verdict.
func (c *checker) readRecordFast() bool {
	d, r := c.answer, &c.rec
	i := space(d, c.s.Pos()+1)
	if i < len(d) && d[i] == '}' {
		c.s.SetPos(i + 1)
		return true
	}
	for {
		f, key, j := recordKey(d, i)
		if j < 0 || j >= len(d) {
			return false
		}
		i = j
		end := -1
		switch {
		case d[i] == '"' && (f == fieldIdentifier || f == fieldUniqID):
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return false
			}
			// a string without escapes or invalid UTF-8 is its own value
			v := d[i+1 : end-1]
			ok := plainASCII(v) || bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v)
			if !ok {
				v = nil
			}
			if f == fieldIdentifier {
				r.ident, r.identV, r.identOK = i, v, ok
			} else {
				r.uniq, r.uniqV, r.uniqOK = i, v, ok
			}
		case d[i] == '"' && f == fieldText:
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return false
			}
			r.text, r.textForms = d[i:end], pluralForms{}
		case d[i] == '"' && r.raw(f) != nil:
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return false
			}
			*r.raw(f) = d[i:end]
		case d[i] == '[' && f == fieldLabels:
			if end = labelsEnd(d, i); end < 0 {
				break // read by readLabels below
			}
			r.labels, r.labelsOK = d[i:end], true
		case (d[i] == 't' || d[i] == 'f') && f == fieldHasPlurals:
			if end = literalEnd(d, i); end >= 0 {
				r.hasPlurals = d[i] == 't'
			}
		case (d[i] == 't' || d[i] == 'f') && f == fieldIsHidden:
			if end = literalEnd(d, i); end >= 0 {
				r.isHidden = d[i:end]
			}
		case d[i] == '{' && f == fieldTranslations:
			if end = c.translationsFast(i); end < 0 {
				return false
			}
		}
		if end < 0 {
			// inside the record, as recordMember reads its values
			c.s.SetPos(i)
			c.s.SetDepth(1)
			if c.recordMember(key) != nil {
				return false
			}
			end = c.s.Pos()
		}
		if i = space(d, end); i >= len(d) {
			return false
		}
		switch d[i] {
		case ',':
			i = space(d, i+1)
		case '}':
			c.s.SetPos(i + 1)
			return true
		default:
			return false
		}
	}
}

// raw returns the field of r that keeps the text of field f's value as it
// is, nil for the fields read otherwise.
func (r *record) raw(f int) *[]byte {
	switch f {
	case fieldContext:
		return &r.context
	case fieldCustomData:
		return &r.customData
	case fieldPreviewID:
		return &r.previewID
	case fieldMaxLength:
		return &r.maxLength
	case fieldIsHidden:
		return &r.isHidden
	}
	return nil
}

// translationsFast reads a record's translations, the object at offset i
// of the answer, as readTranslations does, and returns the offset after
// it, or -1 for readRecordFast's false.
func (c *checker) translationsFast(i int) int {
	d := c.answer
	if i = space(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		lang, j := plainKey(d, i)
		if j < 0 || j >= len(d) || d[j] != '{' {
			return -1
		}
		if i = c.translationFast(lang, j); i < 0 {
			return -1
		}
		if i = space(d, i); i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = space(d, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// translationFast reads the translation into lang, the object at offset i
// of the answer, as translation does, and returns the offset after it, or
// -1.
func (c *checker) translationFast(lang []byte, i int) int {
	d := c.answer
	t, cats, name := c.transInto(lang)
	if i = space(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		var key []byte
		j := -1
		switch {
		case hasAt(d, i, `"text":`):
			key, j = d[i+1:i+5], space(d, i+len(`"text":`))
		case hasAt(d, i, `"status":`):
			key, j = d[i+1:i+7], space(d, i+len(`"status":`))
		default:
			key, j = plainKey(d, i)
		}
		if j < 0 || j >= len(d) {
			return -1
		}
		i = j
		end := -1
		switch {
		case d[i] == '"' && string(key) == "text":
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return -1
			}
			t.text, t.textForms = d[i:end], pluralForms{}
		case d[i] == '"' && string(key) == "status":
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return -1
			}
			t.status, t.statusForms = d[i:end], pluralForms{}
		default:
			// record, translations, translation: three objects deep
			c.s.SetPos(i)
			c.s.SetDepth(3)
			if c.transMember(t, cats, name, key) != nil {
				return -1
			}
			end = c.s.Pos()
		}
		if i = space(d, end); i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = space(d, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// recordKey reads the key at offset i of d and its colon, and returns
// its field, the key, and the offset of the value, or -1 as plainKey. The
// names of the fields, exactly as the contract spells them, are matched
// by their first letter and then by comparing two words of 8 bytes with
// the quoted name and its colon; any other key is read by plainKey and
// matched by fieldOf.
func recordKey(d []byte, i int) (f int, key []byte, next int) {
	if len(d)-i >= 16 {
		w0 := binary.LittleEndian.Uint64(d[i:])
		w1 := binary.LittleEndian.Uint64(d[i+8:])
		var k0, k1 int8 = -1, -1 // the names its first letter may start
		switch d[i+1] {
		case 'i':
			k0, k1 = keyIdentifier, keyIsHidden
		case 't':
			k0, k1 = keyText, keyTranslations
		case 'c':
			k0, k1 = keyContext, keyCustomData
		case 'l':
			k0 = keyLabels
		case 'h':
			k0 = keyHasPlurals
		case 'm':
			k0 = keyMaxLength
		case 'p':
			k0 = keyPreviewID
		case 'u':
			k0 = keyUniqID
		}
		for _, k := range [2]int8{k0, k1} {
			if k < 0 {
				break
			}
			if n := &recordKeys[k]; w0&n.m0 == n.w0 && w1&n.m1 == n.w1 {
				return n.field, d[i+1 : i+n.len-2], space(d, i+n.len)
			}
		}
	}
	key, next = plainKey(d, i)
	if next < 0 {
		return fieldNone, nil, -1
	}
	return fieldOf(key), key, next
}

// keyWords is a field's name quoted, with its colon, as two little-endian
// words and the masks of the bytes it fills in them.
type keyWords struct {
	w0, w1, m0, m1 uint64
	len            int
	field          int
}

// The names of recordKeys, by their index.
const (
	keyIdentifier = iota
	keyIsHidden
	keyText
	keyTranslations
	keyContext
	keyCustomData
	keyLabels
	keyHasPlurals
	keyMaxLength
	keyPreviewID
	keyUniqID
)

var recordKeys = [...]keyWords{
	keyIdentifier:   wordsOf("identifier", fieldIdentifier),
	keyIsHidden:     wordsOf("isHidden", fieldIsHidden),
	keyText:         wordsOf("text", fieldText),
	keyTranslations: wordsOf("translations", fieldTranslations),
	keyContext:      wordsOf("context", fieldContext),
	keyCustomData:   wordsOf("customData", fieldCustomData),
	keyLabels:       wordsOf("labels", fieldLabels),
	keyHasPlurals:   wordsOf("hasPlurals", fieldHasPlurals),
	keyMaxLength:    wordsOf("maxLength", fieldMaxLength),
	keyPreviewID:    wordsOf("previewId", fieldPreviewID),
	keyUniqID:       wordsOf("uniqId", fieldUniqID),
}

// wordsOf returns the keyWords of the field name, of 14 bytes at most.
func wordsOf(name string, field int) keyWords {
	var b, m [16]byte
	q := `"` + name + `":`
	copy(b[:], q)
	for i := range q {
		m[i] = 0xff
	}
	le := binary.LittleEndian
	return keyWords{
		w0: le.Uint64(b[:8]), w1: le.Uint64(b[8:]),
		m0: le.Uint64(m[:8]), m1: le.Uint64(m[8:]),
		len: len(q), field: field,
	}
}

// hasAt tells whether d holds s at offset i.
func hasAt(d []byte, i int, s string) bool {
	return len(d)-i >= len(s) && string(d[i:i+len(s)]) == s
}

// plainKey is jsonscan.PlainKey.
func plainKey(d []byte, i int) ([]byte, int) { return jsonscan.PlainKey(d, i) }

// space returns the offset of the first byte from d[i] on that is not
// JSON white space.
func space(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// plainASCII tells whether v holds neither a backslash nor a byte from
// 0x80 on, a word at a time: a string's contents that are then their own
// value.
func plainASCII(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	var m uint64
	i := 0
	for ; i+8 <= len(v); i += 8 {
		x := binary.LittleEndian.Uint64(v[i:])
		b := x ^ (ones * '\\')
		m |= (x | (b-ones)&^b) & highs
	}
	for ; i < len(v); i++ {
		if v[i] == '\\' || v[i] >= utf8.RuneSelf {
			return false
		}
	}
	return m == 0
}

// labelsEnd returns the offset after the array at offset i of d when it
// holds only strings, -1 when it holds anything else or is not valid:
// readLabels then reads it.
func labelsEnd(d []byte, i int) int {
	if i = space(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1
	}
	for i < len(d) && d[i] == '"' {
		if i = jsonscan.StringEnd(d, i); i < 0 {
			return -1
		}
		if i = space(d, i); i >= len(d) {
			return -1
		}
		switch d[i] {
		case ',':
			i = space(d, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}

// literalEnd returns the offset after true or false at offset i of d, -1
// when neither is there.
func literalEnd(d []byte, i int) int {
	switch {
	case hasAt(d, i, "true"):
		return i + len("true")
	case hasAt(d, i, "false"):
		return i + len("false")
	}
	return -1
}
