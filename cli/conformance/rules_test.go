package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/emulator"
)

// testJob is a job of jobType as the run sends it, checked by the
// contract's request checker.
func testJob(t testing.TB, jobType string, o emulator.JobOptions) *contract.Job {
	t.Helper()
	in := &emulator.Installation{Domain: "acme.example", OrganizationID: 1}
	kind := contract.CustomFileFormat
	if jobType == contract.PreExport {
		kind = contract.FilePreExport
	}
	job, err := contract.ParseJob(kind, bytes.NewReader(mustJSON(in.JobBody(jobType, o))))
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func answered(status int, body string) *exchange {
	return &exchange{answered: true, status: status, answer: []byte(body), size: int64(len(body)), timeout: time.Minute}
}

// TestRules: each rule of an answer, on a hand-made answer that keeps it
// and on one that breaks it with the reason a person reads.
func TestRules(t *testing.T) {
	p := &plan{client: &http.Client{Timeout: 5 * time.Second}}
	parse := func() *contract.Job {
		return testJob(t, contract.ParseFile, emulator.JobOptions{FileName: "a.kv", Content: []byte("a = b\n"), Targets: []string{"uk"}})
	}
	build := func() *contract.Job {
		return testJob(t, contract.BuildFile, emulator.JobOptions{FileName: "a.kv", Strings: []map[string]any{{"id": 1, "identifier": "a", "text": "b"}}})
	}
	pre := func() *contract.Job {
		return testJob(t, contract.PreExport, emulator.JobOptions{FileName: "a.kv", Strings: preExportStrings()})
	}
	plural := `"hasPlurals":true,"text":{"one":"%d file","other":"%d files"}`
	tests := []struct {
		rule       string
		job        func() *contract.Job
		pass, fail *exchange
		reason     string
	}{
		{"an answer comes", parse, answered(200, `{"data":{"strings":[]}}`),
			&exchange{err: context.DeadlineExceeded, timeout: 3 * time.Second}, "no answer within 3s"},
		{"at most 5 MB inline", parse, answered(200, `{"data":{"strings":[]}}`),
			&exchange{answered: true, status: 200, size: MaxInline + 1, answer: []byte(`{"data":{"strings":[]}}`)},
			"the answer is 5.0 MB inline, over the 5 MB the service takes: an answer this large must go by URL (data.stringsUrl)"},
		{"2xx", parse, answered(201, `{"data":{"strings":[]}}`), answered(500, `{"error":{"message":"Down."}}`),
			"answered 500 with the message: Down."},
		{"a refusal says why", parse, answered(200, `{"data":{"strings":[]}}`), answered(502, `Bad Gateway`),
			`answered 502 without error.message (the service shows its user that message): "Bad Gateway"`},
		{"JSON", parse, answered(200, `{"data":{"strings":[]}}`), answered(200, `<html>`),
			"the answer breaks the contract: it is not a JSON object"},
		{"data or error.message", parse, answered(200, `{"data":{"strings":[]}}`), answered(200, `{"result":[]}`),
			"the answer breaks the contract: it has neither data nor error.message"},
		{"a valid file parses", parse, answered(200, `{"data":{"strings":[]}}`), answered(200, `{"error":{"message":"No."}}`),
			"answered with an error for a valid job: No."},
		{"unique identifiers", parse, answered(200, `{"data":{"strings":[{"identifier":"a","text":"b"},{"identifier":"c","text":"d"}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b"},{"identifier":"a","text":"d"}]}}`),
			`the answer breaks the contract: string "a" (number 2) has the identifier of an earlier string`},
		{"a text", parse, answered(200, `{"data":{"strings":[{"identifier":"a","text":"b"}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a"}]}}`), `string "a" (number 1) has no text`},
		{"plural keys of the source language", parse, answered(200, `{"data":{"strings":[{"identifier":"a",`+plural+`}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{"few":"x"}}]}}`), `string "a" (number 1)`},
		{"optional fields' types", parse, answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","maxLength":3,"labels":["x"]}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","maxLength":"3"}]}}`), `string "a" (number 1) has a maxLength that is not an integer or null`},
		{"customData at most 4 KB", parse, answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","customData":"x"}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","customData":"`+strings.Repeat("x", 4097)+`"}]}}`),
			`has customData of 4097 bytes, over the 4 KB the service keeps`},
		{"translations keyed by target languages", parse,
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","translations":{"uk":{"text":"c","status":"approved"}}}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","translations":{"de":{"text":"c"}}}]}}`),
			`has a translation into "de", which is not a target language of the job`},
		{"translation statuses", parse,
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","translations":{"uk":{"text":"c","status":"untranslated"}}}]}}`),
			answered(200, `{"data":{"strings":[{"identifier":"a","text":"b","translations":{"uk":{"text":"c","status":"done"}}}]}}`),
			`string "a" (number 1) has a translation into "uk" with`},
		{"a preview element per previewId", parse,
			answered(200, `{"data":{"strings":[{"previewId":1,"identifier":"a","text":"b"}],"preview":"`+b64(`<p id="string_preview_id_1">b</p>`)+`"}}`),
			answered(200, `{"data":{"strings":[{"previewId":2,"identifier":"a","text":"b"}],"preview":"`+b64(`<p id="string_preview_id_1">b</p>`)+`"}}`),
			"has previewId 2, and the preview has no element string_preview_id_2"},
		{"no preview with plural strings", parse,
			answered(200, `{"data":{"strings":[{"identifier":"a",`+plural+`}]}}`),
			answered(200, `{"data":{"strings":[{"previewId":1,"identifier":"a",`+plural+`}],"preview":"`+b64(`<p id="string_preview_id_1">b</p>`)+`"}}`),
			`the answer has a preview, and string "a" (number 1) has plurals`},
		{"build-file: content or contentUrl", build, answered(200, `{"data":{"content":"`+b64("a = b\n")+`"}}`),
			answered(200, `{"data":{"strings":[]}}`), "data has neither content nor contentUrl"},
		{"build-file: content is base64", build, answered(200, `{"data":{"content":"YQ=="}}`),
			answered(200, `{"data":{"content":"not base64!"}}`), "data.content is not base64"},
		{"pre-export: as many strings", pre, answered(200, `{"data":{"strings":`+string(mustJSON(preExportStrings()))+`}}`),
			answered(200, `{"data":{"strings":`+string(mustJSON(preExportStrings()[:2]))+`}}`),
			"it returns 2 strings for the 3 it was sent; a pre-export answer keeps every string"},
		{"pre-export: the original uniqIds", pre, answered(200, `{"data":{"strings":`+string(mustJSON(preExportStrings()))+`}}`),
			answered(200, strings.Replace(`{"data":{"strings":`+string(mustJSON(preExportStrings()))+`}}`, "::3", "::4", 1)),
			`string "farewell" (number 3) has a uniqId that was not sent`},
	}
	for _, tt := range tests {
		if _, reason := p.judgeJob(context.Background(), tt.job(), tt.pass); reason != "" {
			t.Errorf("%s: the answer that keeps it fails: %s", tt.rule, reason)
		}
		if _, reason := p.judgeJob(context.Background(), tt.job(), tt.fail); !strings.Contains(reason, tt.reason) {
			t.Errorf("%s: reason %q, want it to hold %q", tt.rule, reason, tt.reason)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestRulesByURL: strings, previews and files an answer names by URL are
// fetched and held to the rules of what comes inline.
func TestRulesByURL(t *testing.T) {
	docs := map[string]string{
		"/ok.ndjson":   `{"identifier":"a","text":"b"}` + "\n" + `{"identifier":"c","text":"d"}` + "\n",
		"/dup.ndjson":  `{"identifier":"a","text":"b"}` + "\n" + `{"identifier":"a","text":"d"}` + "\n",
		"/bad.ndjson":  "[1]\n",
		"/preview":     `<p id="string_preview_id_1">b</p>`,
		"/plural.json": `{"previewId":1,"identifier":"a","hasPlurals":true,"text":{"one":"x","other":"y"}}` + "\n",
		"/file":        "a = b\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(d))
	}))
	defer srv.Close()
	p := &plan{client: &http.Client{Timeout: 5 * time.Second}}
	parse := testJob(t, contract.ParseFile, emulator.JobOptions{FileName: "a.kv", Content: []byte("a = b\n")})
	build := testJob(t, contract.BuildFile, emulator.JobOptions{FileName: "a.kv", Strings: []map[string]any{{"id": 1, "identifier": "a", "text": "b"}}})
	ans, reason := p.judgeJob(context.Background(), parse, answered(200, `{"data":{"stringsUrl":"`+srv.URL+`/ok.ndjson"}}`))
	if reason != "" || len(ans.strs) != 2 || ans.strs[1]["identifier"] != "c" {
		t.Errorf("stringsUrl: %q %v", reason, ans.strs)
	}
	for body, want := range map[string]string{
		`{"data":{"stringsUrl":"` + srv.URL + `/dup.ndjson"}}`:                                         `by URL, the answer breaks the contract: string "a" (number 2) has the identifier of an earlier string`,
		`{"data":{"stringsUrl":"` + srv.URL + `/bad.ndjson"}}`:                                         "data.stringsUrl is not new-line delimited JSON of string records: line 1 is not a JSON object",
		`{"data":{"stringsUrl":"` + srv.URL + `/gone"}}`:                                               "data.stringsUrl answered 404, not 200 with the payload",
		`{"data":{"stringsUrl":"file:///etc/passwd"}}`:                                                 "data.stringsUrl is not an http or https address",
		`{"data":{"stringsUrl":"` + srv.URL + `/plural.json","previewUrl":"` + srv.URL + `/preview"}}`: `the answer has a preview, and string "a" (number 1) has plurals`,
	} {
		if _, reason := p.judgeJob(context.Background(), parse, answered(200, body)); !strings.Contains(reason, want) {
			t.Errorf("%s: reason %q, want %q", body, reason, want)
		}
	}
	ans, reason = p.judgeJob(context.Background(), build, answered(200, `{"data":{"contentUrl":"`+srv.URL+`/file"}}`))
	if reason != "" || string(ans.file) != "a = b\n" {
		t.Errorf("contentUrl: %q %q", reason, ans.file)
	}
}

// TestFormRules: a hostile or limit job is judged on its form and the
// limits only.
func TestFormRules(t *testing.T) {
	job := testJob(t, contract.ParseFile, emulator.JobOptions{FileName: "a.kv", Content: []byte{}})
	for _, tt := range []struct {
		ex     *exchange
		reason string
	}{
		{answered(200, `{"data":{"strings":[]}}`), ""},
		{answered(200, `{"error":{"message":"The file is empty."}}`), ""},
		{answered(200, `{"data":{"strings":[{"identifier":"a","text":"b"},{"identifier":"a","text":"b"}]}}`), ""}, // a string rule
		{answered(413, `{"error":{"message":"Too large."}}`), ""},
		{answered(400, `bad`), `answered 400 without error.message: a refusal says why in error.message, which the service shows its user ("bad")`},
		{answered(500, `{"error":{"message":"Oops."}}`), "answered 500 with the message: Oops."},
		{answered(200, `not json`), "the answer breaks the contract: it is not a JSON object"},
		{answered(200, `{"data":{}}`), "the answer breaks the contract: data has neither strings nor stringsUrl"},
		{&exchange{err: errors.New("connection refused"), timeout: time.Second}, "no answer: connection refused"},
	} {
		if reason := judgeForm(job, tt.ex); reason != tt.reason {
			t.Errorf("%d %s: reason %q, want %q", tt.ex.status, tt.ex.answer, reason, tt.reason)
		}
	}
}

// TestComparisonRules: the same file two ways gives the same strings,
// and the round trips through build-file give back what was built.
func TestComparisonRules(t *testing.T) {
	a := []map[string]any{{"identifier": "a", "text": "b"}, {"identifier": "c", "text": "d"}}
	if r := sameStrings(a, a, "content", "contentUrl"); r != "" {
		t.Errorf("same strings: %s", r)
	}
	if r := sameStrings(a, a[:1], "content", "contentUrl"); r != "the same file gives 1 strings by contentUrl and 2 by content" {
		t.Errorf("fewer strings: %s", r)
	}
	other := []map[string]any{{"identifier": "a", "text": "b"}, {"identifier": "c", "text": "x"}}
	if r := sameStrings(a, other, "content", "contentUrl"); !strings.Contains(r, `string number 2 is {"identifier":"c","text":"x"} by contentUrl and {"identifier":"c","text":"d"} by content`) {
		t.Errorf("other strings: %s", r)
	}

	sent := buildStrings(a, []string{"uk"}, true)
	if sent[0]["id"] != 1 || translationText(sent[0], "uk") != "uk: b" {
		t.Fatalf("build strings: %v", sent)
	}
	asText := []map[string]any{{"identifier": "a", "text": "uk: b"}, {"identifier": "c", "text": "uk: d"}}
	asTranslations := []map[string]any{
		{"identifier": "a", "text": "b", "translations": map[string]any{"uk": map[string]any{"text": "uk: b"}}},
		{"identifier": "c", "text": "d", "translations": map[string]any{"uk": map[string]any{"text": "uk: d"}}},
	}
	for _, back := range [][]map[string]any{asText, asTranslations} {
		if r := roundTripTranslations(sent, back, []string{"uk"}); r != "" {
			t.Errorf("round trip with translations: %s", r)
		}
	}
	if r := roundTripTranslations(sent, a, []string{"uk"}); r != `string "a" was built with the translation "uk: b" into uk and parses back with "b"` {
		t.Errorf("translations lost: %s", r)
	}
	if r := roundTripTranslations(sent, a[1:], []string{"uk"}); !strings.HasPrefix(r, `string "a" was built into the file with its translations and is missing`) {
		t.Errorf("string lost: %s", r)
	}
	if r := roundTripTranslations(buildStrings(a, []string{"uk", "de"}, true), asText, []string{"uk", "de"}); !strings.Contains(r, "into uk and parses back with none") {
		t.Errorf("multilingual, translations as text: %s", r)
	}

	if r := roundTripSource(a, a); r != "" {
		t.Errorf("round trip of the source: %s", r)
	}
	if r := roundTripSource(a, other); r != `string "c" was built with the text "d" and parses back with "x"` {
		t.Errorf("source changed: %s", r)
	}
	if r := roundTripSource(a, append(a, map[string]any{"identifier": "e", "text": "f"})); r != "the file built from 2 strings parses back to 3" {
		t.Errorf("a string more: %s", r)
	}

	if r := judgeAck(answered(204, "")); r != "" {
		t.Errorf("2xx: %s", r)
	}
	if r := judgeAck(answered(401, `{"error":{"message":"The signature of the delivery does not match its body."}}`)); r != "answered 401, not 2xx, with the message: The signature of the delivery does not match its body." {
		t.Errorf("401: %s", r)
	}
}

// TestHostileFiles: the files made from the given one.
func TestHostileFiles(t *testing.T) {
	src := []byte("a = b\r\nc = d\n")
	if f, url := hostileFile("empty", src); len(f) != 0 || url {
		t.Errorf("empty: %q %v", f, url)
	}
	if f, _ := hostileFile("bom", src); !bytes.HasPrefix(f, []byte("\xEF\xBB\xBFa = b")) {
		t.Errorf("bom: %q", f)
	}
	if f, _ := hostileFile("crlf", src); string(f) != "a = b\r\nc = d\r\n" {
		t.Errorf("crlf: %q", f)
	}
	f, url := hostileFile("repeated", src)
	if !url || len(f) >= MaxInline || len(f) < MaxInline-len(src) {
		t.Errorf("repeated: %d bytes, by URL %v", len(f), url)
	}
	if f, _ := hostileFile("repeated", nil); f != nil {
		t.Errorf("repeated empty file: %d bytes", len(f))
	}
}
