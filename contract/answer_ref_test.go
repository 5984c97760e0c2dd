package contract

// The contract check as it was written on encoding/json's Decoder, kept as
// the reference the byte-slice checker is compared with (FuzzCheckAnswerMatchesReference).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/servicegate/servicegate/jsonscan"
)

// refRecord is one string record as the contract reads it. It is reused from
// record to record: its raw fields keep their memory.
type refRecord struct {
	PreviewID    json.RawMessage           `json:"previewId"`
	UniqID       string                    `json:"uniqId"`
	Identifier   string                    `json:"identifier"`
	CustomData   json.RawMessage           `json:"customData"`
	Context      json.RawMessage           `json:"context"`
	MaxLength    json.RawMessage           `json:"maxLength"`
	IsHidden     json.RawMessage           `json:"isHidden"`
	Labels       json.RawMessage           `json:"labels"`
	HasPlurals   bool                      `json:"hasPlurals"`
	Text         json.RawMessage           `json:"text"`
	Translations map[string]refTranslation `json:"translations"`
}

func (r *refRecord) reset() {
	r.PreviewID, r.Text, r.CustomData = r.PreviewID[:0], r.Text[:0], r.CustomData[:0]
	r.Context, r.MaxLength, r.IsHidden, r.Labels = r.Context[:0], r.MaxLength[:0], r.IsHidden[:0], r.Labels[:0]
	clear(r.Translations)
	r.UniqID, r.Identifier, r.HasPlurals = "", "", false
}

type refTranslation struct {
	Text   json.RawMessage `json:"text"`
	Status json.RawMessage `json:"status"`
}

// refChecker holds the state of one answer's check.
type refChecker struct {
	job        *Job
	breach     *Breach
	rec        refRecord
	seen       map[string]struct{} // identifiers (parse-file) or uniqIds (pre-export)
	previewIDs []refPreviewRef
	previewSet map[int64]struct{} // the string_preview_id_<n> of data.preview
	count      int
	scan       jsonscan.Scanner // reads the raw values of a record
}

type refPreviewRef struct {
	id    int64
	index int
	ident string
}

// refCheckAnswer reads an app's answer to j and checks it against the job:
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
// *Breach naming the first broken string; the answer is read once, a
// string record at a time. Strings given by URL are not fetched: only
// their presence is checked.
func refCheckAnswer(j *Job, body io.Reader) (Answer, error) {
	c := refChecker{job: j}
	c.scan.MaxDepth = jsonscan.EncodingJSONMaxDepth
	dec := json.NewDecoder(body)
	var ans Answer
	var hasData, dataOK bool
	bad := func(rule string) (Answer, error) { return ans, &Breach{Job: j.Type, Rule: rule} }
	if err := openObject(dec); err != nil {
		return bad("it is not a JSON object")
	}
	var raw json.RawMessage
	for dec.More() {
		key, err := nextKey(dec)
		if err != nil {
			return bad(refNotJSON(err))
		}
		switch key {
		case "error":
			var e struct {
				Message *string `json:"message"`
			}
			if err := dec.Decode(&raw); err != nil {
				return bad(refNotJSON(err))
			}
			if isObject(raw) && json.Unmarshal(raw, &e) == nil && e.Message != nil {
				ans.AppError = true
			}
		case "data":
			hasData = true
			ok, err := c.readData(dec)
			if err != nil && c.breach != nil {
				return ans, c.breach
			}
			if err != nil {
				return bad(refNotJSON(err))
			}
			dataOK = ok
		default:
			if err := dec.Decode(&raw); err != nil {
				return bad(refNotJSON(err))
			}
		}
	}
	if err := closeObject(dec); err != nil {
		return bad(refNotJSON(err))
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
	if j.Type == PreExport && j.stringsSent && c.sawInline() && c.count != j.count {
		return bad(fmt.Sprintf("it returns %d strings for the %d it was sent; a pre-export answer keeps every string", c.count, j.count))
	}
	if c.previewSet != nil {
		if b := c.checkPreview(); b != nil {
			return ans, b
		}
	}
	return ans, nil
}

// refNotJSON is the rule broken by an answer the decoder could not read:
// too deeply nested when it gave up for depth, else not valid JSON.
func refNotJSON(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) && strings.Contains(syn.Error(), "exceeded max depth") {
		return "it is too deeply nested (arrays and objects over " + strconv.Itoa(jsonscan.EncodingJSONMaxDepth) + " levels deep)"
	}
	return "it is not valid JSON"
}

// sawInline tells whether the answer carried its strings inline.
func (c *refChecker) sawInline() bool { return c.seen != nil }

// readData reads the data object; ok tells whether it carries what the job
// type needs.
func (c *refChecker) readData(dec *json.Decoder) (ok bool, err error) {
	if err := openObject(dec); err != nil {
		return false, err
	}
	var raw json.RawMessage
	for dec.More() {
		key, err := nextKey(dec)
		if err != nil {
			return false, err
		}
		switch {
		case key == "strings" && c.job.Type != BuildFile:
			if err := c.readStrings(dec); err != nil {
				return false, err
			}
			ok = true
		case key == "preview" && c.job.Type == ParseFile:
			var p *string
			if err := dec.Decode(&p); err != nil {
				var typeErr *json.UnmarshalTypeError
				if !errors.As(err, &typeErr) {
					return false, err
				}
				c.fail(0, "", "data.preview is not a base64 HTML document")
			} else if p != nil {
				// read as a stream: the decoded page is never held whole
				ids, err := previewElementIDs(strings.NewReader(*p))
				if err != nil {
					c.fail(0, "", "data.preview is not base64")
				}
				c.previewSet = ids
			}
		case key == "content" && c.job.Type == BuildFile,
			key == "contentUrl" && c.job.Type == BuildFile,
			key == "stringsUrl" && c.job.Type != BuildFile:
			var s *string
			if err := dec.Decode(&s); err != nil {
				var typeErr *json.UnmarshalTypeError
				if !errors.As(err, &typeErr) {
					return false, err
				}
				c.fail(0, "", "data."+key+" is not a string")
			} else if s != nil && *s != "" {
				ok = true
				if key == "content" {
					if _, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(*s))); err != nil {
						c.fail(0, "", "data.content is not base64")
					}
				}
			}
		default:
			if err := dec.Decode(&raw); err != nil {
				return false, err
			}
		}
	}
	_, err = dec.Token()
	return ok, err
}

// fail records the first breach.
func (c *refChecker) fail(index int, ident, rule string) {
	if c.breach == nil {
		c.breach = &Breach{Job: c.job.Type, Index: index, Identifier: ident, Rule: rule}
	}
}

// readStrings reads the strings array a record at a time.
func (c *refChecker) readStrings(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		c.fail(0, "", "data.strings is not an array")
		if _, ok := tok.(json.Delim); ok {
			return errors.New("data.strings is not an array")
		}
		return nil
	}
	if c.seen == nil {
		c.seen = make(map[string]struct{})
	}
	for dec.More() {
		c.count++
		c.rec.reset()
		if err := dec.Decode(&c.rec); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				return err
			}
			c.fail(c.count, c.rec.Identifier, "has a "+typeErr.Field+" of the wrong type ("+typeErr.Value+")")
			continue
		}
		if c.breach == nil {
			c.checkRecord(c.count, &c.rec)
		}
	}
	_, err = dec.Token()
	return err
}

var refStatusValues = [][]byte{[]byte(`"untranslated"`), []byte(`"translated"`), []byte(`"approved"`)}

// checkRecord checks one string record of the answer.
func (c *refChecker) checkRecord(n int, r *refRecord) {
	id := r.Identifier
	if id == "" {
		c.fail(n, "", "has no identifier")
		return
	}
	switch c.job.Type {
	case ParseFile:
		if _, dup := c.seen[id]; dup {
			c.fail(n, id, "has the identifier of an earlier string; identifiers are unique within a file")
			return
		}
		c.seen[id] = struct{}{}
		if refPresent(r.CustomData) {
			if r.CustomData[0] != '"' {
				c.fail(n, id, "has a customData that is not a string")
				return
			}
			c.scan.Reset(r.CustomData)
			if data, err := c.scan.String(); err == nil && len(data) > MaxCustomData {
				c.fail(n, id, fmt.Sprintf("has customData of %d bytes, over the 4 KB the service keeps", len(data)))
				return
			}
		}
		if len(r.PreviewID) > 0 && !bytes.Equal(r.PreviewID, []byte("null")) {
			pid, err := strconv.ParseInt(string(r.PreviewID), 10, 64)
			if err != nil {
				c.fail(n, id, "has a previewId that is not an integer")
				return
			}
			c.previewIDs = append(c.previewIDs, refPreviewRef{id: pid, index: n, ident: id})
		} else {
			c.previewIDs = append(c.previewIDs, refPreviewRef{id: -1, index: n, ident: id})
		}
	case PreExport:
		if r.UniqID == "" {
			c.fail(n, id, "has no uniqId")
			return
		}
		if _, dup := c.seen[r.UniqID]; dup {
			c.fail(n, id, "has the uniqId of an earlier string; a pre-export answer keeps each string once")
			return
		}
		c.seen[r.UniqID] = struct{}{}
		if c.job.stringsSent {
			if _, sent := c.job.uniqIDs[r.UniqID]; !sent {
				c.fail(n, id, "has a uniqId that was not sent; a pre-export answer keeps the uniqId of each string")
				return
			}
		}
	}
	if rule := c.checkOptional(r); rule != "" {
		c.fail(n, id, rule)
		return
	}
	if len(r.Text) == 0 || bytes.Equal(r.Text, []byte("null")) {
		c.fail(n, id, "has no text")
		return
	}
	if rule := c.checkText(r.Text, r.HasPlurals, c.job.source, ""); rule != "" {
		c.fail(n, id, rule)
		return
	}
	for lang, t := range r.Translations {
		cats, known := c.job.targets[lang]
		if !known {
			c.fail(n, id, "has a translation into "+shortQuote(lang)+", which is not a target language of the job")
			return
		}
		if len(t.Text) == 0 || bytes.Equal(t.Text, []byte("null")) {
			c.fail(n, id, "has a translation into "+shortQuote(lang)+" without text")
			return
		}
		if rule := c.checkText(t.Text, r.HasPlurals, cats, lang); rule != "" {
			c.fail(n, id, rule)
			return
		}
		if rule := c.checkStatus(t.Status, r.HasPlurals, cats); rule != "" {
			c.fail(n, id, "has a translation into "+shortQuote(lang)+" with "+rule)
			return
		}
	}
}

// checkText checks a text against hasPlurals and the language's plural
// categories, and returns the broken rule or "". lang is the target
// language of a translation, "" for the source text.
func (c *refChecker) checkText(text json.RawMessage, plural bool, cats []string, lang string) string {
	what := func() string {
		if lang == "" {
			return "text"
		}
		return "translation text into " + shortQuote(lang)
	}
	if !plural {
		if text[0] != '"' {
			return "has a " + what() + " that is not a string, and hasPlurals is false"
		}
		return ""
	}
	if text[0] != '{' {
		return "has a " + what() + " that is not an object of plural forms, and hasPlurals is true"
	}
	n := 0
	rule := c.members(text, func(key, value []byte) string {
		n++
		if len(cats) > 0 && !refContainsKey(cats, key) {
			return "has a " + what() + " with the plural form " + shortQuote(string(key)) + ", which is not a plural category of the language"
		}
		if value[0] != '"' {
			return "has a " + what() + " whose plural form " + shortQuote(string(key)) + " is not a string"
		}
		return ""
	})
	if rule == "" && n == 0 {
		return "has a " + what() + " that is an empty object of plural forms"
	}
	return rule
}

// checkStatus checks a translation status; absent means translated.
func (c *refChecker) checkStatus(status json.RawMessage, plural bool, cats []string) string {
	if len(status) == 0 || bytes.Equal(status, []byte("null")) {
		return ""
	}
	if status[0] == '"' {
		if !refValidStatus(status) {
			return "a status other than untranslated, translated or approved"
		}
		return ""
	}
	if !plural || status[0] != '{' {
		return "a status that is not a string"
	}
	return c.members(status, func(key, value []byte) string {
		if len(cats) > 0 && !refContainsKey(cats, key) {
			return "a status for the plural form " + shortQuote(string(key)) + ", which is not a plural category of the language"
		}
		if !refValidStatus(value) {
			return "a status other than untranslated, translated or approved"
		}
		return ""
	})
}

// errRefRule stops a walk over members once a rule is broken.
var errRefRule = errors.New("rule broken")

// members calls fn with the key (decoded) and the value of each member of
// obj, an object the decoder has read, until fn returns a rule, which
// members returns. It allocates nothing for keys without escapes.
func (c *refChecker) members(obj []byte, fn func(key, value []byte) string) string {
	rule := ""
	c.scan.Reset(obj)
	err := c.scan.Object(func(key []byte) error {
		value, err := c.scan.Value()
		if err != nil {
			return err
		}
		if rule = fn(key, value); rule != "" {
			return errRefRule
		}
		return nil
	})
	if err != nil && err != errRefRule {
		// The decoder read obj already: only depth can stop the scanner.
		return "is too deeply nested"
	}
	return rule
}

// checkOptional checks the types of the optional fields of a string
// record, which the service refuses when they are of another type, and
// returns the broken rule or "".
func (c *refChecker) checkOptional(r *refRecord) string {
	if refPresent(r.Context) && r.Context[0] != '"' {
		return "has a context that is not a string"
	}
	if refPresent(r.MaxLength) && !jsonscan.IsInteger(r.MaxLength) {
		return "has a maxLength that is not an integer or null"
	}
	if refPresent(r.IsHidden) && r.IsHidden[0] != 't' && r.IsHidden[0] != 'f' {
		return "has an isHidden that is not a boolean or null"
	}
	if refPresent(r.Labels) {
		c.scan.Reset(r.Labels)
		err := c.scan.Array(func() error {
			if c.scan.Peek() != '"' {
				return errRefRule
			}
			return c.scan.Skip()
		})
		if err != nil {
			return "has labels that are not an array of strings"
		}
	}
	return ""
}

// refPresent tells whether a raw field was given a value other than null.
func refPresent(v json.RawMessage) bool {
	return len(v) > 0 && !bytes.Equal(v, []byte("null"))
}

// refContainsKey reports whether key is in list.
func refContainsKey(list []string, key []byte) bool {
	for _, v := range list {
		if string(key) == v {
			return true
		}
	}
	return false
}

func refValidStatus(v json.RawMessage) bool {
	for _, s := range refStatusValues {
		if bytes.Equal(v, s) {
			return true
		}
	}
	return false
}

// checkPreview checks that every string has a previewId naming an element
// of the preview.
func (c *refChecker) checkPreview() *Breach {
	ids := c.previewSet
	for _, p := range c.previewIDs {
		if p.id < 0 {
			return &Breach{Job: c.job.Type, Index: p.index, Identifier: p.ident, Rule: "has no previewId, and the answer sends a preview"}
		}
		if _, ok := ids[p.id]; !ok {
			return &Breach{Job: c.job.Type, Index: p.index, Identifier: p.ident,
				Rule: "has previewId " + strconv.FormatInt(p.id, 10) + ", and the preview has no element string_preview_id_" + strconv.FormatInt(p.id, 10)}
		}
	}
	return nil
}
