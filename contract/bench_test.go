package contract

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// parseFileAnswer is a parse-file answer of about size bytes: strings with
// translations, one in ten plural.
func parseFileAnswer(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"data":{"strings":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%10 == 0 {
			fmt.Fprintf(&b, `{"identifier":"key.%d","context":"menu","hasPlurals":true,"text":{"one":"%d file","other":"%d files"},"translations":{"uk":{"text":{"one":"%d файл","few":"%d файли","many":"%d файлів","other":"%d файлу"},"status":{"one":"approved","few":"translated","many":"translated","other":"untranslated"}}}}`, i, i, i, i, i, i, i)
			continue
		}
		fmt.Fprintf(&b, `{"identifier":"key.%d","context":"menu","customData":"{\"line\":%d}","labels":["ui"],"text":"Open the settings of item %d","translations":{"uk":{"text":"Відкрити налаштування %d","status":"translated"}}}`, i, i, i, i)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

func benchmarkCheck(b *testing.B, size int) {
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, nil)))
	if err != nil {
		b.Fatal(err)
	}
	answer := parseFileAnswer(size)
	rd := bytes.NewReader(answer)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rd.Reset(answer)
		if _, err := j.CheckAnswer(rd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckParseFile1MB checks a 1 MB parse-file answer.
func BenchmarkCheckParseFile1MB(b *testing.B) { benchmarkCheck(b, 1<<20) }

// BenchmarkCheckParseFile5MB checks a 5 MB parse-file answer.
func BenchmarkCheckParseFile5MB(b *testing.B) { benchmarkCheck(b, 5<<20) }

// liveHeapReader measures the live heap (after a collection) every step
// bytes read, keeping the largest.
type liveHeapReader struct {
	r          *bytes.Reader
	step, next int
	read       int
	peak       uint64
}

func (l *liveHeapReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.read += n
	if l.read >= l.next {
		l.next += l.step
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		l.peak = max(l.peak, m.HeapAlloc)
	}
	return n, err
}

// TestCheckAnswerHoldsNoSecondCopy checks a 5 MB parse-file answer while
// measuring the live heap: it grows by the identifiers kept for the
// uniqueness rule (some 40 bytes a string), never by a second copy of the
// answer.
func TestCheckAnswerHoldsNoSecondCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("collects garbage some 40 times")
	}
	j, err := ParseJob(CustomFileFormat, bytes.NewReader(job(ParseFile, nil)))
	if err != nil {
		t.Fatal(err)
	}
	answer := parseFileAnswer(5 << 20)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rd := &liveHeapReader{r: bytes.NewReader(answer), step: 128 << 10}
	if _, err := j.CheckAnswer(rd); err != nil {
		t.Fatal(err)
	}
	grown := int64(rd.peak) - int64(before.HeapAlloc)
	if grown > int64(len(answer))/2 {
		t.Errorf("the live heap grew by %d bytes while checking a %d-byte answer", grown, len(answer))
	}
	t.Logf("live heap grew by at most %d bytes for a %d-byte answer", grown, len(answer))
}
