package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{`{}`, nil},
		{` {"a" : [1, -2.5e+3, 0, true, false, null, "x\u00e9\n"] } `, nil},
		{`"plain"`, nil},
		{"\"invalid \xff UTF-8 is JSON, as for encoding/json\"", nil},
		{`-0.0E-0`, nil},
		{``, ErrSyntax},
		{`   `, ErrSyntax},
		{`{`, ErrSyntax},
		{`{"a"}`, ErrSyntax},
		{`{"a":1,}`, ErrSyntax},
		{`[1,]`, ErrSyntax},
		{`[1 2]`, ErrSyntax},
		{`01`, ErrSyntax},
		{`1.`, ErrSyntax},
		{`.5`, ErrSyntax},
		{`1e`, ErrSyntax},
		{`-`, ErrSyntax},
		{`tru`, ErrSyntax},
		{`nul`, ErrSyntax},
		{`"\x"`, ErrSyntax},
		{`"\u12"`, ErrSyntax},
		{`"\u12g4"`, ErrSyntax},
		{"\"tab\tinside\"", ErrSyntax},
		{`"unterminated`, ErrSyntax},
		{`{} {}`, ErrSyntax},
		{`{'a':1}`, ErrSyntax},
		{strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth), nil},
		{strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), ErrTooDeep},
		{strings.Repeat(`{"a":`, DefaultMaxDepth+1) + "1" + strings.Repeat("}", DefaultMaxDepth+1), ErrTooDeep},
	}
	for _, tt := range tests {
		if err := Valid([]byte(tt.in), 0); err != tt.want {
			t.Errorf("Valid(%.40q) = %v, want %v", tt.in, err, tt.want)
		}
		if tt.want != ErrTooDeep && (tt.want == nil) != json.Valid([]byte(tt.in)) {
			t.Errorf("encoding/json disagrees on %.40q", tt.in)
		}
	}
}

func TestDepthAsEncodingJSON(t *testing.T) {
	for _, n := range []int{EncodingJSONMaxDepth, EncodingJSONMaxDepth + 1} {
		doc := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		var v any
		jsonErr := json.Unmarshal(doc, &v)
		err := Valid(doc, EncodingJSONMaxDepth)
		if (err == nil) != (jsonErr == nil) {
			t.Fatalf("depth %d: Valid = %v, encoding/json = %v", n, err, jsonErr)
		}
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Fatalf("depth %d: %v, want ErrTooDeep", n, err)
		}
	}
}

// TestSetDepthAsDecoder reads an array of values each nested as deep as
// MaxDepth allows, counting each from 0 as encoding/json's Decoder counts
// the values it decodes one at a time; one level more is refused.
func TestSetDepthAsDecoder(t *testing.T) {
	const max = 50
	for _, n := range []int{max, max + 1} {
		value := strings.Repeat("[", n) + strings.Repeat("]", n)
		doc := []byte(`{"a":[` + value + `,` + value + `]}`)
		s := Scanner{MaxDepth: max}
		s.Reset(doc)
		err := s.Object(func(key []byte) error {
			return s.Array(func() error {
				if s.Depth() != 2 {
					t.Fatalf("Depth = %d inside an array in an object, want 2", s.Depth())
				}
				d := s.Depth()
				s.SetDepth(0)
				err := s.Skip()
				s.SetDepth(d)
				return err
			})
		})
		if err == nil {
			err = s.Finish()
		}
		if (err == nil) != (n <= max) {
			t.Errorf("values %d deep with MaxDepth %d: %v", n, max, err)
		}
		if err != nil && !errors.Is(err, ErrTooDeep) {
			t.Errorf("values %d deep: %v, want ErrTooDeep", n, err)
		}
	}
	var s Scanner
	s.Reset([]byte(`[[` + strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth) + `]]`))
	err := s.Array(func() error { return s.Skip() })
	if !errors.Is(err, ErrTooDeep) {
		t.Errorf("without SetDepth, outer levels count: %v, want ErrTooDeep", err)
	}
}

func TestStringDecodesAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u0041"`, `"\ud83d\ude00"`,
		`"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, "\"a\xffb\xc3\"", "\"\xed\xa0\x80\"", `""`,
	} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		var s Scanner
		s.Reset([]byte(in))
		got, err := s.String()
		if err != nil || string(got) != want {
			t.Errorf("String(%s) = %q, %v; want %q", in, got, err, want)
		}
		if s.Finish() != nil {
			t.Errorf("String(%s) did not read to the end", in)
		}
	}
}

func TestObjectAndArray(t *testing.T) {
	var s Scanner
	s.Reset([]byte(`{"a":[1,{"b":"c"}],"\u0064":"e","n":null}`))
	var keys []string
	var elements int
	err := s.Object(func(key []byte) error {
		keys = append(keys, string(key))
		if string(key) == "a" {
			return s.Array(func() error { elements++; return s.Skip() })
		}
		v, err := s.Value()
		if string(key) == "d" && string(v) != `"e"` {
			t.Errorf("value of d = %s", v)
		}
		return err
	})
	if err != nil || s.Finish() != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "a,d,n" || elements != 2 {
		t.Fatalf("keys %v, %d elements", keys, elements)
	}

	// A member function's error ends the walk and is returned.
	stop := errors.New("stop")
	s.Reset([]byte(`{"a":1,"b":2}`))
	if err := s.Object(func([]byte) error { return stop }); err != stop {
		t.Fatalf("got %v, want the member's error", err)
	}
	// A member that does not read its value breaks the syntax.
	s.Reset([]byte(`{"a":1}`))
	if err := s.Object(func([]byte) error { return nil }); err != ErrSyntax {
		t.Fatalf("got %v, want ErrSyntax", err)
	}
	for _, in := range []string{`[]`, `"x"`, ``, `{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`} {
		s.Reset([]byte(in))
		if err := s.Object(func([]byte) error { return s.Skip() }); err == nil {
			t.Errorf("Object(%q) passed", in)
		}
	}
	// Object and Array count towards MaxDepth like nested values.
	s = Scanner{MaxDepth: 2}
	s.Reset([]byte(`{"a":[[1]]}`))
	err = s.Object(func([]byte) error { return s.Array(func() error { return s.Skip() }) })
	if err != ErrTooDeep {
		t.Fatalf("got %v, want ErrTooDeep", err)
	}
}

func TestIsInteger(t *testing.T) {
	for in, want := range map[string]bool{`0`: true, `-12`: true, `120`: true, `1.0`: false, `1e3`: false,
		`01`: false, `"1"`: false, `null`: false, ``: false, `-`: false, `1 `: false} {
		if IsInteger([]byte(in)) != want {
			t.Errorf("IsInteger(%q) = %v", in, !want)
		}
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	doc := []byte(`{"events":[{"event":"project.translated","project":{"id":"42","n":[1,2.5,true,null]}}],"x":"caf\u00e9"}`)
	var s Scanner
	s.Reset(doc)
	_ = Valid(doc, 0) // warm the decoding buffer
	allocs := testing.AllocsPerRun(100, func() {
		s.Reset(doc)
		_ = s.Object(func(key []byte) error {
			if string(key) == "x" {
				_, err := s.String()
				return err
			}
			return s.Skip()
		})
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per document, want 0", allocs)
	}
}

// FuzzValid is the differential test: the scanner and encoding/json agree
// on which documents are JSON (below the depth limits), and on the keys
// and strings of an object.
func FuzzValid(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":[1,-2.5e+3,true,false,null,"x"]}`, `"\ud83d\ude00"`, "\"\xff\"", `{"a":1,}`,
		`{"\u0065vents":[{"event":"x"}],"EVENTS":1}`, `01`, `1e+`, `[[[[[[[[[]]]]]]]]]`, `{"a" : "b" , "c":{"d":[]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := Valid(doc, EncodingJSONMaxDepth)
		if (err == nil) != json.Valid(doc) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, err, json.Valid(doc))
		}
		if err != nil || bytes.TrimSpace(doc)[0] != '{' {
			return
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(doc, &want) != nil {
			return
		}
		var s Scanner
		s.MaxDepth = EncodingJSONMaxDepth
		s.Reset(doc)
		got := map[string]json.RawMessage{}
		err = s.Object(func(key []byte) error {
			k := string(key)
			if s.Peek() == '"' {
				str, err := s.String()
				var wantStr string
				if json.Unmarshal(want[k], &wantStr) == nil && wantStr != string(str) {
					// the last of repeated keys is in want
					got[k] = nil
				}
				got[k] = want[k]
				return err
			}
			v, err := s.Value()
			got[k] = v
			return err
		})
		if err != nil {
			t.Fatalf("Object(%q) = %v", doc, err)
		}
		if len(got) != len(want) {
			t.Fatalf("keys of %q: %d, encoding/json %d", doc, len(got), len(want))
		}
		for k := range want {
			if _, ok := got[k]; !ok {
				t.Fatalf("key %q of %q missing", k, doc)
			}
		}
	})
}

// FuzzString checks decoded strings against encoding/json.
func FuzzString(f *testing.F) {
	for _, seed := range []string{`"a"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\xc3\"", `"\ud83d\u0041"`,
		// longer than a word: String reads plain ASCII eight bytes at a time
		`"YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo="`, `"YWJjZGVm\/2hpamts\/W5vcHFy"`, "\"abcdefgh\xc3\xa9ijklmnop\xffqrstuvwx\"",
		"\"abcdefg\x1fhijklmn\"", `"abcdefghijklmno\"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want string
		jsonErr := json.Unmarshal(doc, &want)
		var s Scanner
		s.Reset(doc)
		got, err := s.String()
		if err == nil {
			err = s.Finish()
		}
		if (err == nil) != (jsonErr == nil) {
			t.Fatalf("String(%q) = %v, encoding/json %v", doc, err, jsonErr)
		}
		if err == nil && string(got) != want {
			t.Fatalf("String(%q) = %q, encoding/json %q", doc, got, want)
		}
		if err == nil {
			checkStringReader(t, doc, want)
		}
	})
}

// checkStringReader reads the string doc with a StringReader, in reads of
// several sizes, and checks it decodes to want.
func checkStringReader(t *testing.T, doc []byte, want string) {
	t.Helper()
	var s Scanner
	s.Reset(doc)
	value, err := s.Value()
	if err != nil {
		t.Fatal(err)
	}
	var r StringReader
	for _, size := range []int{1, 3, 4096, 1 << 16} {
		r.Reset(value)
		var got []byte
		p := make([]byte, size)
		for {
			n, err := r.Read(p)
			got = append(got, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("StringReader(%q).Read = %d, %v", doc, n, err)
			}
		}
		if string(got) != want {
			t.Fatalf("StringReader(%q) in reads of %d: %q, want %q", doc, size, got, want)
		}
	}
}

// TestStringReaderAcrossBuffers decodes strings longer than the reader's
// buffer, with escapes and runes at every offset of its end.
func TestStringReaderAcrossBuffers(t *testing.T) {
	for _, piece := range []string{`\/`, `\u00e9`, `\ud83d\ude00`, "\xff", "é", "😀", `\n`} {
		for pad := 4080; pad < 4100; pad++ {
			doc := []byte(`"` + strings.Repeat("a", pad) + piece + strings.Repeat("b", 5000) + piece + `"`)
			var want string
			if err := json.Unmarshal(doc, &want); err != nil {
				t.Fatal(err)
			}
			checkStringReader(t, doc, want)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	var doc bytes.Buffer
	doc.WriteString(`{"data":{"strings":[`)
	for i := 0; doc.Len() < 1<<20; i++ {
		if i > 0 {
			doc.WriteByte(',')
		}
		doc.WriteString(`{"identifier":"key.number.`)
		doc.WriteString(strings.Repeat("x", i%17))
		doc.WriteString(`","text":"A sentence of moderate length that a person translates, with \"quotes\".","translations":{"uk":{"text":"Речення помірної довжини","status":"approved"}},"maxLength":120,"labels":["a","b"]}`)
	}
	doc.WriteString(`]}}`)
	b.SetBytes(int64(doc.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if err := Valid(doc.Bytes(), EncodingJSONMaxDepth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	var doc bytes.Buffer
	doc.WriteString(`[`)
	for i := 0; doc.Len() < 1<<20; i++ {
		if i > 0 {
			doc.WriteByte(',')
		}
		doc.WriteString(`{"identifier":"key.number.","text":"A sentence of moderate length that a person translates, with \"quotes\".","translations":{"uk":{"text":"Речення помірної довжини","status":"approved"}},"maxLength":120,"labels":["a","b"]}`)
	}
	doc.WriteString(`]`)
	b.SetBytes(int64(doc.Len()))
	for b.Loop() {
		json.Valid(doc.Bytes())
	}
}

// TestLongStringsEveryPosition puts each byte that ends plain content at
// every position of strings longer than a word, where the scanner reads
// eight bytes at a time, and checks them read and decoded.
func TestLongStringsEveryPosition(t *testing.T) {
	for n := 0; n < 40; n++ {
		for pos := 0; pos < n; pos++ {
			for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, 'a'} {
				b := bytes.Repeat([]byte{'x'}, n)
				b[pos] = c
				doc := append(append([]byte{'"'}, b...), '"')
				if got, want := Valid(doc, 0) == nil, json.Valid(doc); got != want {
					t.Fatalf("Valid(%q) = %v, encoding/json %v", doc, got, want)
				}
				var s Scanner
				s.Reset(doc)
				got, err := s.String()
				if err == nil {
					err = s.Finish()
				}
				var want string
				if jsonErr := json.Unmarshal(doc, &want); (err == nil) != (jsonErr == nil) || err == nil && string(got) != want {
					t.Fatalf("String(%q) = %q, %v; encoding/json %q, %v", doc, got, err, want, jsonErr)
				}
			}
		}
	}
}

// FuzzPlainKeyMatchesScanner reads the start of doc as a member's key with
// PlainKey and with a Scanner: a key PlainKey takes is the string the
// Scanner decodes, followed by a colon, and the value starts where the
// Scanner, past the colon and its space, would read it. StringEnd ends
// every string where Skip does.
func FuzzPlainKeyMatchesScanner(f *testing.F) {
	for _, seed := range []string{
		`"identifier":"a"`, `"a" : 1`, "\"a\"\t:\n 1", `"a\u0062":1`, `"é":1`, "\"\xff\":1",
		`"a"1`, `"a`, `"`, `"a":`, `"":""`, `"tab	":1`, `"a\"b":1`, `"translations"   :   {`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var s Scanner
		s.Reset(doc)
		want, err := s.String()
		colon := err == nil && s.Peek() == ':'
		if colon {
			s.pos++
			s.skipSpace()
		}
		key, next := PlainKey(doc, 0)
		if next >= 0 {
			if !colon || !bytes.Equal(key, want) || next != s.Pos() {
				t.Fatalf("PlainKey(%q) = %q, %d; the Scanner reads %q, %v, colon %v, value at %d", doc, key, next, want, err, colon, s.Pos())
			}
			for _, c := range key {
				if c < ' ' || c >= 0x80 || c == '\\' || c == '"' {
					t.Fatalf("PlainKey(%q) took a key that is not plain: %q", doc, key)
				}
			}
		} else if colon && isPrintableASCII(want) && bytes.IndexByte(want, '\\') < 0 && len(doc) > len(want)+1 && bytes.Equal(doc[1:1+len(want)], want) && doc[1+len(want)] == '"' {
			t.Fatalf("PlainKey(%q) refused the plain key %q", doc, want)
		}
		s.Reset(doc)
		skipErr := s.Skip()
		end := -1
		if len(doc) > 0 && doc[0] == '"' {
			end = StringEnd(doc, 0)
		}
		if len(doc) > 0 && doc[0] == '"' && (skipErr == nil) != (end >= 0) || end >= 0 && end != s.Pos() {
			t.Fatalf("StringEnd(%q) = %d; Skip says %v at %d", doc, end, skipErr, s.Pos())
		}
	})
}

func isPrintableASCII(b []byte) bool {
	for _, c := range b {
		if c < ' ' || c >= 0x80 {
			return false
		}
	}
	return true
}

func TestSetPos(t *testing.T) {
	var s Scanner
	doc := []byte(`{"a":"x","b":[1]}`)
	s.Reset(doc)
	s.SetPos(StringEnd(doc, 5)) // after "x"
	if s.Peek() != ',' {
		t.Fatalf("after SetPos the next byte is %q", s.Peek())
	}
	for _, pos := range []int{-5, len(doc) + 5} {
		s.SetPos(pos)
		if s.Pos() < 0 || s.Pos() > len(doc) {
			t.Fatalf("SetPos(%d) left the scanner at %d", pos, s.Pos())
		}
		_ = s.Skip() // no panic
	}
}
