package contract

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

// spilled is what one spill wrote: the answer and the payloads put stored.
type spilled struct {
	out      []byte
	payloads []string // kind, then the payload's bytes
	err      error
}

func spillWith(spill func(put Put, out io.Writer) error) spilled {
	var s spilled
	put := func(kind string, write func(io.Writer) error) (string, error) {
		var b bytes.Buffer
		err := write(&b)
		s.payloads = append(s.payloads, kind+" "+b.String())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("https://gw.example/s/%d%s?expires=1&sig=<ab>", len(s.payloads), kind), nil
	}
	var out bytes.Buffer
	s.err = spill(put, &out)
	s.out = out.Bytes()
	return s
}

// sameSpill fails t unless SpillAnswerBytes spills body as the reference
// (the former SpillAnswer on encoding/json's Decoder) does: the same
// answer and payloads, or an error from both.
func sameSpill(t *testing.T, body []byte) {
	t.Helper()
	want := spillWith(func(put Put, out io.Writer) error { return refSpillAnswer(bytes.NewReader(body), out, put) })
	got := spillWith(func(put Put, out io.Writer) error { return SpillAnswerBytes(body, out, put) })
	if (got.err == nil) != (want.err == nil) {
		t.Fatalf("answer %.300q:\n got error %v\nwant error %v", body, got.err, want.err)
	}
	if want.err != nil {
		return
	}
	if !bytes.Equal(got.out, want.out) {
		t.Fatalf("answer %.300q:\n got %.300q\nwant %.300q", body, got.out, want.out)
	}
	if len(got.payloads) != len(want.payloads) {
		t.Fatalf("answer %.300q: %d payloads, want %d", body, len(got.payloads), len(want.payloads))
	}
	for i := range got.payloads {
		if got.payloads[i] != want.payloads[i] {
			t.Fatalf("answer %.300q: payload %d\n got %.300q\nwant %.300q", body, i, got.payloads[i], want.payloads[i])
		}
	}
}

// spillSeeds are answers that reach each turn of the spill: white space
// where it may be, escapes and invalid UTF-8 in keys and strings, every
// kind of value, base64 with new lines, padding and errors, broken JSON.
var spillSeeds = []string{
	`{"data":{"strings":[{"identifier":"a","text":"A"}],"content":"YQ==","preview":"PGh0bWw+"}}`,
	`{"error":{"message":"x"}}`,
	`{"data":{"strings":{}}}`,
	` { "meta" : [1, 2 ,{"a" : null}] , "data" : { "strings" : [ { "identifier" : "a b" , "text" : "x\" y" , "n" : [ 1 , -2.5e3 ] } , "s" , 1 , true , null , [ ] , { } ] , "other" : { "k" : "v" } } } ` + "\n\t",
	"{\"data\":{\"strings\":[\t{\r\n\"t\"\t:\r[1,\n2]\t}\n,\r\"a b\"]\r}}",
	`{"data":{"strings":[{"t":"a\\"},{"t":"a\\\" \\\\"},{"t":"\u00e9 \ud83d\ude00 \u2028 <&>"}]}}`,
	"{\"data\":{\"strings\":[{\"t\":\"\xff\xfe bad \xc3\"}],\"content\":\"\"}}",
	"{\"d\\u0061ta\":{\"str\\u0069ngs\":[1],\"<&>\":2,\"\xffkey\":3,\"\\n\":4,\"\\u2028\":5}}",
	`{"data":{"content":null,"preview":null}}`,
	`{"data":{"content":1}}`,
	`{"data":{"content":{}}}`,
	`{"data":{"content":"YWJj\nZGVm"}}`,
	`{"data":{"content":"YW\u004aj"}}`,
	`{"data":{"content":"YQ==YQ=="}}`,
	`{"data":{"content":"YQ"}}`,
	`{"data":{"content":"Y==="}}`,
	`{"data":{"content":"YR=="}}`,
	`{"data":{"content":"YWJj\r\n"}}`,
	`{"data":{"content":"????"}}`,
	`{"data":{"content":"YWJ\u00e9"}}`,
	`{"data":{"strings":[],"strings":[{"a":1}],"content":"YQ==","content":"Yg=="},"data":{}}`,
	`{"":0,"a":1,"":2,"data":{"":[1, 2],"b":3,"":"x","strings":[],"":null},"":{}}`,
	`{"":0}`,
	`{"data":{"":[}}`,
	`{"data":1}`,
	`{"data":[]}`,
	`{"data":null}`,
	`{"data":{}} x`,
	`{"data":{}}{}`,
	`{"data":{"strings":[1,]}}`,
	`{"data":{"strings":[1 2]}}`,
	`{"data":{"strings":[{"a":1,}]}}`,
	`{"data":{"a":1,}}`,
	`{"data":{"a" 1}}`,
	`{,}`,
	`[]`,
	``,
	`   `,
	`"data"`,
	`{"data":{"strings":[01]}}`,
	`{"data":{"strings":[1.]}}`,
	`{"data":{"strings":["\x"]}}`,
	"{\"data\":{\"strings\":[\"\t\"]}}",
	`{"data":{"content":"YQ==`,
	`{"data":{"strings":[{"a":"b"`,
	`{"a":nul}`,
	`{"a":tru,"data":{}}`,
	`{"a":-}`,
	`{"a":1e}`,
}

func FuzzSpillAnswerMatchesReference(f *testing.F) {
	for _, s := range spillSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameSpill(t, body)
	})
}

// TestSpillAnswerLarge compares the spills of answers too large for seeds
// of the fuzz target: nesting at encoding/json's limit, and larger than
// the buffers: records and strings over 32 KB, thousands of records, and
// contents of megabytes, plain, with new lines, and with padding inside at
// the edges of what the stream decoder reads.
func TestSpillAnswerLarge(t *testing.T) {
	file := make([]byte, 3<<20+2)
	for i := range file {
		file[i] = byte(i * 7 / 5)
	}
	b64 := base64.StdEncoding.EncodeToString(file)
	var lined strings.Builder
	for s := b64; len(s) > 0; s = s[min(len(s), 76):] {
		lined.WriteString(s[:min(len(s), 76)] + `\r\n`)
	}
	var recs strings.Builder
	for i := range 5000 {
		if i > 0 {
			recs.WriteString(" ,\n")
		}
		fmt.Fprintf(&recs, `{ "identifier" : "key.%d" , "text" : "Відкрити \"налаштування\" %s" }`, i, strings.Repeat("x", i%97))
	}
	big := strings.Repeat("y", 100<<10)
	answers := []string{
		// nested as deep as encoding/json follows, and deeper
		`{"data":{"strings":[` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `]}}`,
		`{"data":{"strings":[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]}}`,
		`{"meta":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"data":{"x":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat("}", 10000) + `}}`,
		`{"meta":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"data":{"strings":[` + recs.String() + `],"content":"` + b64 + `"}}`,
		`{"data":{"strings":[{"t":"` + big + `", "u" : "` + big + `"},"` + big + `"],"preview":"` + lined.String() + `"}}`,
		`{"meta":"` + big + `","data":{"content":"` + b64[:(len(b64)-8)/4*4] + `"}}`,
	}
	// padding within: at every 4 bytes around the 1024 bytes the stream
	// decoder reads at a time
	for _, at := range []int{1020, 1024, 1028, 2048, 4096, 43688} {
		answers = append(answers, `{"data":{"content":"`+b64[:at-4]+`YQ==`+b64[at:at+4096]+`"}}`)
	}
	for _, a := range answers {
		sameSpill(t, []byte(a))
	}
}

// TestSpillAnswerReaders spills the same answer from each kind of reader
// SpillAnswer reads: bytes in place, a file mapped, any other stream.
func TestSpillAnswerReaders(t *testing.T) {
	answer := []byte(spillSeeds[3])
	want := spillWith(func(put Put, out io.Writer) error { return SpillAnswerBytes(answer, out, put) })
	if want.err != nil {
		t.Fatal(want.err)
	}
	f, err := os.CreateTemp(t.TempDir(), "answer-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(answer); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]io.Reader{
		"bytes":  bytes.NewReader(answer),
		"file":   f,
		"stream": iotest.OneByteReader(bytes.NewReader(answer)),
	} {
		got := spillWith(func(put Put, out io.Writer) error { return SpillAnswer(r, out, put) })
		if got.err != nil || !bytes.Equal(got.out, want.out) || strings.Join(got.payloads, "|") != strings.Join(want.payloads, "|") {
			t.Errorf("%s: %q %q %v, want %q %q", name, got.out, got.payloads, got.err, want.out, want.payloads)
		}
	}
}
