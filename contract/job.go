// Package contract checks the exchanges of the service's module calls
// (custom file format: parse-file and build-file; file pre-export) against
// the contract the service sets for them: the job the service sends, and
// the answer the app gives to that job. It also reads and writes strings in
// new-line delimited JSON, and signs the URLs of payloads handed over by URL.
//
// Requests are read as streams, a string record at a time; answers are
// checked where they lie, with the project's byte-slice JSON scanner (see
// CheckAnswer), so checking a 5 MB answer holds no second copy of it. The
// package depends on nothing but the standard library and jsonscan.
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The modules whose exchanges this package checks, as the app descriptor
// names them.
const (
	CustomFileFormat = "custom-file-format"
	FilePreExport    = "file-pre-export"
)

// The job types of the service's requests.
const (
	ParseFile = "parse-file"
	BuildFile = "build-file"
	PreExport = "file-pre-export"
)

// Job is what a checked request tells about the answer it expects.
type Job struct {
	// Type is the request's jobType: ParseFile, BuildFile or PreExport.
	Type string
	// StringsURL is the request's stringsUrl, "" when it carries none.
	StringsURL string
	// ContentURL is the request's file.contentUrl, "" when it carries none.
	ContentURL string
	// HasContent tells whether the request carries file.content inline.
	HasContent bool

	stringsSent bool             // strings came inline: count and uniqIds are known
	count       int              // strings sent
	uniqIDs     map[string]int32 // pre-export: the uniqIds sent, each with its number among them
	// sentOrder is the uniqIds sent by their number: an answer that keeps
	// the strings in their order finds each uniqId where the last one
	// ended, without a look-up in uniqIDs.
	sentOrder []string
	source    []string            // plural categories of the source language
	targets   map[string][]string // target language id → its plural categories
}

// language is the part of a language object the contract needs.
type language struct {
	ID                  string   `json:"id"`
	PluralCategoryNames []string `json:"pluralCategoryNames"`
}

// RequestError is a request that breaks the contract; its message is for
// the person who reads it in the service's UI and never quotes the body
// beyond field names and a short jobType.
type RequestError struct{ msg string }

func (e *RequestError) Error() string { return e.msg }

func requestErr(format string, args ...any) error {
	return &RequestError{msg: "The request is not a valid module job: " + fmt.Sprintf(format, args...) + "."}
}

// ParseJob reads a request of module (CustomFileFormat or FilePreExport)
// and checks its shape: the job type of the module, the organization,
// project, sourceLanguage and targetLanguages objects, the file for
// parse-file (content or contentUrl) and the strings for build-file and
// pre-export (strings or stringsUrl). Any breach is a *RequestError.
func ParseJob(module string, body io.Reader) (*Job, error) {
	dec := json.NewDecoder(body)
	if err := openObject(dec); err != nil {
		return nil, requestErr("the body is not a JSON object")
	}
	job := &Job{}
	var seen struct{ org, project, file, source, targets, strs bool }
	var raw json.RawMessage
	for dec.More() {
		key, err := nextKey(dec)
		if err != nil {
			return nil, requestErr("the body is not valid JSON")
		}
		switch key {
		case "jobType":
			if err := dec.Decode(&job.Type); err != nil {
				return nil, requestErr("jobType is not a string")
			}
		case "organization", "project":
			if err := dec.Decode(&raw); err != nil || !isObject(raw) {
				return nil, requestErr("%s is not an object", key)
			}
			if key == "organization" {
				seen.org = true
			} else {
				seen.project = true
			}
		case "file":
			var f struct {
				Content    *string `json:"content"`
				ContentURL *string `json:"contentUrl"`
			}
			if err := dec.Decode(&raw); err != nil || !isObject(raw) || json.Unmarshal(raw, &f) != nil {
				return nil, requestErr("file is not an object with a content or contentUrl string")
			}
			seen.file = true
			job.HasContent = f.Content != nil
			if f.ContentURL != nil {
				job.ContentURL = *f.ContentURL
			}
		case "sourceLanguage":
			var l language
			if err := dec.Decode(&raw); err != nil || !isObject(raw) || json.Unmarshal(raw, &l) != nil {
				return nil, requestErr("sourceLanguage is not a language object")
			}
			seen.source, job.source = true, l.PluralCategoryNames
		case "targetLanguages":
			var ls []language
			if err := dec.Decode(&raw); err != nil || !isArray(raw) || json.Unmarshal(raw, &ls) != nil {
				return nil, requestErr("targetLanguages is not an array of language objects")
			}
			seen.targets = true
			job.targets = make(map[string][]string, len(ls))
			for _, l := range ls {
				if l.ID == "" {
					return nil, requestErr("a target language has no id")
				}
				job.targets[l.ID] = l.PluralCategoryNames
			}
		case "strings":
			if err := job.readSentStrings(dec); err != nil {
				return nil, err
			}
			seen.strs = true
		case "stringsUrl":
			if err := dec.Decode(&job.StringsURL); err != nil || job.StringsURL == "" {
				return nil, requestErr("stringsUrl is not a URL")
			}
			seen.strs = true
		default:
			if err := dec.Decode(&raw); err != nil {
				return nil, requestErr("the body is not valid JSON")
			}
		}
	}
	if err := closeObject(dec); err != nil {
		return nil, requestErr("the body is not valid JSON")
	}

	if err := job.checkShape(module, seen.org, seen.project, seen.source, seen.targets, seen.strs); err != nil {
		return nil, err
	}
	return job, nil
}

// checkShape checks what a whole job must carry, given the members seen.
func (job *Job) checkShape(module string, org, project, source, targets, strs bool) error {
	switch {
	case module == CustomFileFormat && job.Type != ParseFile && job.Type != BuildFile:
		return requestErr("jobType is %s, and a custom file format app takes parse-file or build-file", shortQuote(job.Type))
	case module == FilePreExport && job.Type != PreExport:
		return requestErr("jobType is %s, and a pre-export app takes file-pre-export", shortQuote(job.Type))
	case module != CustomFileFormat && module != FilePreExport:
		return fmt.Errorf("unknown module %q", module)
	case !org:
		return requestErr("organization is missing")
	case !project:
		return requestErr("project is missing")
	case !source:
		return requestErr("sourceLanguage is missing")
	case !targets:
		return requestErr("targetLanguages is missing")
	case job.Type == ParseFile && !job.HasContent && job.ContentURL == "":
		return requestErr("a parse-file job needs file.content or file.contentUrl")
	case job.Type != ParseFile && !strs:
		return requestErr("a %s job needs strings or stringsUrl", job.Type)
	}
	return nil
}

// readSentStrings reads the request's strings array one record at a time,
// keeping their number and, for pre-export, their uniqIds.
func (j *Job) readSentStrings(dec *json.Decoder) error {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return requestErr("strings is not an array")
	}
	if j.Type == PreExport || j.Type == "" {
		j.uniqIDs = make(map[string]int32)
	}
	var rec struct {
		UniqID string `json:"uniqId"`
	}
	for dec.More() {
		rec.UniqID = ""
		if err := dec.Decode(&rec); err != nil {
			return requestErr("string %d is not a string record", j.count+1)
		}
		j.count++
		if j.uniqIDs != nil && rec.UniqID != "" {
			j.addUniqID(rec.UniqID)
		}
	}
	if _, err := dec.Token(); err != nil {
		return requestErr("strings is not an array")
	}
	j.stringsSent = true
	return nil
}

// SetSentStrings records the strings of the job when they came by URL and
// were read since (see ReadNDJSON): uniqIds is the uniqId of each, in order.
func (j *Job) SetSentStrings(uniqIDs []string) {
	j.stringsSent, j.count = true, len(uniqIDs)
	j.uniqIDs = make(map[string]int32, len(uniqIDs))
	j.sentOrder = make([]string, 0, len(uniqIDs))
	for _, id := range uniqIDs {
		j.addUniqID(id)
	}
}

// addUniqID records id among the uniqIds sent, numbering it when new: the
// check of the answer marks each number it meets.
func (j *Job) addUniqID(id string) {
	if _, ok := j.uniqIDs[id]; !ok {
		j.uniqIDs[id] = int32(len(j.uniqIDs))
		j.sentOrder = append(j.sentOrder, id)
	}
}

var errNotObject = errors.New("not a JSON object")

func openObject(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errNotObject
	}
	return nil
}

// closeObject reads the closing brace and checks nothing follows it.
func closeObject(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func nextKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", errNotObject
	}
	return key, nil
}

func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }
func isArray(raw json.RawMessage) bool  { return len(raw) > 0 && raw[0] == '[' }

// shortQuote quotes s for a message, cut to 64 bytes.
func shortQuote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
