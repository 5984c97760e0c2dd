package contract

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/jsonscan"
)

// The differential checks of the contract's own readers against
// encoding/json (and encoding/base64) on the same bytes: valid or not, the
// same verdict, and for valid input the same fields read. The answers
// themselves are held to the Decoder-based reference by
// FuzzCheckAnswerMatchesReference.

// refRecord is what json.Unmarshal reads of a string record.
type refUniqRecord struct {
	UniqID string `json:"uniqId"`
}

// scanSeeds are records and lines that touch every branch of the readers:
// keys folded and escaped, uniqIds of each type, null, depth, bad JSON.
var scanSeeds = []string{
	`{"uniqId":"h::1","text":"A"}`,
	`{"uniqId":"a","UNIQID":"b","uniqid":null}`,
	`{"uniqId":"a","uniqId":5}`,
	`{"uniqId":5,"uniqId":"b"}`,
	`{"uniq\u0049d":"x"}`,
	"{\"uniqI\u212a\":\"k\"}",
	`{"uniqId":"\ud83d\ude00 \u00e9 \/ \\"}`,
	"{\"uniqId\":\"\xff\xfe\"}",
	`{"uniqId":["a"]}`,
	`{"uniqId":{"x":1}}`,
	`{"a":[1,2,{"b":null}],"uniqId":"z"}`,
	`null`,
	`[1]`,
	`"s"`,
	`{"uniqId":"a",}`,
	`{"uniqId":"a"} x`,
	`{"uniqId":tru}`,
	`{"a":1e5,"b":-0.5E-3,"c":01}`,
	`{"a":"` + "\x01" + `"}`,
	`{}`,
	``,
}

// FuzzRecordReaderMatchesUnmarshal reads a string record with
// recordReader and with json.Valid and json.Unmarshal: the same verdict on
// the JSON, the same type error, the same uniqId.
func FuzzRecordReaderMatchesUnmarshal(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var s jsonscan.Scanner
		s.MaxDepth = jsonscan.EncodingJSONMaxDepth
		s.Reset(in)
		var rr recordReader
		id, typeErr, err := rr.read(&s)
		if err == nil {
			err = s.Finish()
		}
		if valid := json.Valid(in); (err == nil) != valid {
			t.Fatalf("record %q: scanner says %v, json.Valid %v", in, err, valid)
		}
		if err != nil {
			return
		}
		var rec refUniqRecord
		uerr := json.Unmarshal(in, &rec)
		if typeErr != (uerr != nil) {
			t.Fatalf("record %q: type error %v, json.Unmarshal says %v", in, typeErr, uerr)
		}
		if string(id) != rec.UniqID {
			t.Fatalf("record %q: uniqId %q, json.Unmarshal reads %q", in, id, rec.UniqID)
		}
	})
}

// refStringsArray is StringsArray as it was, on json.Valid and
// json.Unmarshal.
func refStringsArray(ndjson []byte) ([]byte, []string, error) {
	sc := bufio.NewScanner(bytes.NewReader(ndjson))
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecord)
	var arr bytes.Buffer
	arr.WriteByte('[')
	var ids []string
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' || !json.Valid(line) {
			return nil, nil, io.ErrUnexpectedEOF
		}
		if len(ids) > 0 {
			arr.WriteByte(',')
		}
		arr.Write(line)
		var rec refUniqRecord
		_ = json.Unmarshal(line, &rec)
		ids = append(ids, rec.UniqID)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	arr.WriteByte(']')
	return arr.Bytes(), ids, nil
}

// FuzzStringsArrayMatchesEncodingJSON turns new-line delimited strings
// into the inline array with StringsArray and with json.Valid and
// json.Unmarshal: the same verdict, array and uniqIds.
func FuzzStringsArrayMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(`{"uniqId":"a"}` + "\n\n  " + `{"UniqId":"b","x":[1]}` + "\r\n" + `{"uniqId":null}`))
	f.Add([]byte("{\"a\":1}\n[1]\n"))
	f.Add([]byte("\v{\"uniqId\":\"c\"}\u00a0\n{}"))
	for _, s := range scanSeeds {
		f.Add([]byte(s + "\n" + s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		arr, ids, err := StringsArray(in, true)
		wantArr, wantIDs, wantErr := refStringsArray(in)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("strings %q: error %v, encoding/json %v", in, err, wantErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(arr, wantArr) || !slices.Equal(ids, wantIDs) {
			t.Fatalf("strings %q: %s %q, encoding/json %s %q", in, arr, ids, wantArr, wantIDs)
		}
	})
}

// FuzzPlainBase64MatchesDecoder decides base64 contents with plainBase64
// and with encoding/base64's stream decoder, which the check used alone:
// where plainBase64 decides, the same verdict.
func FuzzPlainBase64MatchesDecoder(f *testing.F) {
	for _, s := range []string{"YWJj", "YWI=", "YQ==", "YQ=", "Y===", "====", "YWJjZA==YWJj", "YW Jj", "YWJ\\", "////", "+/+/", "YWJjZGVm\\/", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk=", "YWJ-", "YWJj\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		valid, decided := plainBase64(raw)
		if !decided {
			return
		}
		_, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, bytes.NewReader(raw)))
		if valid != (err == nil) {
			t.Fatalf("content %q: plainBase64 says %v, the decoder %v", raw, valid, err)
		}
	})
}

// TestCheckAnswerKeptLaterMatchesReference checks answers of many strings,
// whose identifiers and uniqIds are kept pendingMax at a time: a duplicate
// at one string and another breach, or broken JSON, at another, each in
// turn before, at and after it, across batches, with plain and escaped
// identifiers; the verdict is the reference's, naming the first breach.
func TestCheckAnswerKeptLaterMatchesReference(t *testing.T) {
	const n = 3*pendingMax + 5
	jobs := diffJobs(t)
	record := func(i, dup, bad int, escaped bool) string {
		id := fmt.Sprintf("k%d", i)
		uniq := fmt.Sprintf("h1::%d", i)
		if i == dup {
			id, uniq = "k3", "h1::3"
		}
		if escaped && i%3 == 0 {
			id = `\u006b` + id[1:]
		}
		text := `"x"`
		if i == bad {
			text = `5`
		}
		return fmt.Sprintf(`{"identifier":"%s","uniqId":"%s","text":%s}`, id, uniq, text)
	}
	for _, escaped := range []bool{false, true} {
		for _, dup := range []int{0, 4, pendingMax - 1, pendingMax, pendingMax + 1, 2*pendingMax + 3} {
			for _, bad := range []int{0, 2, dup - 1, dup, dup + 1, pendingMax + 2, n - 1, -1} {
				var b strings.Builder
				b.WriteString(`{"data":{"strings":[`)
				for i := range n {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(record(i, dup, bad, escaped))
				}
				b.WriteString(`]}}`)
				body := b.String()
				for _, j := range jobs {
					sameVerdict(t, j, []byte(body))
					if bad == -1 {
						// broken JSON after the strings, and within them
						sameVerdict(t, j, []byte(body[:len(body)-1]+"x"))
						sameVerdict(t, j, []byte(strings.Replace(body, `"text":"x"}`, `"text":"x"`, n-2)))
					}
				}
			}
		}
	}
}
