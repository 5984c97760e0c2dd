package contract

import (
	"bytes"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// parseJobSeeds are jobs that differ from a valid one where the two ways of
// reading a job could part: key case, null, repeated keys, escapes, depth,
// broken JSON in each member.
func parseJobSeeds() [][]byte {
	valid := string(job(BuildFile, nil))
	seeds := [][]byte{job(ParseFile, nil), job(BuildFile, nil), job(PreExport, nil), []byte(valid)}
	for _, edit := range []struct{ old, new string }{
		{`"content":"YSA9IGI="`, `"Content":"YSA9IGI="`},
		{`"content":"YSA9IGI="`, `"CONTENTURL":"https://x.example/a"`},
		{`"content":"YSA9IGI="`, `"content":null`},
		{`"content":"YSA9IGI="`, `"content":"a","content":null`},
		{`"content":"YSA9IGI="`, `"content":null,"contentUrl":"u","contentUrl":null`},
		{`"content":"YSA9IGI="`, `"content":"a","content":1`},
		{`"content":"YSA9IGI="`, `"\u0063ontent":"a\/b\u00e9"`},
		{`"content":"YSA9IGI="`, `"content":"a\x"`},
		{`"content":"YSA9IGI="`, `"contentUrl":"\ud800"`},
		{`"content":"YSA9IGI="`, `"content":[[[[1]]]]`},
		{`"file":{`, `"file":null,"file2":{`},
		{`"file":{`, `"file":{"content":"x"},"file":{`},
		{`"jobType":"build-file"`, `"jobType":null`},
		{`"jobType":"build-file"`, `"jobType":"parse-file","jobType":null`},
		{`"jobType":"build-file"`, `"job\u0054ype":"build-file"`},
		{`"jobType":"build-file"`, `"JobType":"build-file"`},
		{`"organization":{`, `"organization":[],"x":{`},
		{`"organization":{`, `"organization":{"a":[1,}],"x":{`},
		{`"strings":[`, `"strings":[1 ,`},
		{`"strings":[`, `"strings":[{} {},`},
		{`"strings":[`, `"strings":{"a":[`},
		{`"strings":[`, `"strings":[null,{"uniqId":5},`},
		{`"strings":[`, `"strings":[{"UNIQID":"h1::9"},`},
		{`"strings":[`, `"x":[],"strings":[],"strings":[`},
		{`"sourceLanguage":{`, `"sourceLanguage":{"pluralCategoryNames":"one"},"y":{`},
		{`"targetLanguages":[`, `"targetLanguages":[{"id":""}],"z":[`},
		{`"stringsUrl"`, `"stringsUrl"`},
		{`}`, `}}`},
	} {
		if strings.Contains(valid, edit.old) {
			seeds = append(seeds, []byte(strings.Replace(valid, edit.old, edit.new, 1)))
		}
		pf := string(job(ParseFile, nil))
		if strings.Contains(pf, edit.old) {
			seeds = append(seeds, []byte(strings.Replace(pf, edit.old, edit.new, 1)))
		}
	}
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deeper := "[" + deep + "]"
	for _, v := range []string{deep, deeper} {
		seeds = append(seeds,
			[]byte(strings.Replace(valid, `"strings":[`, `"strings":[`+v+`,`, 1)),
			[]byte(strings.Replace(valid, `"strings":[`, `"x":`+v+`,"strings":[`, 1)),
			[]byte(strings.Replace(valid, `"file":{`, `"file":{"y":`+v[1:]+`,`, 1)))
	}
	return append(seeds, []byte(""), []byte(" {} "), []byte("{"), []byte(`{"a":1 "b":2}`), []byte("{]"), []byte("\xef\xbb\xbf{}"), []byte(`{"file":{}}x`))
}

// ParseJobBytes answers every job as ParseJob does.
func TestParseJobBytesMatchesParseJob(t *testing.T) {
	for i, body := range parseJobSeeds() {
		for _, module := range []string{CustomFileFormat, FilePreExport} {
			sameJob(t, i, module, body)
		}
	}
}

func FuzzParseJobBytesMatchesParseJob(f *testing.F) {
	for _, body := range parseJobSeeds() {
		f.Add(body, false)
	}
	f.Fuzz(func(t *testing.T, body []byte, preExport bool) {
		module := CustomFileFormat
		if preExport {
			module = FilePreExport
		}
		sameJob(t, 0, module, body)
	})
}

func sameJob(t *testing.T, i int, module string, body []byte) {
	t.Helper()
	want, wantErr := ParseJob(module, bytes.NewReader(body))
	got, err := ParseJobBytes(module, body)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("seed %d, %s: ParseJobBytes error %v, ParseJob %v\n%.300q", i, module, err, wantErr, body)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("seed %d, %s: ParseJobBytes %+v, ParseJob %+v\n%.300q", i, module, got, want, body)
	}
}

// A 5 MB parse-file job is read in place: its content is not copied.
func TestParseJobBytesCopiesNoContent(t *testing.T) {
	body := job(ParseFile, func(m map[string]any) {
		m["file"] = map[string]any{"id": 3, "name": "a.txt", "content": strings.Repeat("QUJD", 5<<20/4)}
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	j, err := ParseJobBytes(CustomFileFormat, body)
	runtime.ReadMemStats(&after)
	if err != nil || !j.HasContent {
		t.Fatalf("%+v, %v", j, err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<10 {
		t.Errorf("reading a 5 MB parse-file job allocated %d bytes", grown)
	}
}
