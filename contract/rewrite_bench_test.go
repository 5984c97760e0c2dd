package contract

import (
	"bytes"
	"io"
	"strconv"
	"testing"
)

// BenchmarkSpillAnswer1MB hands the strings of a 1 MB parse-file answer
// over by URL, into a writer that keeps nothing.
func BenchmarkSpillAnswer1MB(b *testing.B) {
	var answer bytes.Buffer
	answer.WriteString(`{"data":{"strings":[`)
	for i := 0; answer.Len() < 1<<20; i++ {
		if i > 0 {
			answer.WriteByte(',')
		}
		answer.WriteString(`{"identifier":"key.` + strconv.Itoa(i) + `","text":"Open the settings","translations":{"uk":{"text":"Відкрити налаштування","status":"translated"}}}`)
	}
	answer.WriteString(`],"content":"YWJj"}}`)
	put := func(kind string, write func(io.Writer) error) (string, error) {
		return "https://app.example/servicegate/spill/x?expires=1&sig=2", write(io.Discard)
	}
	src := bytes.NewReader(answer.Bytes())
	var out bytes.Buffer
	b.SetBytes(int64(answer.Len()))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(answer.Bytes())
		out.Reset()
		if err := SpillAnswer(src, &out, put); err != nil {
			b.Fatal(err)
		}
	}
}
