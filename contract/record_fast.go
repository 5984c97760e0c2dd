package contract

import (
	"bytes"
	"unicode/utf8"

	"github.com/servicegate/servicegate/jsonscan"
)

// readRecordFast reads the string record at c.s, an object, in the shape
// apps write it: keys of plain ASCII matched by fieldOf, string values
// stepped over a word at a time by jsonscan.StringEnd straight in the
// answer, and translations that are objects of text and status; any other
// value is read by the general readers (recordMember, transMember) from
// where it starts. It fills c.rec as readRecord's general walk does. It
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
		key, j := plainKey(d, i)
		if j < 0 || j >= len(d) {
			return false
		}
		i = j
		end := -1
		f := fieldOf(key)
		switch {
		case d[i] == '"' && (f == fieldIdentifier || f == fieldUniqID):
			if end = jsonscan.StringEnd(d, i); end < 0 {
				return false
			}
			// a string without escapes or invalid UTF-8 is its own value
			v := d[i+1 : end-1]
			ok := bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v)
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
		case d[i] == '{' && f == fieldTranslations:
			if end = c.translationsFast(i); end < 0 {
				return false
			}
		default:
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
		key, j := plainKey(d, i)
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

// plainKey reads the key at offset i of d, its colon and the space after
// it, when the key is printable ASCII without escapes: it returns the key
// and the offset of the member's value, or -1.
func plainKey(d []byte, i int) ([]byte, int) {
	if i >= len(d) || d[i] != '"' {
		return nil, -1
	}
	j := i + 1
	for j < len(d) && d[j] != '"' && d[j] != '\\' && d[j] >= ' ' && d[j] < utf8.RuneSelf {
		j++
	}
	if j >= len(d) || d[j] != '"' {
		return nil, -1
	}
	k := space(d, j+1)
	if k >= len(d) || d[k] != ':' {
		return nil, -1
	}
	return d[i+1 : j], space(d, k+1)
}

// space returns the offset of the first byte from d[i] on that is not
// JSON white space.
func space(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}
