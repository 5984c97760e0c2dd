package contract

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/servicegate/servicegate/jsonscan"
)

// MaxCustomData is the largest customData of a string record, in bytes.
const MaxCustomData = 4 << 10

// Breach is an answer that breaks the contract of its job. Its message
// names the first broken string by its identifier, and the rule; it is
// written for the person in the service's UI and for the app's developer.
type Breach struct {
	// Job is the job type the answer was checked against.
	Job string
	// Index is the position of the broken string, from 1; 0 when the
	// breach is not about one string.
	Index int
	// Identifier is the broken string's identifier, "" when unknown.
	Identifier string
	// Rule says what is broken.
	Rule string
}

func (b *Breach) Error() string {
	var s strings.Builder
	s.WriteString("The app's answer to a ")
	s.WriteString(b.Job)
	s.WriteString(" job breaks the service's contract: ")
	if b.Index > 0 {
		s.WriteString("string ")
		if b.Identifier != "" {
			s.WriteString(shortQuote(b.Identifier))
			s.WriteString(" (number " + strconv.Itoa(b.Index) + ")")
		} else {
			s.WriteString("number " + strconv.Itoa(b.Index))
		}
		s.WriteString(" ")
	}
	s.WriteString(b.Rule)
	s.WriteString(". Contact the app's developer.")
	return s.String()
}

// Answer is what a checked answer holds, beside its strings.
type Answer struct {
	// AppError tells that the answer is the app's own
	// {"error":{"message":…}}, which passes unchecked.
	AppError bool
	// Strings is the number of strings the answer carries inline.
	Strings int
}

// CheckAnswer reads an app's answer to j and checks it against the job:
//
//   - parse-file: data.strings (or data.stringsUrl) with a non-empty,
//     unique identifier per string; text a string, or an object keyed by
//     the source language's plural categories when hasPlurals is true;
//     translations keyed by the job's target languages, their text shaped
//     alike and their status untranslated, translated or approved;
//     customData at most 4 KB; and when data.preview is sent, a previewId
//     per string that names a string_preview_id_<n> element of it;
//   - build-file: data.content or data.contentUrl;
//   - pre-export: data.strings (or data.stringsUrl) with as many strings
//     as were sent, each with a uniqId that was sent, once.
//
// The app's own {"error":{"message":…}} answer passes. A breach is a
// *Breach naming the first broken string. Strings given by URL are not
// fetched: only their presence is checked. The verdicts are those of
// encoding/json reading the answer a string record at a time (field names
// matched as it matches them, nesting refused past its 10000 levels per
// record).
//
// The answer is checked where it lies, never copied: a *bytes.Reader's
// bytes are read in place (see CheckAnswerBytes), an *os.File (an answer
// kept on disk) is mapped into memory on Unix, and any other reader is
// first copied in bounded chunks to an unnamed temporary file that is
// mapped, so that no answer is held on the heap (elsewhere than on Unix,
// files and streams are read whole; a file's offset is left where it was). An error that is not a *Breach means the answer could not
// be read.
func (j *Job) CheckAnswer(body io.Reader) (Answer, error) {
	answer, release, err := answerBytes(body)
	if err != nil {
		return Answer{}, fmt.Errorf("reading the answer to check it: %w", err)
	}
	defer release()
	return j.CheckAnswerBytes(answer)
}

// CheckAnswerBytes checks answer, the whole answer held by the caller, as
// CheckAnswer does. It keeps no reference to answer after it returns and
// allocates nothing per value: what it keeps grows with the number of
// strings (20 to 40 bytes for each identifier or uniqId, its hash and
// offset, and 24 bytes for each previewId), never with their size.
func (j *Job) CheckAnswerBytes(answer []byte) (Answer, error) {
	c := checker{job: j, answer: answer}
	return c.check()
}

// answerBytes returns the bytes of body and the function that releases
// them.
func answerBytes(body io.Reader) ([]byte, func(), error) {
	switch r := body.(type) {
	case *bytes.Reader:
		// WriteTo hands the unread bytes over in one Write, from the
		// reader's own memory; they are only read, while the caller holds
		// the reader.
		var c sliceCatcher
		if _, err := r.WriteTo(&c); err != nil {
			return nil, nil, err
		}
		return c.b, func() {}, nil
	case *os.File:
		if b, release, err := mapFile(r); err == nil {
			return b, release, nil
		}
	}
	return spool(body)
}

// sliceCatcher keeps what a *bytes.Reader's WriteTo writes: the reader's
// unread bytes, as they are when written in one piece, else a copy.
type sliceCatcher struct {
	b      []byte
	writes int
}

func (c *sliceCatcher) Write(p []byte) (int, error) {
	if c.writes == 0 {
		c.b = p
	} else {
		c.b = append(c.b[:len(c.b):len(c.b)], p...)
	}
	c.writes++
	return len(p), nil
}

// checker holds the state of one answer's check.
type checker struct {
	job    *Job
	answer []byte
	breach *Breach
	count  int
	inline bool // a strings array was read

	s    jsonscan.Scanner      // walks the answer
	aux  jsonscan.Scanner      // reads again values already checked: plural objects, labels, customData
	str  jsonscan.StringReader // decodes data.content and data.preview
	idA  jsonscan.Scanner      // decodes identifiers and uniqIds…
	idB  jsonscan.Scanner      // …and those they are compared with
	seed maphash.Seed

	// seen keeps the identifiers (parse-file) or uniqIds (pre-export)
	// read so far, by their hash, at the offset of their string in the
	// answer; collided the few whose hash was another's.
	seen     []seenSlot
	seenN    int
	collided map[string]struct{}
	// pending are identifiers (or uniqIds) waiting to be kept in seen, a
	// few records at a time: see keep.
	pending []pendingID
	touched uint32
	// sentMet marks, by their number, the uniqIds sent that the answer
	// returned so far (pre-export with the strings sent): one look-up in
	// the job's set tells both whether a uniqId was sent and met before.
	sentMet  []uint64
	sentNext int32 // the number after the last uniqId sent that was met

	previewIDs  []previewRef       // the strings with a previewId
	noPreviewID previewRef         // the first string without one, index 0 when none
	previewSet  map[int64]struct{} // the string_preview_id_<n> of data.preview

	langs map[string]int // target language → its index in names and cats
	names []string
	cats  [][]string

	rec record
}

type previewRef struct {
	id    int64
	index int
	ident int // offset of the identifier's string in the answer
}

// record is one string record as the contract reads it: the text of its
// values, slices of the answer. It is reused from record to record.
type record struct {
	ident, uniq int // offset of the string value in the answer, -1 when absent
	// identV and uniqV are those strings decoded, when they needed no
	// decoding (a slice of the answer), else nil: identOK and uniqOK tell.
	identV, uniqV   []byte
	identOK, uniqOK bool
	previewID       []byte
	customData      []byte
	context         []byte
	maxLength       []byte
	isHidden        []byte
	labels          []byte
	labelsOK        bool // labels is an array of strings
	text            []byte
	textForms       pluralForms
	hasPlurals      bool

	// the first value of the wrong type, as encoding/json names it
	typeField, typeValue string

	trs         []trans // by target language index
	order       []int   // the translations' languages in order; -1 for unknownLang
	unknownLang string  // the first language that is not a target, if any
	other       trans   // the translation into it
}

type trans struct {
	set                    bool
	text, status           []byte
	textForms, statusForms pluralForms
}

// pluralForms is what the rules say of a value read as a plural object
// (a text or a status by plural form), found as the value is read, so that
// it is read once: its members, and the first rule a member breaks ("" when
// none, or when the value is not an object).
type pluralForms struct {
	n    int
	rule string
}

func (r *record) reset() {
	r.ident, r.uniq = -1, -1
	r.identV, r.uniqV, r.identOK, r.uniqOK = nil, nil, false, false
	r.previewID, r.customData, r.context, r.maxLength = nil, nil, nil, nil
	r.isHidden, r.labels, r.text, r.hasPlurals = nil, nil, nil, false
	r.textForms = pluralForms{}
	r.typeField, r.typeValue = "", ""
	r.clearTranslations()
}

func (r *record) clearTranslations() {
	for _, i := range r.order {
		if i >= 0 {
			r.trs[i] = trans{}
		}
	}
	r.order, r.unknownLang = r.order[:0], ""
}

func (r *record) typeError(field string, first byte) {
	if r.typeField == "" {
		r.typeField, r.typeValue = field, kindOf(first)
	}
}

// kindOf names the kind of the value starting with first as encoding/json
// names it in an UnmarshalTypeError.
func kindOf(first byte) string {
	switch first {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

func (c *checker) check() (Answer, error) {
	j, s := c.job, &c.s
	s.MaxDepth = jsonscan.EncodingJSONMaxDepth
	c.aux.MaxDepth = jsonscan.EncodingJSONMaxDepth // it reads again values s took
	s.Reset(c.answer)
	c.rec.reset()
	var ans Answer
	var hasData, dataOK, dataErr bool
	bad := func(rule string) (Answer, error) { return ans, &Breach{Job: j.Type, Rule: rule} }
	if s.Peek() != '{' {
		return bad("it is not a JSON object")
	}
	last := s.Pos() // where the last member ended: its value read
	err := s.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "error":
			var ok bool
			ok, err = c.readError()
			ans.AppError = ans.AppError || ok
		case "data":
			hasData = true
			var ok bool
			if ok, err = c.readData(); err != nil {
				dataErr = c.breach != nil
				return err
			}
			dataOK = ok
		default:
			err = c.skipValue()
		}
		last = s.Pos()
		return err
	})
	if err != nil && c.breach != nil && c.dataWithoutColon(last) {
		// encoding/json's Decoder reads the colon with the value: data
		// is broken, not the answer around it
		dataErr = true
	}
	if dataErr {
		// a breach read before data turned out broken is the verdict
		return ans, c.breach
	}
	if err == nil {
		err = s.Finish()
	}
	if err != nil {
		return bad(notJSON(err))
	}
	ans.Strings = c.count
	switch {
	case ans.AppError:
		return ans, nil
	case !hasData:
		return bad("it has neither data nor error.message")
	case c.breach != nil:
		return ans, c.breach
	case !dataOK && j.Type == BuildFile:
		return bad("data has neither content nor contentUrl")
	case !dataOK:
		return bad("data has neither strings nor stringsUrl")
	}
	if j.Type == PreExport && j.stringsSent && c.inline && c.count != j.count {
		return bad(fmt.Sprintf("it returns %d strings for the %d it was sent; a pre-export answer keeps every string", c.count, j.count))
	}
	if c.previewSet != nil {
		if b := c.checkPreview(); b != nil {
			return ans, b
		}
	}
	return ans, nil
}

// dataWithoutColon tells whether the member that follows offset last of
// the answer has the key data and no colon after it.
func (c *checker) dataWithoutColon(last int) bool {
	i := last
	for i < len(c.answer) && (c.answer[i] == ' ' || c.answer[i] == '\t' || c.answer[i] == '\n' || c.answer[i] == '\r') {
		i++
	}
	if i == len(c.answer) || (c.answer[i] != '{' && c.answer[i] != ',') {
		return false
	}
	var t jsonscan.Scanner
	t.Reset(c.answer[i+1:])
	key, err := t.String()
	return err == nil && string(key) == "data" && t.Peek() != ':'
}

// notJSON is the rule broken by an answer that could not be read: too
// deeply nested when refused for depth, else not valid JSON.
func notJSON(err error) string {
	if errors.Is(err, jsonscan.ErrTooDeep) {
		return "it is too deeply nested (arrays and objects over " + strconv.Itoa(jsonscan.EncodingJSONMaxDepth) + " levels deep)"
	}
	return "it is not valid JSON"
}

// skipValue reads a value whose nesting counts from 0, as a value decoded
// whole does.
func (c *checker) skipValue() error {
	d := c.s.Depth()
	c.s.SetDepth(0)
	err := c.s.Skip()
	c.s.SetDepth(d)
	return err
}

// readError reads the value of the answer's error and tells whether it is
// an object with a message string, as encoding/json would decode it into a
// struct with a *string message: the key matched without regard to case,
// the last one counting, any of another type than string or null
// failing it.
func (c *checker) readError() (bool, error) {
	s := &c.s
	if s.Peek() != '{' {
		return false, c.skipValue()
	}
	d := s.Depth()
	s.SetDepth(0)
	var msg, wrong bool
	err := s.Object(func(key []byte) error {
		if foldedIs(key, "message", "MESSAGE") {
			switch s.Peek() {
			case '"':
				msg = true
			case 'n':
				msg = false
			default:
				wrong = true
			}
		}
		return s.Skip()
	})
	s.SetDepth(d)
	return err == nil && msg && !wrong, err
}

// The keys of data the contract reads.
const (
	keyStrings    = "strings"
	keyStringsURL = "stringsUrl"
	keyPreview    = "preview"
	keyContent    = "content"
	keyContentURL = "contentUrl"
)

var errStringsNotArray = errors.New("data.strings is not an array")

// readData reads the data object; ok tells whether it carries what the job
// type needs.
func (c *checker) readData() (ok bool, err error) {
	s, typ := &c.s, c.job.Type
	err = s.Object(func(key []byte) error {
		var name string
		switch {
		case string(key) == keyStrings && typ != BuildFile:
			if err := c.readStrings(); err != nil {
				return err
			}
			ok = true
			return nil
		case string(key) == keyPreview && typ == ParseFile:
			switch s.Peek() {
			case '"':
				p, err := s.Value()
				if err != nil {
					return err
				}
				// decoded as it is read: the page is never held whole
				c.str.Reset(p)
				ids, err := previewElementIDs(&c.str)
				if err != nil {
					c.fail(0, -1, "data.preview is not base64")
				}
				c.previewSet = ids
				return nil
			case 'n':
				return s.Skip()
			}
			if err := c.skipValue(); err != nil {
				return err
			}
			c.fail(0, -1, "data.preview is not a base64 HTML document")
			return nil
		case string(key) == keyContent && typ == BuildFile:
			name = keyContent
		case string(key) == keyContentURL && typ == BuildFile:
			name = keyContentURL
		case string(key) == keyStringsURL && typ != BuildFile:
			name = keyStringsURL
		default:
			return c.skipValue()
		}
		switch s.Peek() {
		case '"':
			v, err := s.Value()
			if err != nil {
				return err
			}
			if len(v) > len(`""`) { // decoded, not empty either
				ok = true
				if name == keyContent && !c.contentBase64(v) {
					c.fail(0, -1, "data.content is not base64")
				}
			}
			return nil
		case 'n':
			return s.Skip()
		}
		if err := c.skipValue(); err != nil {
			return err
		}
		c.fail(0, -1, "data."+name+" is not a string")
		return nil
	})
	return ok, err
}

// contentBase64 tells whether v, the text of a string, holds base64: by
// table when its contents are plain, else decoded as it is read, so that
// the file is never held whole.
func (c *checker) contentBase64(v []byte) bool {
	if valid, decided := plainBase64(v[1 : len(v)-1]); decided {
		return valid
	}
	c.str.Reset(v)
	_, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, &c.str))
	return err == nil
}

// fail records the first breach; ident is the offset of the string's
// identifier in the answer, -1 when it has none.
func (c *checker) fail(index, ident int, rule string) {
	// a string kept for later may be a duplicate: an earlier breach, or
	// this one's, whose uniqueness is checked first
	c.flushPending()
	if c.breach == nil {
		c.breach = &Breach{Job: c.job.Type, Index: index, Identifier: c.identifier(ident), Rule: rule}
	}
}

// identifier decodes the string at offset pos of the answer, "" when pos
// is -1.
func (c *checker) identifier(pos int) string {
	if pos < 0 {
		return ""
	}
	return string(stringAt(&c.idB, c.answer, pos))
}

// stringAt decodes the string at offset pos of answer, one that was read.
func stringAt(s *jsonscan.Scanner, answer []byte, pos int) []byte {
	s.Reset(answer[pos:])
	v, _ := s.String()
	return v
}

// readStrings reads the strings array a record at a time.
func (c *checker) readStrings() error {
	s := &c.s
	switch s.Peek() {
	case '[':
	case '{':
		c.fail(0, -1, "data.strings is not an array")
		return errStringsNotArray
	default:
		if err := s.Skip(); err != nil {
			return err
		}
		c.fail(0, -1, "data.strings is not an array")
		return nil
	}
	if !c.inline {
		c.startStrings()
	}
	err := s.Array(func() error {
		c.count++
		if c.breach != nil {
			return c.skipValue()
		}
		return c.readRecord(c.count)
	})
	c.flushPending()
	return err
}

// startStrings readies c for the first strings array: the job's target
// languages, and the seed of the identifiers' hashes.
func (c *checker) startStrings() {
	c.inline = true
	c.seed = maphash.MakeSeed()
	c.langs = make(map[string]int, len(c.job.targets))
	for name, cats := range c.job.targets {
		c.langs[name] = len(c.names)
		c.names, c.cats = append(c.names, name), append(c.cats, cats)
	}
	c.rec.trs = make([]trans, len(c.names))
}

// readRecord reads the string record number n, as encoding/json decodes a
// value into a struct: its nesting counted from 0, fields matched without
// regard to case, the last of a field counting, and the first value of the
// wrong type a breach once the record is read.
func (c *checker) readRecord(n int) error {
	s, r := &c.s, &c.rec
	r.reset()
	d := s.Depth()
	s.SetDepth(0)
	var err error
	switch first := s.Peek(); first {
	case '{':
		if start := s.Pos(); !c.readRecordFast() {
			r.reset()
			s.SetPos(start)
			s.SetDepth(0)
			err = s.Object(c.recordMember)
		}
	case 'n':
		err = s.Skip()
	default:
		if err = s.Skip(); err == nil {
			r.typeError("", first)
		}
	}
	s.SetDepth(d)
	if err != nil {
		return err
	}
	if r.typeValue != "" {
		c.fail(n, r.ident, "has a "+r.typeField+" of the wrong type ("+r.typeValue+")")
		return nil
	}
	c.checkRecord(n)
	return nil
}

// The fields of a string record.
const (
	fieldNone = iota
	fieldPreviewID
	fieldUniqID
	fieldIdentifier
	fieldCustomData
	fieldContext
	fieldMaxLength
	fieldIsHidden
	fieldLabels
	fieldHasPlurals
	fieldText
	fieldTranslations
)

// fieldOf returns the field key names, matched as encoding/json matches
// it: exactly, else after folding case.
func fieldOf(key []byte) int {
	// by length first: each name is then one comparison of a few words,
	// where a switch over the names compares strings in turn
	switch len(key) {
	case len("text"):
		if string(key) == "text" {
			return fieldText
		}
	case len("labels"):
		switch string(key) {
		case "labels":
			return fieldLabels
		case "uniqId":
			return fieldUniqID
		}
	case len("context"):
		if string(key) == "context" {
			return fieldContext
		}
	case len("isHidden"):
		if string(key) == "isHidden" {
			return fieldIsHidden
		}
	case len("previewId"):
		switch string(key) {
		case "previewId":
			return fieldPreviewID
		case "maxLength":
			return fieldMaxLength
		}
	case len("identifier"):
		switch string(key) {
		case "identifier":
			return fieldIdentifier
		case "customData":
			return fieldCustomData
		case "hasPlurals":
			return fieldHasPlurals
		}
	case len("translations"):
		if string(key) == "translations" {
			return fieldTranslations
		}
	}
	var buf [foldMax]byte
	folded, ok := foldASCII(&buf, key)
	if !ok {
		return fieldNone
	}
	switch string(folded) {
	case "IDENTIFIER":
		return fieldIdentifier
	case "TEXT":
		return fieldText
	case "TRANSLATIONS":
		return fieldTranslations
	case "CONTEXT":
		return fieldContext
	case "CUSTOMDATA":
		return fieldCustomData
	case "LABELS":
		return fieldLabels
	case "HASPLURALS":
		return fieldHasPlurals
	case "PREVIEWID":
		return fieldPreviewID
	case "UNIQID":
		return fieldUniqID
	case "MAXLENGTH":
		return fieldMaxLength
	case "ISHIDDEN":
		return fieldIsHidden
	}
	return fieldNone
}

// foldMax is the length of the longest field name.
const foldMax = len("translations")

// foldASCII folds key as encoding/json folds names (ASCII letters to upper
// case, other runes to the least rune of their case folding orbit) into buf; ok is false when the result is longer
// than buf or not ASCII, so that it names no field.
func foldASCII(buf *[foldMax]byte, key []byte) (folded []byte, ok bool) {
	n := 0
	for i := 0; i < len(key); {
		c := key[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			i++
		} else {
			r, size := utf8.DecodeRune(key[i:])
			i += size
			r = foldRune(r)
			if r >= utf8.RuneSelf {
				return nil, false
			}
			c = byte(r)
		}
		if n == len(buf) {
			return nil, false
		}
		buf[n] = c
		n++
	}
	return buf[:n], true
}

// foldRune returns the least rune of r's case folding orbit: K for the
// Kelvin sign, S for ſ.
func foldRune(r rune) rune {
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}

// foldedIs tells whether key names the field name (upper: its folded form)
// as encoding/json matches names.
func foldedIs(key []byte, name, upper string) bool {
	if string(key) == name {
		return true
	}
	// a rune folds to one ASCII byte or none, so a key that folds to name
	// is as long, or longer and not all ASCII
	if len(key) < len(name) || len(key) > len(name) && !hasNonASCII(key) {
		return false
	}
	var buf [foldMax]byte
	folded, ok := foldASCII(&buf, key)
	return ok && string(folded) == upper
}

// hasNonASCII tells whether b holds a byte from 0x80 on.
func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// recordMember reads the value of one member of a record.
func (c *checker) recordMember(key []byte) error {
	s, r := &c.s, &c.rec
	var raw *[]byte
	switch fieldOf(key) {
	case fieldIdentifier:
		return c.stringField(&r.ident, &r.identV, &r.identOK, "identifier")
	case fieldUniqID:
		return c.stringField(&r.uniq, &r.uniqV, &r.uniqOK, "uniqId")
	case fieldText:
		return c.readForms(&r.text, &r.textForms, textForm(c.job.source, ""))
	case fieldTranslations:
		return c.readTranslations()
	case fieldContext:
		raw = &r.context
	case fieldCustomData:
		raw = &r.customData
	case fieldLabels:
		return c.readLabels()
	case fieldPreviewID:
		raw = &r.previewID
	case fieldMaxLength:
		raw = &r.maxLength
	case fieldIsHidden:
		raw = &r.isHidden
	case fieldHasPlurals:
		switch first := s.Peek(); first {
		case 't', 'f':
			r.hasPlurals = first == 't'
		case 'n':
		default:
			r.typeError("hasPlurals", first)
		}
		return s.Skip()
	default:
		return s.Skip()
	}
	v, err := s.Value()
	*raw = v
	return err
}

// stringField reads a string field, keeping the offset of its value and,
// when it needs no decoding, the value itself (ok true), so that it is
// not decoded again.
func (c *checker) stringField(pos *int, v *[]byte, ok *bool, name string) error {
	s := &c.s
	switch first := s.Peek(); first {
	case '"':
		*pos = s.Pos()
		str, err := s.String()
		if err != nil {
			return err
		}
		// a string without escapes or invalid UTF-8 is a slice of the answer
		*v, *ok = str, len(str) == 0 || &str[0] == &c.answer[*pos+1]
		return nil
	case 'n':
		// null leaves the field as it was
	default:
		c.rec.typeError(name, first)
	}
	return s.Skip()
}

// readLabels reads a record's labels, noting whether they are an array of
// strings as it goes.
func (c *checker) readLabels() error {
	s, r := &c.s, &c.rec
	if s.Peek() != '[' {
		v, err := s.Value()
		r.labels, r.labelsOK = v, false
		return err
	}
	start := s.Pos()
	ok := true
	err := s.Array(func() error {
		if s.Peek() != '"' {
			ok = false
		}
		return s.Skip()
	})
	r.labels, r.labelsOK = c.answer[start:s.Pos()], ok
	return err
}

// readTranslations reads a record's translations, keyed by language, as
// encoding/json decodes them into a map: null empties it, a language given
// twice keeps its last translation.
func (c *checker) readTranslations() error {
	s, r := &c.s, &c.rec
	switch first := s.Peek(); first {
	case '{':
		return s.Object(c.translation)
	case 'n':
		r.clearTranslations()
	default:
		r.typeError("translations", first)
	}
	return s.Skip()
}

// translation reads the translation into language lang.
func (c *checker) translation(lang []byte) error {
	s, r := &c.s, &c.rec
	t, cats, name := c.transInto(lang)
	switch first := s.Peek(); first {
	case '{':
		return s.Object(func(key []byte) error {
			return c.transMember(t, cats, name, key)
		})
	case 'n':
	default:
		r.typeError("translations", first)
	}
	return s.Skip()
}

// transInto returns the translation of the record into language lang,
// emptied for the value that follows, and the plural categories and name
// of lang when it is a target language.
func (c *checker) transInto(lang []byte) (t *trans, cats []string, name string) {
	r := &c.rec
	if i, known := c.lang(lang); known {
		if !r.trs[i].set {
			r.order = append(r.order, i)
		}
		t, cats, name = &r.trs[i], c.cats[i], c.names[i]
	} else {
		if r.unknownLang == "" && !containsIndex(r.order, -1) {
			r.unknownLang = string(lang)
			r.order = append(r.order, -1)
		}
		t = &r.other
	}
	*t = trans{set: true}
	return t, cats, name
}

// transMember reads the value of the member key of translation t, into a
// language of plural categories cats and name.
func (c *checker) transMember(t *trans, cats []string, name string, key []byte) error {
	switch {
	case foldedIs(key, "text", "TEXT"):
		return c.readForms(&t.text, &t.textForms, textForm(cats, name))
	case foldedIs(key, "status", "STATUS"):
		return c.readForms(&t.status, &t.statusForms, statusForm(cats))
	}
	return c.s.Skip()
}

// lang returns the index of the target language name, if it is one: by
// comparing it with each when there are few, which is quicker than a map.
func (c *checker) lang(name []byte) (int, bool) {
	if len(c.names) <= 8 {
		for i, n := range c.names {
			if string(name) == n {
				return i, true
			}
		}
		return 0, false
	}
	i, ok := c.langs[string(name)]
	return i, ok
}

func containsIndex(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// The rules broken by a string whose identifier, or uniqId, is another's.
const (
	ruleDupIdentifier = "has the identifier of an earlier string; identifiers are unique within a file"
	ruleDupUniqID     = "has the uniqId of an earlier string; a pre-export answer keeps each string once"
)

// pendingID is a string waiting to be kept in seen: v at offset pos of the
// answer, of hash h, the identifier or uniqId of string number index,
// whose identifier is at offset ident (-1 when it has none).
type pendingID struct {
	h            uint64
	v            []byte
	pos          int
	index, ident int
}

// pendingMax is how many strings wait to be kept at most.
const pendingMax = 64

// keep keeps v, the string at offset pos of the answer, the identifier or
// uniqId of string number index, and tells whether it was seen before.
// Each string lands at a random slot of seen, which on a large answer is
// seldom in the cache: strings that are slices of the answer (inAnswer)
// wait, pendingMax at a time, so that the slots of the next ones are
// fetched together, then are kept in order, a duplicate among them
// breaching then (flushPending). Until then keep says false: every other
// breach first flushes them, so that the first breach is the same.
func (c *checker) keep(v []byte, pos, index, ident int, inAnswer bool) bool {
	if !inAnswer {
		// decoded into a buffer that the next string overwrites
		c.flushPending()
		return c.seenBefore(v, pos)
	}
	c.pending = append(c.pending, pendingID{h: maphash.Bytes(c.seed, v), v: v, pos: pos, index: index, ident: ident})
	if len(c.pending) == pendingMax {
		c.flushPending()
	}
	return false
}

// flushPending keeps the strings waiting, in order, and records a breach
// for the first that was seen before.
func (c *checker) flushPending() {
	if len(c.pending) == 0 {
		return
	}
	pending := c.pending
	c.pending = c.pending[:0]
	if mask := uint64(len(c.seen) - 1); len(c.seen) > 0 && uint64(len(c.answer)) <= math.MaxUint32 {
		// read the slots first, independent loads the processor overlaps
		var t uint32
		for _, p := range pending {
			t ^= c.seen[slotOf(uint32(p.h>>32)|1)&mask].tag
		}
		c.touched = t
	}
	for _, p := range pending {
		if c.breach == nil && c.seenHash(p.h, p.v, p.pos) {
			rule := ruleDupIdentifier
			if c.job.Type == PreExport {
				rule = ruleDupUniqID
			}
			c.breach = &Breach{Job: c.job.Type, Index: p.index, Identifier: c.identifier(p.ident), Rule: rule}
		}
	}
}

// metSent tells whether uniq is a uniqId the job was sent and, if so,
// whether it was met before, and marks it met.
func (c *checker) metSent(uniq []byte) (sent, before bool) {
	k := c.sentNext
	if int(k) >= len(c.job.sentOrder) || c.job.sentOrder[k] != string(uniq) {
		if k, sent = c.job.uniqIDs[string(uniq)]; !sent {
			return false, false
		}
	}
	c.sentNext = k + 1
	if c.sentMet == nil {
		c.sentMet = make([]uint64, (len(c.job.uniqIDs)+63)/64)
	}
	word, bit := &c.sentMet[k/64], uint64(1)<<(k%64)
	before = *word&bit != 0
	*word |= bit
	return true, before
}

// seenBefore tells whether v, the string at offset pos of the answer, was
// seen before, and keeps it. Strings are kept by hash, at their offset; a
// hash found again is confirmed on the strings themselves, so that only an
// equal string is a duplicate.
func (c *checker) seenBefore(v []byte, pos int) bool {
	return c.seenHash(maphash.Bytes(c.seed, v), v, pos)
}

// seenHash is seenBefore for v of hash h. The table is open addressing
// with linear probing, at most three quarters full. A slot is 8 bytes (the
// high half of the hash, its tag, which also places it, 0 marking a free
// slot; and the offset), so that
// the table of a 5 MB answer stays within a core's cache: each string
// lands at a random slot, and a smaller table misses the cache less.
// Answers of 4 GiB or more, whose offsets need more bits, keep their
// strings whole.
func (c *checker) seenHash(h uint64, v []byte, pos int) bool {
	if uint64(len(c.answer)) > math.MaxUint32 {
		return c.seenWhole(v)
	}
	tag := uint32(h>>32) | 1
	if (c.seenN+1)*4 > len(c.seen)*3 {
		c.growSeen()
	}
	mask := uint64(len(c.seen) - 1)
	for i := slotOf(tag) & mask; ; i = (i + 1) & mask {
		slot := &c.seen[i]
		if slot.tag == 0 {
			slot.tag, slot.pos = tag, uint32(pos)
			c.seenN++
			return false
		}
		if slot.tag != tag {
			continue
		}
		if bytes.Equal(stringAt(&c.idB, c.answer, int(slot.pos)), v) {
			return true
		}
		// another string of the same hash: kept whole
		return c.seenWhole(v)
	}
}

// seenWhole is seenBefore for strings kept whole, in collided.
func (c *checker) seenWhole(v []byte) bool {
	if _, dup := c.collided[string(v)]; dup {
		return true
	}
	if c.collided == nil {
		c.collided = make(map[string]struct{})
	}
	c.collided[string(v)] = struct{}{}
	return false
}

// slotOf spreads a tag over the table: its place, before the mask.
func slotOf(tag uint32) uint64 {
	return uint64(tag) * 0x9e3779b97f4a7c15 >> 32
}

// growSeen grows the table of seenHash: to twice its size, or to the size
// the strings read so far predict for the whole answer, when larger, so
// that it is rarely grown more than twice.
func (c *checker) growSeen() {
	old := c.seen
	size := max(2*len(old), 1024)
	if read := c.s.Pos(); read > 0 && c.seenN > 0 {
		predicted := c.seenN * (len(c.answer)/read + 1) * 5 / 4 // slots at four fifths full
		for size < predicted {
			size *= 2
		}
	}
	c.seen = make([]seenSlot, size)
	mask := uint64(len(c.seen) - 1)
	for _, slot := range old {
		if slot.tag == 0 {
			continue
		}
		i := slotOf(slot.tag) & mask
		for c.seen[i].tag != 0 {
			i = (i + 1) & mask
		}
		c.seen[i] = slot
	}
}

// seenSlot is a slot of the table of seenHash.
type seenSlot struct {
	tag uint32 // the high half of the hash, its lowest bit set; 0 when free
	pos uint32 // offset of the string in the answer
}

// checkRecord checks the string record number n, read into c.rec.
func (c *checker) checkRecord(n int) {
	r := &c.rec
	id := r.identV
	if !r.identOK && r.ident >= 0 {
		id = stringAt(&c.idA, c.answer, r.ident)
	}
	if len(id) == 0 {
		c.fail(n, -1, "has no identifier")
		return
	}
	switch c.job.Type {
	case ParseFile:
		if c.keep(id, r.ident, n, r.ident, r.identOK) {
			c.fail(n, r.ident, ruleDupIdentifier)
			return
		}
		if present(r.customData) {
			if r.customData[0] != '"' {
				c.fail(n, r.ident, "has a customData that is not a string")
				return
			}
			// decoded, a string holds at most 3 bytes for each of its
			// own (U+FFFD for an invalid one): short ones need no decoding
			if len(r.customData)-2 > MaxCustomData/3 {
				c.aux.Reset(r.customData)
				if data, err := c.aux.String(); err == nil && len(data) > MaxCustomData {
					c.fail(n, r.ident, fmt.Sprintf("has customData of %d bytes, over the 4 KB the service keeps", len(data)))
					return
				}
			}
		}
		if present(r.previewID) {
			pid, err := strconv.ParseInt(string(r.previewID), 10, 64)
			if err != nil {
				c.fail(n, r.ident, "has a previewId that is not an integer")
				return
			}
			c.previewIDs = append(c.previewIDs, previewRef{id: pid, index: n, ident: r.ident})
		} else if c.noPreviewID.index == 0 {
			c.noPreviewID = previewRef{id: -1, index: n, ident: r.ident}
		}
	case PreExport:
		uniq := r.uniqV
		if !r.uniqOK && r.uniq >= 0 {
			uniq = stringAt(&c.idA, c.answer, r.uniq)
		}
		if len(uniq) == 0 {
			c.fail(n, r.ident, "has no uniqId")
			return
		}
		// A uniqId not sent is a breach the first time it is met, so that
		// with the strings sent, only those sent need to be remembered.
		sent, before := true, false
		if c.job.stringsSent {
			sent, before = c.metSent(uniq)
		} else {
			before = c.keep(uniq, r.uniq, n, r.ident, r.uniqOK)
		}
		if before {
			c.fail(n, r.ident, "has the uniqId of an earlier string; a pre-export answer keeps each string once")
			return
		}
		if !sent {
			c.fail(n, r.ident, "has a uniqId that was not sent; a pre-export answer keeps the uniqId of each string")
			return
		}
	}
	if rule := c.checkOptional(r); rule != "" {
		c.fail(n, r.ident, rule)
		return
	}
	if !present(r.text) {
		c.fail(n, r.ident, "has no text")
		return
	}
	if rule := checkText(r.text, r.hasPlurals, r.textForms, ""); rule != "" {
		c.fail(n, r.ident, rule)
		return
	}
	for _, i := range r.order {
		if i < 0 {
			c.fail(n, r.ident, "has a translation into "+shortQuote(r.unknownLang)+", which is not a target language of the job")
			return
		}
		lang, t := c.names[i], &r.trs[i]
		if !present(t.text) {
			c.fail(n, r.ident, "has a translation into "+shortQuote(lang)+" without text")
			return
		}
		if rule := checkText(t.text, r.hasPlurals, t.textForms, lang); rule != "" {
			c.fail(n, r.ident, rule)
			return
		}
		if rule := checkStatus(t.status, r.hasPlurals, t.statusForms); rule != "" {
			c.fail(n, r.ident, "has a translation into "+shortQuote(lang)+" with "+rule)
			return
		}
	}
}

// textWhat names a text in a rule: the source text when lang is "", else
// the translation into lang.
func textWhat(lang string) string {
	if lang == "" {
		return "text"
	}
	return "translation text into " + shortQuote(lang)
}

// checkText checks a text against hasPlurals and, by its forms, against
// the language's plural categories, and returns the broken rule or "".
// lang is the target language of a translation, "" for the source text.
func checkText(text []byte, plural bool, forms pluralForms, lang string) string {
	if !plural {
		if text[0] != '"' {
			return "has a " + textWhat(lang) + " that is not a string, and hasPlurals is false"
		}
		return ""
	}
	if text[0] != '{' {
		return "has a " + textWhat(lang) + " that is not an object of plural forms, and hasPlurals is true"
	}
	if forms.rule == "" && forms.n == 0 {
		return "has a " + textWhat(lang) + " that is an empty object of plural forms"
	}
	return forms.rule
}

// textForm returns the rule of a plural form of a text, given the plural
// categories of its language (lang as in checkText).
func textForm(cats []string, lang string) func(key, value []byte) string {
	return func(key, value []byte) string {
		if len(cats) > 0 && !containsKey(cats, key) {
			return "has a " + textWhat(lang) + " with the plural form " + shortQuote(string(key)) + ", which is not a plural category of the language"
		}
		if value[0] != '"' {
			return "has a " + textWhat(lang) + " whose plural form " + shortQuote(string(key)) + " is not a string"
		}
		return ""
	}
}

// checkStatus checks a translation status; absent means translated.
func checkStatus(status []byte, plural bool, forms pluralForms) string {
	if !present(status) {
		return ""
	}
	if status[0] == '"' {
		if !validStatus(status) {
			return "a status other than untranslated, translated or approved"
		}
		return ""
	}
	if !plural || status[0] != '{' {
		return "a status that is not a string"
	}
	return forms.rule
}

// statusForm returns the rule of a plural form of a status, given the
// plural categories of its language.
func statusForm(cats []string) func(key, value []byte) string {
	return func(key, value []byte) string {
		if len(cats) > 0 && !containsKey(cats, key) {
			return "a status for the plural form " + shortQuote(string(key)) + ", which is not a plural category of the language"
		}
		if !validStatus(value) {
			return "a status other than untranslated, translated or approved"
		}
		return ""
	}
}

// readForms reads a value that may be a plural object, keeping its text in
// *v and, for an object, what rule says of its members in *forms.
func (c *checker) readForms(v *[]byte, forms *pluralForms, rule func(key, value []byte) string) error {
	s := &c.s
	*forms = pluralForms{}
	if s.Peek() != '{' {
		val, err := s.Value()
		*v = val
		return err
	}
	start := s.Pos()
	err := walkMembers(s, forms, rule)
	*v = c.answer[start:s.Pos()]
	return err
}

// walkMembers reads the object at s, calling rule with the key (decoded)
// and the value of each member until it returns a broken rule, and counts
// them into forms. It allocates nothing for keys without escapes, nor
// while no rule is broken.
func walkMembers(s *jsonscan.Scanner, forms *pluralForms, rule func(key, value []byte) string) error {
	return s.Object(func(key []byte) error {
		value, err := s.Value()
		if err != nil {
			return err
		}
		forms.n++
		if forms.rule == "" {
			forms.rule = rule(key, value)
		}
		return nil
	})
}

// members calls fn with the key (decoded) and the value of each member of
// obj, an object read already, until fn returns a rule, which members
// returns: walkMembers over a value kept aside.
func (c *checker) members(obj []byte, fn func(key, value []byte) string) string {
	var forms pluralForms
	c.aux.Reset(obj)
	if err := walkMembers(&c.aux, &forms, fn); err != nil && forms.rule == "" {
		// obj was read already: only depth can stop the scanner.
		return "is too deeply nested"
	}
	return forms.rule
}

// checkOptional checks the types of the optional fields of a string
// record, which the service refuses when they are of another type, and
// returns the broken rule or "".
func (c *checker) checkOptional(r *record) string {
	if present(r.context) && r.context[0] != '"' {
		return "has a context that is not a string"
	}
	if present(r.maxLength) && !jsonscan.IsInteger(r.maxLength) {
		return "has a maxLength that is not an integer or null"
	}
	if present(r.isHidden) && r.isHidden[0] != 't' && r.isHidden[0] != 'f' {
		return "has an isHidden that is not a boolean or null"
	}
	if present(r.labels) && !r.labelsOK {
		return "has labels that are not an array of strings"
	}
	return ""
}

// present tells whether a field was given a value other than null.
func present(v []byte) bool {
	return len(v) > 0 && string(v) != "null"
}

// containsKey reports whether key is in list.
func containsKey(list []string, key []byte) bool {
	for _, v := range list {
		if string(key) == v {
			return true
		}
	}
	return false
}

func validStatus(v []byte) bool {
	switch len(v) {
	case len(`"untranslated"`):
		return string(v) == `"untranslated"`
	case len(`"translated"`):
		return string(v) == `"translated"`
	case len(`"approved"`):
		return string(v) == `"approved"`
	}
	return false
}

// previewMarker is the start of the id of a string's element in a preview.
const previewMarker = "string_preview_id_"

// previewElementIDs reads a base64 HTML preview as a stream and returns
// the n of every string_preview_id_<n> in it.
func previewElementIDs(preview io.Reader) (map[int64]struct{}, error) {
	ids := make(map[int64]struct{})
	dec := base64.NewDecoder(base64.StdEncoding, preview)
	const keep = len(previewMarker) + 20 // a marker and its number
	buf := make([]byte, 0, 32<<10+keep)
	for {
		n, err := dec.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		done := err != nil
		if err != nil && err != io.EOF {
			return ids, err
		}
		// Markers whose number may go on in the next chunk wait for it.
		scanEnd := len(buf)
		if !done && scanEnd > keep {
			scanEnd -= keep
		} else if !done {
			continue
		}
		rest := buf
		pos := 0
		for {
			i := bytes.Index(rest[pos:], []byte(previewMarker))
			if i < 0 || pos+i >= scanEnd {
				break
			}
			start := pos + i + len(previewMarker)
			end := start
			for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
				end++
			}
			if v, err := strconv.ParseInt(string(rest[start:end]), 10, 64); err == nil {
				ids[v] = struct{}{}
			}
			pos = start
		}
		if done {
			return ids, nil
		}
		buf = buf[:copy(buf, buf[scanEnd:])]
	}
}

// checkPreview checks that every string has a previewId naming an element
// of the preview, and names the first that does not.
func (c *checker) checkPreview() *Breach {
	missing := c.noPreviewID
	for _, p := range c.previewIDs {
		if missing.index > 0 && missing.index < p.index {
			break
		}
		if _, ok := c.previewSet[p.id]; !ok {
			return &Breach{Job: c.job.Type, Index: p.index, Identifier: c.identifier(p.ident),
				Rule: "has previewId " + strconv.FormatInt(p.id, 10) + ", and the preview has no element string_preview_id_" + strconv.FormatInt(p.id, 10)}
		}
	}
	if missing.index > 0 {
		return &Breach{Job: c.job.Type, Index: missing.index, Identifier: c.identifier(missing.ident), Rule: "has no previewId, and the answer sends a preview"}
	}
	return nil
}
