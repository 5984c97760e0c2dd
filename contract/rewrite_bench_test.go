package contract

import (
	"bytes"
	"encoding/base64"
	"io"
	"strconv"
	"testing"
)

// benchStrings is a parse-file answer of about 1 MB of strings.
func benchStrings() []byte {
	var answer bytes.Buffer
	answer.WriteString(`{"data":{"strings":[`)
	for i := 0; answer.Len() < 1<<20; i++ {
		if i > 0 {
			answer.WriteByte(',')
		}
		answer.WriteString(`{"identifier":"key.` + strconv.Itoa(i) + `","text":"Open the settings","translations":{"uk":{"text":"Відкрити налаштування","status":"translated"}}}`)
	}
	answer.WriteString(`],"content":"YWJj"}}`)
	return answer.Bytes()
}

// benchContent is a build-file answer carrying a file of 6 MB in base64.
func benchContent() []byte {
	file := make([]byte, 6<<20)
	for i := range file {
		file[i] = byte(i * 7 / 5)
	}
	return []byte(`{"data":{"content":"` + base64.StdEncoding.EncodeToString(file) + `"}}`)
}

func benchSpill(b *testing.B, answer []byte, spill func(io.Reader, io.Writer, Put) error) {
	put := func(kind string, write func(io.Writer) error) (string, error) {
		return "https://app.example/servicegate/spill/x?expires=1&sig=2", write(io.Discard)
	}
	src := bytes.NewReader(answer)
	var out bytes.Buffer
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(answer)
		out.Reset()
		if err := spill(src, &out, put); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpillAnswer1MB hands the strings of a 1 MB parse-file answer
// over by URL, into a writer that keeps nothing.
func BenchmarkSpillAnswer1MB(b *testing.B) { benchSpill(b, benchStrings(), SpillAnswer) }

// BenchmarkSpillAnswerContent hands the file of a build-file answer over.
func BenchmarkSpillAnswerContent(b *testing.B) { benchSpill(b, benchContent(), SpillAnswer) }

// The reference (encoding/json's Decoder) over the same answers.
func BenchmarkRefSpillAnswer1MB(b *testing.B)     { benchSpill(b, benchStrings(), refSpillAnswer) }
func BenchmarkRefSpillAnswerContent(b *testing.B) { benchSpill(b, benchContent(), refSpillAnswer) }
