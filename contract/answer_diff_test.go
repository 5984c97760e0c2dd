package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
)

// jobs are the jobs every answer of the differential checks is checked
// against: each job type, pre-export with strings sent and by URL.
func diffJobs(t testing.TB) []*Job {
	var jobs []*Job
	for _, tc := range []struct {
		module, jobType string
		change          func(m map[string]any)
	}{
		{CustomFileFormat, ParseFile, nil},
		{CustomFileFormat, BuildFile, nil},
		{FilePreExport, PreExport, nil},
		{FilePreExport, PreExport, func(m map[string]any) { delete(m, "strings"); m["stringsUrl"] = "https://x.example/s" }},
	} {
		j, err := ParseJob(tc.module, bytes.NewReader(job(tc.jobType, tc.change)))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// sameVerdict fails t unless the byte-slice checker gives body the verdict
// of the reference (the former checker on encoding/json's Decoder).
func sameVerdict(t *testing.T, j *Job, body []byte) {
	t.Helper()
	wantAns, wantErr := refCheckAnswer(j, bytes.NewReader(body))
	gotAns, gotErr := j.CheckAnswerBytes(body)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s answer %q:\n got %v\nwant %v", j.Type, body, gotErr, wantErr)
	}
	if gotAns != wantAns {
		t.Fatalf("%s answer %q: Answer %+v, want %+v", j.Type, body, gotAns, wantAns)
	}
	if wantErr == nil {
		return
	}
	var got, want *Breach
	if !errors.As(gotErr, &got) || !errors.As(wantErr, &want) {
		t.Fatalf("%s answer %q: errors %v and %v, want two *Breach", j.Type, body, gotErr, wantErr)
	}
	if got.Job != want.Job || got.Index != want.Index || got.Identifier != want.Identifier {
		t.Fatalf("%s answer %q:\n got %v\nwant %v", j.Type, body, gotErr, wantErr)
	}
	// The reference walks a record's translations in map order, which Go
	// randomizes: when two translations break rules, either may be named.
	if got.Rule != want.Rule && !(strings.Contains(got.Rule, "translation") && strings.Contains(want.Rule, "translation")) {
		t.Fatalf("%s answer %q:\n got %v\nwant %v", j.Type, body, gotErr, wantErr)
	}
}

// quirks are answers on the edges of what encoding/json accepts and how it
// decodes a record: the byte-slice checker must read them alike.
var quirks = []string{
	`{"data":{"strings":[{"IDENTIFIER":"a","Text":"x"}]}}`,
	`{"data":{"strings":[{"ıdentifier":"a","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","teXt":"x","translations":{"uk":{"ſtatus":"done","TEXT":"y"}}}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","translations":{"uk":{"text":"y","status":"done"},"uk":{"text":"y"}}}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","translations":{"uk":{"text":"y"},"uk":null}}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","translations":{"de":{"text":"y"}},"translations":null}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","translations":{"uk":5}}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","translations":"uk"}]}}`,
	`{"data":{"strings":[{"identifier":"a","identifier":null,"text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":5,"identifier":"b","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","hasPlurals":"yes","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","hasPlurals":[true],"text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","hasPlurals":true,"hasPlurals":null,"text":{"one":"x"}}]}}`,
	`{"data":{"strings":[null]}}`,
	`{"data":{"strings":["a"]}}`,
	`{"data":{"strings":[[{"identifier":"a"}]]}}`,
	`{"data":{"strings":[true]}}`,
	`{"data":{"strings":[1]}}`,
	`{"data":{"strings":[1x]}}`,
	`{"data":{"strings":[{},]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x"},{"identifier":"a","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"\u0061","text":"x"},{"identifier":"a","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"\ud800","text":"x"},{"identifier":"\ufffd","text":"x"}]}}`,
	"{\"data\":{\"strings\":[{\"identifier\":\"\xff\",\"text\":\"x\"},{\"identifier\":\"\\ufffd\",\"text\":\"x\"}]}}",
	`{"data":{"strings":[{"identifier":"a","text":"x","customData":5}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","previewId":1.0}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x","maxLength":-0,"isHidden":null,"labels":["a",1]}]}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x"}]},"data":5}`,
	`{"data":{"strings":[{}]},"data":5}`,
	`{"data":{"strings":[{}]},"x":}`,
	`{"data":{"strings":[{}],"x":}}`,
	`{"data":{"strings":[{}]},"error":{"message":"x"}}`,
	`{"data":{"strings":{}},"error":{"message":"x"}}`,
	`{"data":{"strings":{"a":}}}`,
	`{"data":{"strings":null}}`,
	`{"data":{"strings":nul}}`,
	`{"data":{"strings":[]},"data":{}}`,
	`{"data":{"strings":[{"identifier":"a","text":"x"}]},"data":{"strings":[{"identifier":"a","text":"x"}]}}`,
	`{"error":{"MESSAGE":"x"}}`,
	`{"error":{"message":"x","message":null}}`,
	`{"error":{"message":5,"message":"x"}}`,
	`{"error":{"message":"x"},"error":5}`,
	`{"error":[{"message":"x"}]}`,
	`{"data":{"preview":5,"strings":[]}}`,
	`{"data":{"preview":"","strings":[{"identifier":"a","text":"x"}]}}`,
	`{"data":{"preview":"!!","strings":[{"identifier":"a","text":"x","previewId":1}]}}`,
	`{"data":{"content":5}}`,
	`{"data":{"content":"YQ="}}`,
	`{"data":{"content":"\u0059Q=="}}`,
	`{"data":{"contentUrl":""}}`,
	`{"data":{"stringsUrl":null}}`,
	`{"data":{"Strings":[]}}`,
	`{"d\u0061ta":{"strings":[]}}`,
	`{"data":{"strings":[{"identifier":"a","uniqId":"h1::1","text":"x"},{"identifier":"b","uniqId":"h1::1","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","uniqId":"h1::1","text":"x"},{"identifier":"b","UNIQID":"h1::2","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","uniqId":"h1::9","text":"x"}]}}`,
	`{"data":{"strings":[{"identifier":"a","uniqId":null,"text":"x"}]}}`,
	`{"data":{}} x`,
	`{"data":{}}{}`,
	`[]`,
	``,
	` `,
	`{`,
	`{"data"`,
	`{"data":`,
	`{"data":{"strings":[`,
}

func TestCheckAnswerMatchesReference(t *testing.T) {
	jobs := diffJobs(t)
	for _, q := range quirks {
		for _, j := range jobs {
			sameVerdict(t, j, []byte(q))
		}
	}
}

// TestCheckAnswerDepthAsDecoder nests a record and a value beside it as
// deep as encoding/json's Decoder takes, and a level deeper: each value is
// counted from 0, as the Decoder counts the values it decodes.
func TestCheckAnswerDepthAsDecoder(t *testing.T) {
	j := diffJobs(t)[0]
	nest := func(levels int) string {
		return strings.Repeat("[", levels) + strings.Repeat("]", levels)
	}
	for _, levels := range []int{9999, 10000, 10001} {
		// the record is one level, its member levels-1 more
		for _, body := range []string{
			`{"data":{"strings":[{"identifier":"a","text":"x","x":` + nest(levels-1) + `}]}}`,
			`{"data":{"x":` + nest(levels) + `,"strings":[]}}`,
			`{"x":` + nest(levels) + `,"data":{"strings":[]}}`,
			`{"error":{"message":"m","x":` + nest(levels-1) + `}}`,
			`{"data":{"strings":[` + nest(levels) + `]}}`,
			`{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{"one":` + nest(levels-2) + `}}]}}`,
			`{"data":{"strings":[{"identifier":"a","hasPlurals":true,"text":{"one":"x"},"translations":{"uk":{"text":{"one":"y"},"status":{"one":` + nest(levels-4) + `}}}}]}}`,
			`{"data":{"strings":[{"identifier":"a","text":"x","labels":["a",` + nest(levels-2) + `]}]}}`,
		} {
			sameVerdict(t, j, []byte(body))
			_, err := j.CheckAnswerBytes([]byte(body))
			if deep := err != nil && strings.Contains(err.Error(), "too deeply nested"); deep != (levels > 10000) {
				t.Errorf("%d levels: %v", levels, err)
			}
		}
	}
}

func FuzzCheckAnswerMatchesReference(f *testing.F) {
	f.Add(answer(strs(str("a", nil))))
	f.Add(answer(map[string]any{"strings": []any{str("a", func(m map[string]any) {
		m["hasPlurals"] = true
		m["text"] = map[string]any{"one": "x"}
		m["translations"] = map[string]any{"uk": map[string]any{"text": map[string]any{"few": "y"}, "status": map[string]any{"few": "approved"}}}
		m["previewId"] = 1
	})}, "preview": preview("1")}))
	f.Add(answer(strs(str("a", func(m map[string]any) { m["uniqId"] = "h1::1" }), str("b", func(m map[string]any) { m["uniqId"] = "h1::2" }))))
	f.Add([]byte(`{"error":{"message":"x"},"data":{"strings":[1]}}`))
	f.Add([]byte(`{"data":{"content":"YQ=="}}`))
	for _, q := range quirks {
		f.Add([]byte(q))
	}
	jobs := diffJobs(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, j := range jobs {
			sameVerdict(t, j, body)
		}
	})
}

// onlyReader hides every method of its reader but Read.
type onlyReader struct{ io.Reader }

func TestCheckAnswerFromEveryReader(t *testing.T) {
	j := diffJobs(t)[0]
	good := answer(strs(str("a", nil), str("b", nil)))
	bad := answer(strs(str("a", nil), str("a", nil)))
	file := func(body []byte, skip int) *os.File {
		f, err := os.CreateTemp(t.TempDir(), "answer")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		f.Write(body)
		f.Seek(int64(skip), io.SeekStart)
		return f
	}
	for _, tc := range []struct {
		name string
		rd   func(body []byte) io.Reader
	}{
		{"bytes.Reader", func(b []byte) io.Reader { return bytes.NewReader(b) }},
		{"bytes.Reader part read", func(b []byte) io.Reader {
			r := bytes.NewReader(append([]byte("xyz"), b...))
			r.Read(make([]byte, 3))
			return r
		}},
		{"file", func(b []byte) io.Reader { return file(b, 0) }},
		{"file from an offset", func(b []byte) io.Reader { return file(append([]byte("xyz"), b...), 3) }},
		{"stream", func(b []byte) io.Reader { return onlyReader{bytes.NewReader(b)} }},
	} {
		if _, err := j.CheckAnswer(tc.rd(good)); err != nil {
			t.Errorf("%s: good answer refused: %v", tc.name, err)
		}
		_, err := j.CheckAnswer(tc.rd(bad))
		var b *Breach
		if !errors.As(err, &b) || b.Index != 2 || b.Identifier != "a" {
			t.Errorf("%s: duplicate answer: %v", tc.name, err)
		}
	}
	if _, err := j.CheckAnswer(file(nil, 0)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("empty file: %v", err)
	}
}

// TestCheckAnswerBytesAllocatesNoCopy checks a 5 MB parse-file answer
// in place: all it allocates, garbage included, is the identifiers' index
// and previewId references, far less than a copy of the answer.
func TestCheckAnswerBytesAllocatesNoCopy(t *testing.T) {
	j := diffJobs(t)[0]
	body := parseFileAnswer(5 << 20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := j.CheckAnswer(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(len(body))/2 {
		t.Errorf("checking a %d-byte answer allocated %d bytes", len(body), n)
	} else {
		t.Logf("checking a %d-byte answer allocated %d bytes", len(body), n)
	}
}

// TestSeenBeforeConfirmsHashes keeps strings under their own hashes, then
// under one hash for all: either way only equal strings are duplicates.
func TestSeenBeforeConfirmsHashes(t *testing.T) {
	body := []byte(`["a","b","c","b","a","d","\u0064"]`)
	pos := []int{1, 5, 9, 13, 17, 21, 25}
	want := []bool{false, false, false, true, true, false, true}
	own := checker{answer: body, seed: maphash.MakeSeed()}
	one := checker{answer: body}
	for i, p := range pos {
		v := stringAt(&own.idA, body, p)
		if got := own.seenBefore(v, p); got != want[i] {
			t.Errorf("string %d (%s) under its own hash: seen %v, want %v", i, v, got, want[i])
		}
		if got := one.seenHash(7, v, p); got != want[i] {
			t.Errorf("string %d (%s) under one hash for all: seen %v, want %v", i, v, got, want[i])
		}
	}
	// enough strings to grow the table a few times, each kept
	var many bytes.Buffer
	var offsets []int
	for i := range 5000 {
		offsets = append(offsets, many.Len())
		fmt.Fprintf(&many, `"s%d",`, i)
	}
	c := checker{answer: many.Bytes(), seed: maphash.MakeSeed()}
	for round := range 2 {
		for i, p := range offsets {
			v := stringAt(&c.idA, many.Bytes(), p)
			if got := c.seenBefore(v, p); got != (round == 1) {
				t.Fatalf("round %d, string %d (%s): seen %v", round, i, v, got)
			}
		}
	}
}

func benchmarkDecodeAny(b *testing.B, size int) {
	answer := parseFileAnswer(size)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var v any
		if err := json.Unmarshal(answer, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAny5MB decodes the answer of BenchmarkCheckParseFile5MB
// with encoding/json into any: the reference for the contract check.
func BenchmarkDecodeAny5MB(b *testing.B) { benchmarkDecodeAny(b, 5<<20) }

// BenchmarkDecodeAny1MB is BenchmarkDecodeAny5MB for the 1 MB answer.
func BenchmarkDecodeAny1MB(b *testing.B) { benchmarkDecodeAny(b, 1<<20) }

// BenchmarkCheckReferenceParseFile5MB checks the answer of
// BenchmarkCheckParseFile5MB with the former, Decoder-based check: the
// before of the byte-slice check, measured in the same run.
func BenchmarkCheckReferenceParseFile5MB(b *testing.B) {
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, nil)))
	if err != nil {
		b.Fatal(err)
	}
	answer := parseFileAnswer(5 << 20)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := refCheckAnswer(j, bytes.NewReader(answer)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBuildFile5MB checks a build-file answer carrying a file of
// some 3.75 MB, base64 in data.content.
func BenchmarkCheckBuildFile5MB(b *testing.B) {
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(BuildFile, nil)))
	if err != nil {
		b.Fatal(err)
	}
	file := bytes.Repeat([]byte("key.1 = Open the settings of item 1\n"), (5<<20)*3/4/36)
	answer, _ := json.Marshal(map[string]any{"data": map[string]any{"content": file}})
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := j.CheckAnswerBytes(answer); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckBuildFileEscapedContentNoCopy checks a 5 MB build-file answer
// whose base64 content has its slashes escaped (\/), as some encoders
// write them: the content is decoded as it is checked, never whole.
func TestCheckBuildFileEscapedContentNoCopy(t *testing.T) {
	j := diffJobs(t)[1]
	file := bytes.Repeat([]byte{0xff, 0xfe, 0xfd}, (5<<20)*3/4/3) // "///+/f" in base64
	content, _ := json.Marshal(file)
	content = bytes.ReplaceAll(content, []byte("/"), []byte(`\/`))
	body := append(append([]byte(`{"data":{"content":`), content...), "}}"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := j.CheckAnswerBytes(body)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("checking a %d-byte answer allocated %d bytes", len(body), n)
	}
	broken := bytes.Replace(body, []byte(`\/`), []byte(`!`), 1)
	if _, err := j.CheckAnswerBytes(broken); err == nil || !strings.Contains(err.Error(), "data.content is not base64") {
		t.Errorf("content with a ! passed: %v", err)
	}
}
