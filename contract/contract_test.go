package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/servicegate/servicegate/jsonscan"
)

// job builds a request of jobType as the service sends it; change edits it
// before it is encoded.
func job(jobType string, change func(m map[string]any)) []byte {
	m := map[string]any{
		"jobType":        jobType,
		"organization":   map[string]any{"id": 1, "domain": "acme", "baseUrl": "https://acme.example", "apiBaseUrl": "https://acme.example/api"},
		"project":        map[string]any{"id": 2, "identifier": "p", "name": "P"},
		"file":           map[string]any{"id": 3, "name": "a.txt", "content": "YSA9IGI="},
		"sourceLanguage": map[string]any{"id": "en", "name": "English", "pluralCategoryNames": []string{"one", "other"}},
		"targetLanguages": []any{
			map[string]any{"id": "uk", "name": "Ukrainian", "pluralCategoryNames": []string{"one", "few", "many", "other"}},
		},
	}
	if jobType != ParseFile {
		m["strings"] = []any{
			map[string]any{"uniqId": "h1::1", "identifier": "a", "text": "A"},
			map[string]any{"uniqId": "h1::2", "identifier": "b", "text": "B"},
		}
	}
	if change != nil {
		change(m)
	}
	b, _ := json.Marshal(m)
	return b
}

func TestParseJob(t *testing.T) {
	tests := []struct {
		name    string
		module  string
		body    []byte
		wantErr string // "" when the job is valid
	}{
		{"parse-file", CustomFileFormat, job(ParseFile, nil), ""},
		{"parse-file by contentUrl", CustomFileFormat, job(ParseFile, func(m map[string]any) {
			m["file"] = map[string]any{"contentUrl": "https://files.example/a"}
		}), ""},
		{"build-file", CustomFileFormat, job(BuildFile, nil), ""},
		{"build-file by stringsUrl", CustomFileFormat, job(BuildFile, func(m map[string]any) {
			delete(m, "strings")
			m["stringsUrl"] = "https://files.example/s.ndjson"
		}), ""},
		{"pre-export", FilePreExport, job(PreExport, nil), ""},
		{"new source file: no target languages", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["targetLanguages"] = []any{} }), ""},

		{"not JSON", CustomFileFormat, []byte("jobType=parse-file"), "not a JSON object"},
		{"an array", CustomFileFormat, []byte("[]"), "not a JSON object"},
		{"cut off", CustomFileFormat, job(ParseFile, nil)[:40], "not a valid module job"},
		{"trailing data", CustomFileFormat, append(job(ParseFile, nil), "{}"...), "not valid JSON"},
		{"pre-export job to a format app", CustomFileFormat, job(PreExport, nil), `jobType is "file-pre-export"`},
		{"parse-file to a pre-export app", FilePreExport, job(ParseFile, nil), `jobType is "parse-file"`},
		{"no job type", CustomFileFormat, job(ParseFile, func(m map[string]any) { delete(m, "jobType") }), `jobType is ""`},
		{"job type a number", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["jobType"] = 1 }), "jobType is not a string"},
		{"no organization", CustomFileFormat, job(ParseFile, func(m map[string]any) { delete(m, "organization") }), "organization is missing"},
		{"organization a string", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["organization"] = "acme" }), "organization is not an object"},
		{"no project", CustomFileFormat, job(ParseFile, func(m map[string]any) { delete(m, "project") }), "project is missing"},
		{"no source language", CustomFileFormat, job(ParseFile, func(m map[string]any) { delete(m, "sourceLanguage") }), "sourceLanguage is missing"},
		{"no target languages", CustomFileFormat, job(ParseFile, func(m map[string]any) { delete(m, "targetLanguages") }), "targetLanguages is missing"},
		{"target languages an object", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["targetLanguages"] = map[string]any{} }), "targetLanguages is not an array"},
		{"target language without id", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["targetLanguages"] = []any{map[string]any{"name": "x"}} }), "has no id"},
		{"parse-file without content", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["file"] = map[string]any{"name": "a"} }), "needs file.content or file.contentUrl"},
		{"file content a number", CustomFileFormat, job(ParseFile, func(m map[string]any) { m["file"] = map[string]any{"content": 1} }), "file is not an object"},
		{"build-file without strings", CustomFileFormat, job(BuildFile, func(m map[string]any) { delete(m, "strings") }), "needs strings or stringsUrl"},
		{"strings an object", FilePreExport, job(PreExport, func(m map[string]any) { m["strings"] = map[string]any{} }), "strings is not an array"},
		{"a string record a number", FilePreExport, job(PreExport, func(m map[string]any) { m["strings"] = []any{1} }), "string 1 is not a string record"},
		{"empty stringsUrl", FilePreExport, job(PreExport, func(m map[string]any) { delete(m, "strings"); m["stringsUrl"] = "" }), "stringsUrl is not a URL"},
	}
	parsers := map[string]func(module string, body []byte) (*Job, error){
		"ParseJob":      func(module string, body []byte) (*Job, error) { return ParseJob(module, bytes.NewReader(body)) },
		"ParseJobBytes": ParseJobBytes,
	}
	for name, parse := range parsers {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				j, err := parse(tt.module, tt.body)
				if tt.wantErr == "" {
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					return
				}
				var re *RequestError
				if !errors.As(err, &re) {
					t.Fatalf("%s = %v, %v; want a *RequestError", name, j, err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not hold %q", err, tt.wantErr)
				}
			})
		}
	}
}

func TestParseJobKeepsURLs(t *testing.T) {
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(BuildFile, func(m map[string]any) {
		delete(m, "strings")
		m["stringsUrl"] = "https://files.example/s.ndjson"
		m["file"] = map[string]any{"contentUrl": "https://files.example/a"}
	})))
	if err != nil {
		t.Fatal(err)
	}
	if j.StringsURL != "https://files.example/s.ndjson" || j.ContentURL != "https://files.example/a" || j.HasContent {
		t.Errorf("job = %+v", j)
	}
}

// str is a string record; change edits it.
func str(identifier string, change func(m map[string]any)) map[string]any {
	m := map[string]any{"identifier": identifier, "text": "Text of " + identifier}
	if change != nil {
		change(m)
	}
	return m
}

func answer(data map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"data": data})
	return b
}

func strs(list ...map[string]any) map[string]any {
	if list == nil {
		list = []map[string]any{}
	}
	return map[string]any{"strings": list}
}

func preview(ids ...string) string {
	var b strings.Builder
	b.WriteString("<html><body>")
	for _, id := range ids {
		b.WriteString(`<p id="string_preview_id_` + id + `">x</p>`)
	}
	b.WriteString("</body></html>")
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

func TestCheckAnswer(t *testing.T) {
	plural := func(m map[string]any) {
		m["hasPlurals"] = true
		m["text"] = map[string]any{"one": "1 file", "other": "%d files"}
	}
	withPreview := func(d map[string]any, ids ...string) map[string]any { d["preview"] = preview(ids...); return d }
	pre := func(uniq, ident string) map[string]any {
		return str(ident, func(m map[string]any) { m["uniqId"] = uniq })
	}
	tests := []struct {
		name     string
		jobType  string
		answer   []byte
		wantRule string // "" when the answer keeps the contract
		wantID   string // the identifier the breach names
	}{
		{"parse-file", ParseFile, answer(strs(str("a", nil), str("b", nil))), "", ""},
		{"parse-file with plurals and translations", ParseFile, answer(strs(str("a", func(m map[string]any) {
			plural(m)
			m["translations"] = map[string]any{"uk": map[string]any{
				"text":   map[string]any{"one": "1", "few": "2", "many": "5", "other": "x"},
				"status": map[string]any{"one": "approved", "other": "untranslated"},
			}}
		}), str("b", func(m map[string]any) {
			m["translations"] = map[string]any{"uk": map[string]any{"text": "Б", "status": "translated"}}
			m["customData"] = strings.Repeat("d", MaxCustomData)
		}))), "", ""},
		{"parse-file with a preview", ParseFile, answer(withPreview(strs(
			str("a", func(m map[string]any) { m["previewId"] = 1 }),
			str("b", func(m map[string]any) { m["previewId"] = 2 })), "1", "2")), "", ""},
		{"parse-file by URL", ParseFile, answer(map[string]any{"stringsUrl": "https://x.example/s"}), "", ""},
		{"no strings at all", ParseFile, answer(strs()), "", ""},
		{"the app's own error", ParseFile, []byte(`{"error":{"message":"The file is broken at line 3"}}`), "", ""},
		{"build-file", BuildFile, answer(map[string]any{"content": "YSA9IGI="}), "", ""},
		{"build-file by URL", BuildFile, answer(map[string]any{"contentUrl": "https://x.example/f"}), "", ""},
		{"pre-export", PreExport, answer(strs(pre("h1::2", "b"), pre("h1::1", "a"))), "", ""},

		{"not JSON", ParseFile, []byte("<html>"), "it is not a JSON object", ""},
		{"cut off", ParseFile, answer(strs(str("a", nil)))[:20], "it is not valid JSON", ""},
		{"neither data nor error", ParseFile, []byte(`{"ok":true}`), "neither data nor error.message", ""},
		{"an error without a message", ParseFile, []byte(`{"error":{"code":1}}`), "neither data nor error.message", ""},
		{"data without strings", ParseFile, answer(map[string]any{}), "neither strings nor stringsUrl", ""},
		{"strings an object", ParseFile, answer(map[string]any{"strings": map[string]any{}}), "data.strings is not an array", ""},
		{"no identifier", ParseFile, answer(strs(str("a", nil), str("", nil))), "has no identifier", ""},
		{"identifier a number", ParseFile, answer(strs(str("a", func(m map[string]any) { m["identifier"] = 5 }))), "wrong type", ""},
		{"duplicate identifier", ParseFile, answer(strs(str("a", nil), str("b", nil), str("a", nil))), "identifier of an earlier string", "a"},
		{"no text", ParseFile, answer(strs(str("a", func(m map[string]any) { delete(m, "text") }))), "has no text", "a"},
		{"plural text a string", ParseFile, answer(strs(str("a", func(m map[string]any) { m["hasPlurals"] = true }))), "not an object of plural forms", "a"},
		{"text an object without plurals", ParseFile, answer(strs(str("a", func(m map[string]any) { plural(m); m["hasPlurals"] = false }))), "not a string, and hasPlurals is false", "a"},
		{"unknown plural category", ParseFile, answer(strs(str("a", func(m map[string]any) {
			plural(m)
			m["text"] = map[string]any{"one": "1", "few": "2"}
		}))), `plural form "few"`, "a"},
		{"plural form a number", ParseFile, answer(strs(str("a", func(m map[string]any) {
			plural(m)
			m["text"] = map[string]any{"one": 1}
		}))), "is not a string", "a"},
		{"translation into another language", ParseFile, answer(strs(str("a", func(m map[string]any) {
			m["translations"] = map[string]any{"de": map[string]any{"text": "A"}}
		}))), `into "de", which is not a target language`, "a"},
		{"translation without text", ParseFile, answer(strs(str("a", func(m map[string]any) {
			m["translations"] = map[string]any{"uk": map[string]any{"status": "translated"}}
		}))), "without text", "a"},
		{"plural translation with a source category only", ParseFile, answer(strs(str("a", func(m map[string]any) {
			plural(m)
			m["translations"] = map[string]any{"uk": map[string]any{"text": map[string]any{"two": "x"}}}
		}))), `plural form "two"`, "a"},
		{"unknown status", ParseFile, answer(strs(str("a", func(m map[string]any) {
			m["translations"] = map[string]any{"uk": map[string]any{"text": "A", "status": "done"}}
		}))), "status other than untranslated", "a"},
		{"plural status with an unknown value", ParseFile, answer(strs(str("a", func(m map[string]any) {
			plural(m)
			m["translations"] = map[string]any{"uk": map[string]any{"text": map[string]any{"one": "x"}, "status": map[string]any{"one": "final"}}}
		}))), "status other than untranslated", "a"},
		{"translations an array", ParseFile, answer(strs(str("a", func(m map[string]any) { m["translations"] = []any{} }))), "has a translations of the wrong type", "a"},
		{"customData over 4 KB", ParseFile, answer(strs(str("a", func(m map[string]any) { m["customData"] = strings.Repeat("d", MaxCustomData+1) }))), "customData of 4097 bytes", "a"},
		{"previewId not in the preview", ParseFile, answer(withPreview(strs(
			str("a", func(m map[string]any) { m["previewId"] = 1 }),
			str("b", func(m map[string]any) { m["previewId"] = 3 })), "1", "2")), "string_preview_id_3", "b"},
		{"no previewId with a preview", ParseFile, answer(withPreview(strs(str("a", nil)), "1")), "has no previewId", "a"},
		{"previewId a string", ParseFile, answer(strs(str("a", func(m map[string]any) { m["previewId"] = "1" }))), "previewId that is not an integer", "a"},
		{"preview not base64", ParseFile, answer(map[string]any{"strings": []any{}, "preview": "<html>"}), "data.preview is not base64", ""},
		{"build-file without content", BuildFile, answer(map[string]any{"strings": []any{}}), "neither content nor contentUrl", ""},
		{"build-file content not base64", BuildFile, answer(map[string]any{"content": "a = b"}), "data.content is not base64", ""},
		{"build-file content a number", BuildFile, answer(map[string]any{"content": 1}), "data.content is not a string", ""},
		// issue 13 #8: the types of the optional fields of a string record.
		{"optional fields of the right types", ParseFile, answer(strs(str("a", func(m map[string]any) {
			m["context"], m["maxLength"], m["isHidden"], m["labels"], m["customData"] = "menu", 20, true, []any{"ui", "x"}, "{}"
		}), str("b", func(m map[string]any) {
			m["context"], m["maxLength"], m["isHidden"], m["labels"], m["customData"] = nil, nil, nil, nil, nil
		}), str("c", func(m map[string]any) { m["maxLength"], m["isHidden"], m["labels"] = -1, false, []any{} }))), "", ""},
		{"labels a string", ParseFile, answer(strs(str("a", func(m map[string]any) { m["labels"] = "ui" }))), "has labels that are not an array of strings", "a"},
		{"labels with a number", ParseFile, answer(strs(str("a", func(m map[string]any) { m["labels"] = []any{"ui", 1} }))), "has labels that are not an array of strings", "a"},
		{"labels with an object", ParseFile, answer(strs(str("a", nil), str("b", func(m map[string]any) { m["labels"] = []any{map[string]any{}} }))), "has labels that are not an array of strings", "b"},
		{"maxLength a fraction", ParseFile, answer(strs(str("a", func(m map[string]any) { m["maxLength"] = 1.5 }))), "has a maxLength that is not an integer or null", "a"},
		{"maxLength a string", ParseFile, answer(strs(str("a", func(m map[string]any) { m["maxLength"] = "10" }))), "has a maxLength that is not an integer or null", "a"},
		{"maxLength a boolean", ParseFile, answer(strs(str("a", func(m map[string]any) { m["maxLength"] = true }))), "has a maxLength that is not an integer or null", "a"},
		{"isHidden a string", ParseFile, answer(strs(str("a", func(m map[string]any) { m["isHidden"] = "yes" }))), "has an isHidden that is not a boolean or null", "a"},
		{"isHidden a number", ParseFile, answer(strs(str("a", func(m map[string]any) { m["isHidden"] = 1 }))), "has an isHidden that is not a boolean or null", "a"},
		{"context a number", ParseFile, answer(strs(str("a", func(m map[string]any) { m["context"] = 5 }))), "has a context that is not a string", "a"},
		{"context an array", ParseFile, answer(strs(str("a", func(m map[string]any) { m["context"] = []any{"menu"} }))), "has a context that is not a string", "a"},
		{"customData an object", ParseFile, answer(strs(str("a", func(m map[string]any) { m["customData"] = map[string]any{"line": 1} }))), "has a customData that is not a string", "a"},
		{"customData over 4 KB once decoded", ParseFile, []byte(`{"data":{"strings":[{"identifier":"a","text":"x","customData":"` + strings.Repeat(`\u00e9`, MaxCustomData/2+1) + `"}]}}`), "customData of 4098 bytes", "a"},
		{"pre-export: labels a string", PreExport, answer(strs(pre("h1::1", "a"), str("b", func(m map[string]any) { m["uniqId"], m["labels"] = "h1::2", "ui" }))), "has labels that are not an array of strings", "b"},
		{"pre-export: isHidden a string", PreExport, answer(strs(str("a", func(m map[string]any) { m["uniqId"], m["isHidden"] = "h1::1", "no" }), pre("h1::2", "b"))), "has an isHidden that is not a boolean or null", "a"},
		// issue 13 #13: depth is told as depth.
		{"too deeply nested", ParseFile, []byte(`{"data":{"strings":[],"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`), "too deeply nested", ""},
		{"too deeply nested in a string record", ParseFile, []byte(`{"data":{"strings":[{"identifier":"a","text":"x","more":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}]}}`), "too deeply nested", ""},
		{"too deeply nested beside data", ParseFile, []byte(`{"x":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat("}", 10001) + `,"data":{"strings":[]}}`), "too deeply nested", ""},

		{"pre-export drops a string", PreExport, answer(strs(pre("h1::1", "a"))), "returns 1 strings for the 2", ""},
		{"pre-export adds a string", PreExport, answer(strs(pre("h1::1", "a"), pre("h1::2", "b"), pre("h1::3", "c"))), "uniqId that was not sent", "c"},
		{"pre-export repeats a uniqId", PreExport, answer(strs(pre("h1::1", "a"), pre("h1::1", "b"))), "uniqId of an earlier string", "b"},
		{"pre-export without uniqId", PreExport, answer(strs(pre("h1::1", "a"), str("b", nil))), "has no uniqId", "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := CustomFileFormat
			if tt.jobType == PreExport {
				mod = FilePreExport
			}
			j, err := ParseJob(mod, bytes.NewReader(job(tt.jobType, nil)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.CheckAnswer(bytes.NewReader(tt.answer))
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("CheckAnswer: %v", err)
				}
				return
			}
			var b *Breach
			if !errors.As(err, &b) {
				t.Fatalf("CheckAnswer = %v; want a *Breach with %q", err, tt.wantRule)
			}
			if !strings.Contains(b.Rule, tt.wantRule) {
				t.Errorf("rule %q does not hold %q", b.Rule, tt.wantRule)
			}
			if b.Identifier != tt.wantID {
				t.Errorf("identifier %q, want %q", b.Identifier, tt.wantID)
			}
			if tt.wantID != "" && !strings.Contains(err.Error(), `string "`+tt.wantID+`"`) {
				t.Errorf("message %q does not name string %q", err, tt.wantID)
			}
		})
	}
}

func TestCheckAnswerAppError(t *testing.T) {
	j, _ := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, nil)))
	ans, err := j.CheckAnswer(strings.NewReader(`{"error":{"message":"bad file"}}`))
	if err != nil || !ans.AppError {
		t.Errorf("CheckAnswer = %+v, %v; want an app error that passes", ans, err)
	}
}

func TestBreachMessageCutsLongIdentifiers(t *testing.T) {
	b := &Breach{Job: ParseFile, Index: 2, Identifier: strings.Repeat("k", 500), Rule: "has no text"}
	msg := b.Error()
	if len(msg) > 300 || !strings.Contains(msg, "(number 2) has no text") {
		t.Errorf("message = %q", msg)
	}
}

func FuzzParseJob(f *testing.F) {
	f.Add([]byte(job(ParseFile, nil)))
	f.Add([]byte(job(BuildFile, nil)))
	f.Add([]byte(job(PreExport, nil)))
	f.Add([]byte(`{"jobType":"parse-file","strings":[{"uniqId":1}]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mod := range []string{CustomFileFormat, FilePreExport} {
			j, err := ParseJob(mod, bytes.NewReader(body))
			if (j == nil) == (err == nil) {
				t.Fatalf("ParseJob = %v, %v: want exactly one", j, err)
			}
		}
	})
}

func FuzzCheckAnswer(f *testing.F) {
	f.Add(answer(strs(str("a", nil))))
	f.Add(answer(map[string]any{"strings": []any{str("a", func(m map[string]any) {
		m["hasPlurals"] = true
		m["text"] = map[string]any{"one": "x"}
		m["translations"] = map[string]any{"uk": map[string]any{"text": map[string]any{"few": "y"}, "status": map[string]any{"few": "approved"}}}
	})}, "preview": preview("1")}))
	f.Add([]byte(`{"error":{"message":"x"},"data":{"strings":[1]}}`))
	f.Add([]byte(`{"data":{"content":"YQ=="}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, jt := range []string{ParseFile, BuildFile, PreExport} {
			mod := CustomFileFormat
			if jt == PreExport {
				mod = FilePreExport
			}
			j, err := ParseJob(mod, bytes.NewReader(job(jt, nil)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = j.CheckAnswer(bytes.NewReader(body))
			var b *Breach
			if err != nil && !errors.As(err, &b) {
				t.Fatalf("CheckAnswer error %v is not a *Breach", err)
			}
		}
	})
}

func TestPreviewElementIDsAcrossChunks(t *testing.T) {
	// 20000 elements: markers fall across every read boundary of the stream
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	got, err := previewElementIDs(strings.NewReader(preview(ids...)))
	if err != nil || len(got) != len(ids) {
		t.Fatalf("%d ids, %v; want %d", len(got), err, len(ids))
	}
	for i := 1; i <= len(ids); i++ {
		if _, ok := got[int64(i)]; !ok {
			t.Fatalf("id %d missing", i)
		}
	}
	if _, err := previewElementIDs(strings.NewReader("not base64!")); err == nil {
		t.Errorf("no error for a preview that is not base64")
	}
}

func TestPluralKeysWithEscapes(t *testing.T) {
	j, _ := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, nil)))
	ok := `{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{ "\u006fne" : "x" ,
		"other":"y"}}]}}`
	if _, err := j.CheckAnswer(strings.NewReader(ok)); err != nil {
		t.Errorf("escaped category refused: %v", err)
	}
	bad := `{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{"one":"x","\u0066ew":{"nested":["}"]}}}]}}`
	if _, err := j.CheckAnswer(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `plural form "few"`) {
		t.Errorf("CheckAnswer = %v, want the plural form \"few\" named", err)
	}
}

// FuzzMembers checks the walk over the members of an object against encoding/json: the same
// keys, each value valid JSON.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"one":"x","other":{"a":[1,"]}"]}, "t" : true ,"n":-1.5e3}`))
	f.Add([]byte(`{"\u006fne":"\"}"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		obj = bytes.TrimSpace(obj)
		// (keys in invalid UTF-8 never match a plural category either way)
		if !json.Valid(obj) || !utf8.Valid(obj) || len(obj) == 0 || obj[0] != '{' {
			return
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(obj, &want); err != nil {
			return
		}
		got := map[string]bool{}
		c := checker{aux: jsonscan.Scanner{MaxDepth: jsonscan.EncodingJSONMaxDepth}}
		c.members(obj, func(key, value []byte) string {
			if !json.Valid(value) {
				t.Fatalf("value %q of %q is not JSON", value, obj)
			}
			got[string(key)] = true
			return ""
		})
		if len(got) != len(want) {
			t.Fatalf("keys %v, want those of %v", got, want)
		}
		for k := range want {
			if !got[k] {
				t.Fatalf("key %q missing from %v", k, got)
			}
		}
	})
}
