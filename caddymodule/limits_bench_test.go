package caddymodule

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// discardWriter is a ResponseWriter that keeps nothing, so that benchmarks
// measure the handler and not a recorder.
type discardWriter struct {
	header http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

// benchApp stands in for reverse_proxy and the app: it reads the job, closes
// it as http.Transport does, and answers with a 100 KB body of declared
// length.
func benchApp(answer []byte) caddyhttp.Handler {
	size := strconv.Itoa(len(answer))
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return err
		}
		r.Body.Close()
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{size}
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(answer)
		return err
	})
}

// benchmarkJob sends 100 KB jobs with a 100 KB answer through serve.
func benchmarkJob(b *testing.B, declared bool, serve func(w http.ResponseWriter, r *http.Request) error) {
	job := bytes.Repeat([]byte("j"), 100<<10)
	body := bytes.NewReader(job)
	req, err := http.NewRequest(http.MethodPost, "http://app.example/file-format", nil)
	if err != nil {
		b.Fatal(err)
	}
	w := &discardWriter{header: make(http.Header)}
	b.SetBytes(int64(2 * len(job)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body.Reset(job)
		req.Body = io.NopCloser(body)
		req.ContentLength = int64(len(job))
		if !declared {
			req.ContentLength = -1
			delete(req.Header, "Content-Length")
		}
		clear(w.header)
		w.n = 0
		if err := serve(w, req); err != nil {
			b.Fatal(err)
		}
		if w.n != len(job) {
			b.Fatalf("answer of %d bytes", w.n)
		}
	}
}

// BenchmarkLimitsJob100KB is service_limits on a 100 KB job and answer.
func BenchmarkLimitsJob100KB(b *testing.B) {
	l := newTestLimits(b, &ServiceLimits{})
	next := benchApp(bytes.Repeat([]byte("a"), 100<<10))
	benchmarkJob(b, true, func(w http.ResponseWriter, r *http.Request) error { return l.ServeHTTP(w, r, next) })
}

// BenchmarkLimitsJob100KBChunked is the same job sent without a length.
func BenchmarkLimitsJob100KBChunked(b *testing.B) {
	l := newTestLimits(b, &ServiceLimits{})
	next := benchApp(bytes.Repeat([]byte("a"), 100<<10))
	benchmarkJob(b, false, func(w http.ResponseWriter, r *http.Request) error { return l.ServeHTTP(w, r, next) })
}

// BenchmarkPlainJob100KB is the same job straight to the app, for scale.
func BenchmarkPlainJob100KB(b *testing.B) {
	next := benchApp(bytes.Repeat([]byte("a"), 100<<10))
	benchmarkJob(b, true, next.ServeHTTP)
}

// BenchmarkLimitsContractParseFile1MB is service_limits with contract
// custom-file-format on a parse-file job with a 1 MB answer: the limits,
// the job check and the answer check together.
func BenchmarkLimitsContractParseFile1MB(b *testing.B) {
	l := newTestLimits(b, &ServiceLimits{Contract: "custom-file-format"})
	job := []byte(`{"jobType":"parse-file","organization":{"id":1},"project":{"id":2},"file":{"name":"a.kv","content":"YSA9IGI="},"sourceLanguage":{"id":"en","pluralCategoryNames":["one","other"]},"targetLanguages":[{"id":"uk","pluralCategoryNames":["one","few","many","other"]}]}`)
	var answer bytes.Buffer
	answer.WriteString(`{"data":{"strings":[`)
	for i := 0; answer.Len() < 1<<20; i++ {
		if i > 0 {
			answer.WriteByte(',')
		}
		answer.WriteString(`{"identifier":"key.` + strconv.Itoa(i) + `","text":"Open the settings","translations":{"uk":{"text":"Відкрити налаштування","status":"translated"}}}`)
	}
	answer.WriteString(`]}}`)
	b.SetBytes(int64(answer.Len()))
	benchmarkContractExchange(b, l, job, answer.Bytes(), func(r io.Reader) io.ReadCloser { return io.NopCloser(r) })
}

// benchmarkContractExchange sends job through l to an app answering
// answer, once per iteration, the job's body made by body.
func benchmarkContractExchange(b *testing.B, l *ServiceLimits, job, answer []byte, body func(io.Reader) io.ReadCloser) {
	next := benchApp(answer)
	src := bytes.NewReader(job)
	w := &discardWriter{header: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(job)
		req, _ := http.NewRequest(http.MethodPost, "http://app.example/file-format", body(src))
		req.ContentLength = int64(len(job))
		clear(w.header)
		w.n = 0
		if err := l.ServeHTTP(w, req, next); err != nil {
			b.Fatal(err)
		}
		if w.n != len(answer) {
			b.Fatalf("answer of %d bytes, status %d", w.n, w.status)
		}
	}
}

// BenchmarkLimitsContract5MBJob is service_limits with a contract on a
// 5 MB parse-file job (its file content inline) answered with 5 MB: the
// heap allocated per exchange, beside the job and the answer, which are
// held in mappings.
func BenchmarkLimitsContract5MBJob(b *testing.B) {
	l := newTestLimits(b, &ServiceLimits{Contract: "custom-file-format"})
	head := `{"jobType":"parse-file","organization":{"id":1},"project":{"id":2},"sourceLanguage":{"id":"en","pluralCategoryNames":["one","other"]},"targetLanguages":[{"id":"uk","pluralCategoryNames":["one","few","many","other"]}],"file":{"name":"a.kv","content":"`
	job := []byte(head + strings.Repeat("QUJD", (5_000_000-len(head)-4)/4) + `"}}`)
	var answer bytes.Buffer
	answer.WriteString(`{"data":{"strings":[`)
	for i := 0; answer.Len() < 5_000_000-200; i++ {
		if i > 0 {
			answer.WriteByte(',')
		}
		answer.WriteString(`{"identifier":"key.` + strconv.Itoa(i) + `","context":"Settings screen, main button","text":"Open the settings","translations":{"uk":{"text":"Відкрити налаштування","status":"translated"}}}`)
	}
	answer.WriteString(`]}}`)
	b.SetBytes(int64(len(job) + answer.Len()))
	benchmarkContractExchange(b, l, job, answer.Bytes(), func(r io.Reader) io.ReadCloser { return unsized{r} })
}
