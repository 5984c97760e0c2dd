package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/servicegate/servicegate/contract"
)

// The rules of the interface for what an app sends back, as the run
// judges them. The string rules are the contract package's (the checker
// the gateway runs on live calls); these functions add what a single
// answer does not show, and say each verdict for a person.

// judgeTransport is the verdict on how a job was answered, whatever the
// answer says: an answer came, whole, within the time limit, and at most
// 5 MB inline.
func judgeTransport(ex *exchange, jobType string) string {
	if !ex.answered {
		return noAnswer(ex.err, ex.timeout)
	}
	if ex.err != nil {
		return "the answer could not be read whole: " + noAnswer(ex.err, ex.timeout)
	}
	if ex.size > MaxInline {
		by := "data.stringsUrl"
		if jobType == contract.BuildFile {
			by = "data.contentUrl"
		}
		return fmt.Sprintf("the answer is %s inline, over the 5 MB the service takes: an answer this large must go by URL (%s)", sizeName(ex.size), by)
	}
	return ""
}

// judgeStatus is the verdict on the status of an answer to a valid job:
// 2xx. Another status is told with the answer's error.message, which is
// what the service shows its user.
func judgeStatus(status int, body []byte) string {
	if status >= 200 && status <= 299 {
		return ""
	}
	if msg := errorMessage(body); msg != "" {
		return fmt.Sprintf("answered %d with the message: %s", status, oneLine(msg))
	}
	return fmt.Sprintf("answered %d without error.message (the service shows its user that message): %s", status, summary(body))
}

// errorMessage is the answer's error.message, "" when it has none.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Message
}

// breachReason says why the contract checker refused an answer.
func breachReason(err error) string {
	var b *contract.Breach
	if errors.As(err, &b) {
		return "the answer breaks the contract: " + breachText(b)
	}
	return "the answer could not be read: " + err.Error()
}

// breachText is a breach without the words meant for the service's user.
func breachText(b *contract.Breach) string {
	switch {
	case b.Index > 0 && b.Identifier != "":
		return fmt.Sprintf("string %s (number %d) %s", strconv.Quote(clip(b.Identifier, 80)), b.Index, b.Rule)
	case b.Index > 0:
		return fmt.Sprintf("string number %d %s", b.Index, b.Rule)
	}
	return b.Rule
}

// judgeForm is the verdict on an answer to a hostile or limit job (an
// empty file, a byte-order mark, CRLF line ends, a file near 5 MB): only
// its form and the limits. It is a JSON answer in the contract's form
// (data, or error.message), 2xx, or 4xx with error.message when the app
// refuses the input; a string rule it breaks is not judged (a repeated
// file repeats identifiers).
func judgeForm(job *contract.Job, ex *exchange) string {
	if r := judgeTransport(ex, job.Type); r != "" {
		return r
	}
	switch {
	case ex.status >= 400 && ex.status <= 499:
		if errorMessage(ex.answer) == "" {
			return fmt.Sprintf("answered %d without error.message: a refusal says why in error.message, which the service shows its user (%s)", ex.status, summary(ex.answer))
		}
		return ""
	case ex.status < 200 || ex.status > 299:
		return judgeStatus(ex.status, ex.answer)
	}
	_, err := job.CheckAnswerBytes(ex.answer)
	var b *contract.Breach
	if errors.As(err, &b) && b.Index > 0 {
		return "" // a string rule: not judged here
	}
	if err != nil {
		return breachReason(err)
	}
	return ""
}

// jobAnswer is what a valid answer carries.
type jobAnswer struct {
	// strs are the strings of a parse-file or pre-export answer, inline
	// or fetched from data.stringsUrl.
	strs []map[string]any
	// file is the file of a build-file answer: data.content decoded, or
	// fetched from data.contentUrl.
	file []byte
}

// judgeJob is the verdict on an answer to a valid job: every rule. The
// payloads the answer names by URL are fetched and checked as if they
// were inline.
func (p *plan) judgeJob(ctx context.Context, job *contract.Job, ex *exchange) (jobAnswer, string) {
	if r := judgeTransport(ex, job.Type); r != "" {
		return jobAnswer{}, r
	}
	if r := judgeStatus(ex.status, ex.answer); r != "" {
		return jobAnswer{}, r
	}
	ans, err := job.CheckAnswerBytes(ex.answer)
	if err != nil {
		return jobAnswer{}, breachReason(err)
	}
	if ans.AppError {
		return jobAnswer{}, "answered with an error for a valid job: " + oneLine(errorMessage(ex.answer))
	}
	return p.readData(ctx, job, ex.answer)
}

// answerData is the data of an answer, as the run reads it.
type answerData struct {
	Strings    json.RawMessage `json:"strings"`
	StringsURL *string         `json:"stringsUrl"`
	Preview    *string         `json:"preview"`
	PreviewURL *string         `json:"previewUrl"`
	Content    *string         `json:"content"`
	ContentURL *string         `json:"contentUrl"`
}

// readData reads the strings or the file of an answer the contract
// checker passed, fetching what it names by URL; strings fetched are
// checked by the same checker.
func (p *plan) readData(ctx context.Context, job *contract.Job, answer []byte) (jobAnswer, string) {
	var env struct {
		Data answerData `json:"data"`
	}
	if err := json.Unmarshal(answer, &env); err != nil {
		return jobAnswer{}, "the answer could not be read: " + err.Error()
	}
	d := env.Data
	if job.Type == contract.BuildFile {
		return p.readFile(ctx, d)
	}
	array, preview := []byte(d.Strings), ""
	fetched := false
	if d.PreviewURL != nil && d.Preview == nil {
		b, reason := p.fetch(ctx, "previewUrl", *d.PreviewURL)
		if reason != "" {
			return jobAnswer{}, reason
		}
		preview, fetched = base64.StdEncoding.EncodeToString(b), true
	} else if d.Preview != nil {
		preview = *d.Preview
	}
	if len(bytes.TrimSpace(array)) == 0 || string(bytes.TrimSpace(array)) == "null" {
		if d.StringsURL == nil {
			return jobAnswer{}, "the answer breaks the contract: data has neither strings nor stringsUrl"
		}
		ndjson, reason := p.fetch(ctx, "stringsUrl", *d.StringsURL)
		if reason != "" {
			return jobAnswer{}, reason
		}
		var err error
		if array, _, err = contract.StringsArray(ndjson, false); err != nil {
			return jobAnswer{}, "data.stringsUrl is not new-line delimited JSON of string records: " + err.Error()
		}
		fetched = true
	}
	if fetched {
		// what came by URL meets the rules of what comes inline
		if _, err := job.CheckAnswerBytes(inlineAnswer(array, preview)); err != nil {
			return jobAnswer{}, "by URL, " + breachReason(err)
		}
	}
	var strs []map[string]any
	if err := jsonUnmarshal(array, &strs); err != nil {
		return jobAnswer{}, "the strings could not be read: " + err.Error()
	}
	if preview != "" {
		if r := previewWithPlurals(strs); r != "" {
			return jobAnswer{}, r
		}
	}
	return jobAnswer{strs: strs}, ""
}

// inlineAnswer is a parse-file or pre-export answer carrying array (and
// preview, base64, unless empty) inline.
func inlineAnswer(array []byte, preview string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"data":{"strings":`)
	b.Write(array)
	if preview != "" {
		b.WriteString(`,"preview":`)
		b.Write(mustJSON(preview))
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// readFile is the file of a build-file answer.
func (p *plan) readFile(ctx context.Context, d answerData) (jobAnswer, string) {
	if d.Content != nil {
		file, err := base64.StdEncoding.DecodeString(*d.Content)
		if err != nil {
			return jobAnswer{}, "the answer breaks the contract: data.content is not base64"
		}
		return jobAnswer{file: file}, ""
	}
	if d.ContentURL == nil {
		return jobAnswer{}, "the answer breaks the contract: data has neither content nor contentUrl"
	}
	file, reason := p.fetch(ctx, "contentUrl", *d.ContentURL)
	return jobAnswer{file: file}, reason
}

// previewWithPlurals is the rule that a preview is absent when plural
// strings exist.
func previewWithPlurals(strs []map[string]any) string {
	for i, s := range strs {
		if s["hasPlurals"] == true {
			return fmt.Sprintf("the answer has a preview, and string %s (number %d) has plurals: the service supports no preview when plural strings exist", quoteIdent(s), i+1)
		}
	}
	return ""
}

// sameStrings is the rule that one file sent two ways (inline and by URL)
// gives the same strings.
func sameStrings(a, b []map[string]any, aWay, bWay string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		ja, jb := mustJSON(a[i]), mustJSON(b[i])
		if !bytes.Equal(ja, jb) {
			return fmt.Sprintf("the same file gives other strings by %s than by %s: string number %d is %s by %s and %s by %s",
				bWay, aWay, i+1, clip(string(jb), 200), bWay, clip(string(ja), 200), aWay)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("the same file gives %d strings by %s and %d by %s", len(b), bWay, len(a), aWay)
	}
	return ""
}

// roundTripTranslations is the rule that the file built from strings
// with translations parses back (as a translation import into targets) to
// those translations: for each string sent, a string of the same
// identifier whose translation into each target (translations.<id>.text,
// or its text when the import has one target language) is the one sent.
func roundTripTranslations(sent, back []map[string]any, targets []string) string {
	byID := indexStrings(back)
	for _, s := range sent {
		id, _ := s["identifier"].(string)
		b, ok := byID[id]
		if !ok {
			return fmt.Sprintf("string %s was built into the file with its translations and is missing when that file is parsed back (%d strings came back)", strconv.Quote(clip(id, 80)), len(back))
		}
		for _, lang := range targets {
			want := translationText(s, lang)
			got, ok := lookupTranslation(b, lang)
			if !ok && len(targets) == 1 {
				got, ok = b["text"], true
			}
			if !ok || !bytes.Equal(mustJSON(want), mustJSON(got)) {
				return fmt.Sprintf("string %s was built with the translation %s into %s and parses back with %s", strconv.Quote(clip(id, 80)),
					clip(string(mustJSON(want)), 40), lang, describe(got, ok))
			}
		}
	}
	return ""
}

// roundTripSource is the rule that the file built with no translation
// parses back (as a source upload) to the source strings: the same
// identifiers with the same texts.
func roundTripSource(sent, back []map[string]any) string {
	byID := indexStrings(back)
	for _, s := range sent {
		id, _ := s["identifier"].(string)
		b, ok := byID[id]
		if !ok {
			return fmt.Sprintf("string %s was built into the file and is missing when that file is parsed back (%d strings came back)", strconv.Quote(clip(id, 80)), len(back))
		}
		if !bytes.Equal(mustJSON(s["text"]), mustJSON(b["text"])) {
			return fmt.Sprintf("string %s was built with the text %s and parses back with %s", strconv.Quote(clip(id, 80)),
				clip(string(mustJSON(s["text"])), 40), clip(string(mustJSON(b["text"])), 40))
		}
	}
	if len(back) != len(sent) {
		return fmt.Sprintf("the file built from %d strings parses back to %d", len(sent), len(back))
	}
	return ""
}

// judgeAck is the verdict on the answer to a webhook delivery or a
// lifecycle call: any 2xx.
func judgeAck(ex *exchange) string {
	if !ex.answered {
		return noAnswer(ex.err, ex.timeout)
	}
	if ex.status >= 200 && ex.status <= 299 {
		return ""
	}
	if msg := errorMessage(ex.answer); msg != "" {
		return fmt.Sprintf("answered %d, not 2xx, with the message: %s", ex.status, oneLine(msg))
	}
	return fmt.Sprintf("answered %d, not 2xx: %s", ex.status, summary(ex.answer))
}

func indexStrings(strs []map[string]any) map[string]map[string]any {
	m := make(map[string]map[string]any, len(strs))
	for _, s := range strs {
		if id, ok := s["identifier"].(string); ok {
			if _, dup := m[id]; !dup {
				m[id] = s
			}
		}
	}
	return m
}

func translationText(s map[string]any, lang string) any {
	t, _ := lookupTranslation(s, lang)
	return t
}

func lookupTranslation(s map[string]any, lang string) (any, bool) {
	trs, _ := s["translations"].(map[string]any)
	t, ok := trs[lang].(map[string]any)
	if !ok {
		return nil, false
	}
	text, ok := t["text"]
	return text, ok
}

func describe(v any, ok bool) string {
	if !ok {
		return "none"
	}
	return clip(string(mustJSON(v)), 40)
}

func quoteIdent(s map[string]any) string {
	id, _ := s["identifier"].(string)
	return strconv.Quote(clip(id, 80))
}

// oneLine is an app's message on one line, at most 300 characters.
func oneLine(msg string) string {
	return clip(strings.Join(strings.Fields(msg), " "), 300)
}

// summary is the start of an answer, on one line, for a reason.
func summary(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return "an empty body"
	}
	return strconv.Quote(clip(s, 160))
}

// clip cuts s to at most n runes, with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// sizeName is a size as a person reads it (5.2 MB, in MiB as the limits
// are).
func sizeName(n int64) string {
	return strings.Replace(humanize.IBytes(uint64(n)), "iB", "B", 1)
}
