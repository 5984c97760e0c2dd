package contract

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/servicegate/servicegate/jsonscan"
)

// fastRecordSeeds are string records in the shape apps write and in
// every shape readRecordFast hands to the general walk: space, keys
// folded or escaped, values of other types, null, members given twice.
var fastRecordSeeds = []string{
	`{"identifier":"key.1","context":"menu","customData":"{\"line\":1}","labels":["ui"],"text":"Open item 1","translations":{"uk":{"text":"Відкрити 1","status":"translated"}}}`,
	`{"identifier":"key.0","context":"menu","hasPlurals":true,"text":{"one":"%d file","other":"%d files"},"translations":{"uk":{"text":{"one":"файл","few":"файли","many":"файлів","other":"файлу"},"status":{"one":"approved","few":"translated","many":"translated","other":"untranslated"}}}}`,
	`{"uniqId":"h1::1","identifier":"a","isHidden":false,"maxLength":40,"previewId":3,"labels":[],"text":"A","translations":{}}`,
	` { "identifier" : "a" , "text" : "A" , "translations" : { "uk" : { "text" : "Б" , "status" : "approved" } } } `,
	"{\n\t\"identifier\":\"a\",\r\n\"text\":\"A\"}",
	`{"Identifier":"a","TEXT":"A","Translations":{"uk":{"Text":"b","STATUS":"approved"}}}`,
	`{"identifier":"a","identifier":"b","text":"A","text":{"one":"x"},"translations":{"uk":{"text":"x"}},"translations":{"de":{"text":"y"}}}`,
	`{"identifier":"a\u0041","text":"A","translations":{"uk":null,"de":{"text":"x"},"uk":{"text":"y"}}}`,
	`{"identifier":"\xff","text":"A"}`,
	`{"identifier":"é","text":"A"}`,
	`{"identifier":null,"uniqId":null,"text":null,"translations":null,"labels":null,"hasPlurals":null,"isHidden":null}`,
	`{"identifier":1,"text":2,"labels":["a",1],"hasPlurals":"yes","isHidden":"no","translations":[]}`,
	`{"ident\u0069fier":"a","text":"A","translations":{"u\u006b":{"text":"b"}}}`,
	`{"identifierx":"a","texts":"A","context2":{"a":[1,2,{"b":null}]},"labels":["a","b"],"customData":"x"}`,
	`{"identifier":"a","text":"A","translations":{"uk":{"text":"b","status":"approved","comment":[1]}}}`,
	`{"identifier":"a","hasPlurals":truex}`,
	`{"identifier":"a","hasPlurals":false,"isHidden":true}`,
	`{"identifier":"a","text":"A",}`,
	`{"identifier":"a","labels":["a",],"text":"A"}`,
	`{"identifier":"a" "text":"A"}`,
	`{"identifier":"a","text":"A\q"}`,
	`{"identifier":"a","translations":{"uk":{"text":"b"}`,
	`{}`,
	`{"identifier":"a","text":"A","translations":{"uk":{}}}`,
}

// fastRecordChecker is a checker of a parse-file job, ready to read the
// string record rec.
func fastRecordChecker(tb testing.TB, rec []byte) *checker {
	j := ratioJobTB(tb)
	c := &checker{job: j, answer: rec}
	c.s.MaxDepth = jsonscan.EncodingJSONMaxDepth
	c.startStrings()
	c.s.Reset(rec)
	c.rec.reset()
	return c
}

func ratioJobTB(tb testing.TB) *Job {
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, func(m map[string]any) {
		m["targetLanguages"] = []any{
			map[string]any{"id": "uk", "name": "Ukrainian", "pluralCategoryNames": []string{"one", "few", "many", "other"}},
			map[string]any{"id": "de", "name": "German", "pluralCategoryNames": []string{"one", "other"}},
		}
	})))
	if err != nil {
		tb.Fatal(err)
	}
	return j
}

// recordOf is what the checker read of a record, comparable: identV and
// uniqV only when they are slices of the answer, the translations by
// language.
func recordOf(c *checker) string {
	r := c.rec
	if !r.identOK {
		r.identV = nil
	}
	if !r.uniqOK {
		r.uniqV = nil
	}
	// the languages' indices follow the job's map: compared by name
	var order []string
	trs := map[string]trans{}
	for _, i := range r.order {
		if i < 0 {
			order = append(order, "?"+r.unknownLang)
			trs["?"+r.unknownLang] = r.other
		} else {
			order = append(order, c.names[i])
			trs[c.names[i]] = r.trs[i]
		}
	}
	r.trs, r.other, r.order = nil, trans{}, nil
	return fmt.Sprintf("%+v\n%+v\n%q", r, trs, order)
}

// sameRecord reads rec with readRecordFast and, when it takes the record,
// with the general walk, and fails t unless both read the same record to
// the same offset.
func sameRecord(t *testing.T, rec []byte) {
	fast := fastRecordChecker(t, rec)
	if fast.s.Peek() != '{' {
		return
	}
	if !fast.readRecordFast() {
		return
	}
	general := fastRecordChecker(t, rec)
	general.s.Peek()
	if err := general.s.Object(general.recordMember); err != nil {
		t.Fatalf("readRecordFast took %q, the general walk says %v", rec, err)
	}
	if fast.s.Pos() != general.s.Pos() {
		t.Fatalf("%q: readRecordFast ends at %d, the general walk at %d", rec, fast.s.Pos(), general.s.Pos())
	}
	if f, g := recordOf(fast), recordOf(general); f != g {
		t.Fatalf("%q:\nreadRecordFast: %s\ngeneral walk:   %s", rec, f, g)
	}
}

func TestReadRecordFastTakesTheUsualShape(t *testing.T) {
	for _, rec := range fastRecordSeeds[:7] {
		c := fastRecordChecker(t, []byte(rec))
		c.s.Peek()
		if !c.readRecordFast() {
			t.Errorf("readRecordFast hands %s to the general walk", rec)
		}
	}
}

// FuzzRecordFastMatchesGeneral feeds the same record to readRecordFast
// and to the general walk of recordMember: a record the first takes is
// read alike by both.
func FuzzRecordFastMatchesGeneral(f *testing.F) {
	for _, rec := range fastRecordSeeds {
		f.Add([]byte(rec))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		sameRecord(t, rec)
	})
}
