package contract

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/servicegate/servicegate/jsonscan"
)

// ParseJobBytes is ParseJob on a request held whole in memory: the same
// checks, the same answers, read where the request lies. The large values
// (file.content, the strings) are checked in place and never copied, where
// ParseJob's decoder buffers each value and copies file.content twice more
// (about four times the request in garbage for a 5 MB parse-file job). It
// keeps no reference to body after it returns.
//
// A body that is not valid JSON is handed to ParseJob, whose decoder tells
// where it breaks: the answers to broken JSON are ParseJob's own.
func ParseJobBytes(module string, body []byte) (*Job, error) {
	job, err := scanJob(module, body)
	if errors.Is(err, jsonscan.ErrSyntax) || errors.Is(err, jsonscan.ErrTooDeep) {
		return ParseJob(module, bytes.NewReader(body))
	}
	return job, err
}

// scanJob reads the job as ParseJob does, member by member, and returns a
// jsonscan error, for ParseJob to read again, when the JSON is broken.
// Each member's value is read at depth 0, as ParseJob's decoder reads each
// value on its own.
func scanJob(module string, body []byte) (*Job, error) {
	var s jsonscan.Scanner
	s.MaxDepth = jsonscan.EncodingJSONMaxDepth
	s.Reset(body)
	if s.Peek() != '{' {
		return nil, requestErr("the body is not a JSON object")
	}
	job := &Job{}
	var seen struct{ org, project, file, source, targets, strs bool }
	err := s.Object(func(key []byte) error {
		depth := s.Depth()
		s.SetDepth(0)
		defer s.SetDepth(depth)
		switch string(key) {
		case "jobType":
			v, err := s.Value()
			if err != nil {
				return err
			}
			if json.Unmarshal(v, &job.Type) != nil {
				return requestErr("jobType is not a string")
			}
		case "organization", "project":
			name, object := string(key), s.Peek() == '{'
			if err := s.Skip(); err != nil {
				return err
			}
			if !object {
				return requestErr("%s is not an object", name)
			}
			if name == "organization" {
				seen.org = true
			} else {
				seen.project = true
			}
		case "file":
			if err := job.scanFile(&s); err != nil {
				return err
			}
			seen.file = true
		case "sourceLanguage":
			v, err := s.Value()
			if err != nil {
				return err
			}
			var l language
			if !isObject(v) || json.Unmarshal(v, &l) != nil {
				return requestErr("sourceLanguage is not a language object")
			}
			seen.source, job.source = true, l.PluralCategoryNames
		case "targetLanguages":
			v, err := s.Value()
			if err != nil {
				return err
			}
			var ls []language
			if !isArray(v) || json.Unmarshal(v, &ls) != nil {
				return requestErr("targetLanguages is not an array of language objects")
			}
			seen.targets = true
			job.targets = make(map[string][]string, len(ls))
			for _, l := range ls {
				if l.ID == "" {
					return requestErr("a target language has no id")
				}
				job.targets[l.ID] = l.PluralCategoryNames
			}
		case "strings":
			if err := job.scanSentStrings(&s); err != nil {
				return err
			}
			seen.strs = true
		case "stringsUrl":
			v, err := s.Value()
			if err != nil {
				return err
			}
			if json.Unmarshal(v, &job.StringsURL) != nil || job.StringsURL == "" {
				return requestErr("stringsUrl is not a URL")
			}
			seen.strs = true
		default:
			return s.Skip()
		}
		return nil
	})
	if err == nil {
		err = s.Finish()
	}
	if err == nil {
		err = job.checkShape(module, seen.org, seen.project, seen.source, seen.targets, seen.strs)
	}
	if err != nil {
		return nil, err
	}
	return job, nil
}

// scanFile reads the file object as ParseJob's json.Unmarshal into
// {content, contentUrl *string} does (keys matched regardless of ASCII
// case, null clearing a key read before, the last of a key winning), with
// content checked in place rather than decoded.
func (j *Job) scanFile(s *jsonscan.Scanner) error {
	bad := requestErr("file is not an object with a content or contentUrl string")
	if s.Peek() != '{' {
		if err := s.Skip(); err != nil {
			return err
		}
		return bad
	}
	var content, hasURL, mismatch bool
	var url string
	err := s.Object(func(key []byte) error {
		isContent := bytes.EqualFold(key, []byte("content"))
		if !isContent && !bytes.EqualFold(key, []byte("contentUrl")) {
			return s.Skip()
		}
		switch s.Peek() {
		case 'n': // null: the pointer is nil again
			if isContent {
				content = false
			} else {
				hasURL = false
			}
			return s.Skip()
		case '"':
			if isContent {
				content = true
				return s.Skip()
			}
			v, err := s.String()
			hasURL, url = true, string(v)
			return err
		}
		mismatch = true // json.Unmarshal reads on, then fails
		return s.Skip()
	})
	if err != nil {
		return err
	}
	if mismatch {
		return bad
	}
	j.HasContent = content
	if hasURL {
		j.ContentURL = url
	}
	return nil
}

// scanSentStrings reads the request's strings array as readSentStrings
// does, a record at a time, each at depth 0.
func (j *Job) scanSentStrings(s *jsonscan.Scanner) error {
	if s.Peek() != '[' {
		if err := s.Skip(); err != nil {
			return err
		}
		return requestErr("strings is not an array")
	}
	if j.Type == PreExport || j.Type == "" {
		j.uniqIDs = make(map[string]int32)
	}
	var rr recordReader
	depth := s.Depth()
	err := s.Array(func() error {
		s.SetDepth(0)
		id, typeErr, err := rr.read(s)
		s.SetDepth(depth + 1)
		if err != nil {
			return err
		}
		if typeErr {
			return requestErr("string %d is not a string record", j.count+1)
		}
		j.count++
		if j.uniqIDs != nil && len(id) > 0 {
			j.addUniqID(string(id))
		}
		return nil
	})
	if err != nil {
		return err
	}
	j.stringsSent = true
	return nil
}
