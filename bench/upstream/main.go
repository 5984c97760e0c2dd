// Command upstream is the app behind Caddy in servicegate's benchmarks: a
// small, fast HTTP server on a loopback address. POSTs to module endpoints
// (/file-format/… and /pre-export/…) get their body echoed back, as a custom
// file format app answers a job with a body of about the same size, except
// POST /file-format/answer5m, which reads the job and answers a valid
// parse-file answer of about 5 MB (answer5MPath), and the other payloads of
// the contract's benchmarks: a build-file answer of one base64 content
// (build5MPath), a pre-export answer of plural strings with translations
// (preExport5MPath) and the same strings as new-line delimited JSON, as the
// service sends them by URL (strings5MPath); every other request has its
// body read and gets a small JSON answer, as a webhook handler or an API
// call would.
package main

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var small = []byte(`{"ok":true}` + "\n")

// copyBuffers and bodies keep the upstream from allocating per request.
var (
	copyBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
	bodies      = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == answer5MPath {
		answer(w, r, answer5M)
		return
	}
	if body, ok := contractPayloads[r.Method+" "+r.URL.Path]; ok {
		answer(w, r, body)
		return
	}
	if r.Method == http.MethodPost && isModulePath(r.URL.Path) {
		echo(w, r)
		return
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	_, _ = io.CopyBuffer(io.Discard, onlyReader{r.Body}, *buf)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(small)))
	_, _ = w.Write(small)
}

// echo reads the whole job, as an app parses it before answering, and
// sends it back.
func echo(w http.ResponseWriter, r *http.Request) {
	b := bodies.Get().(*bytes.Buffer)
	defer bodies.Put(b)
	b.Reset()
	if _, err := b.ReadFrom(r.Body); err != nil {
		http.Error(w, `{"error":{"message":"could not read the job"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = w.Write(b.Bytes())
}

// answer5MPath answers any job with answer5M, a parse-file answer under the
// 5 MB limit of the service's module calls.
const answer5MPath = "/file-format/answer5m"

// answer5MSize bounds answer5M: "5 MB", under service_limits' 5 MiB default.
const answer5MSize = 5_000_000

var answer5M = parseFileAnswer(answer5MSize)

// parseFileAnswer is a valid custom-file-format parse-file answer
// {"data":{"strings":[…]}} of at most size bytes, as close to size as whole
// string records allow: plain string records with a context, a label and a
// translation into "uk" (the target language of the bench's jobs).
func parseFileAnswer(size int) []byte {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"data":{"strings":[`)
	const tail = `]}}`
	for i := 0; ; i++ {
		rec := fmt.Sprintf(`{"identifier":"key.%d","context":"menu","labels":["ui"],"text":"Open the settings of item %d","translations":{"uk":{"text":"Відкрити налаштування %d","status":"translated"}}}`, i, i, i)
		sep := 0
		if i > 0 {
			sep = 1
		}
		if b.Len()+sep+len(rec)+len(tail) > size {
			break
		}
		if sep == 1 {
			b.WriteByte(',')
		}
		b.WriteString(rec)
	}
	b.WriteString(tail)
	return b.Bytes()
}

// The paths of the contract's other 5 MB payloads.
const (
	build5MPath     = "/file-format/build5m"
	preExport5MPath = "/pre-export/answer5m"
	strings5MPath   = "/pre-export/strings5m.ndjson"
)

// contractPayloads are those payloads by method and path: the pre-export
// answer keeps every string of the strings file, as the contract wants.
var contractPayloads = func() map[string][]byte {
	lines := preExportLines(answer5MSize)
	return map[string][]byte{
		"POST " + build5MPath:     buildFileAnswer(answer5MSize),
		"POST " + preExport5MPath: append(append([]byte(`{"data":{"strings":[`), bytes.Join(lines, []byte(","))...), `]}}`...),
		"GET " + strings5MPath:    append(bytes.Join(lines, []byte("\n")), '\n'),
	}
}()

// buildFileAnswer is a build-file answer {"data":{"content":…}} of at most
// size bytes: a file in base64.
func buildFileAnswer(size int) []byte {
	const head, tail = `{"data":{"content":"`, `"}}`
	file := make([]byte, (size-len(head)-len(tail))/4*3)
	for i := range file {
		file[i] = byte(i*7/5) ^ byte(i>>9)
	}
	return []byte(head + base64.StdEncoding.EncodeToString(file) + tail)
}

// preExportLines are the string records of a pre-export job and of its
// answer, of at most size bytes as an answer: one in four plural, each
// translated into "uk" with a status, uniqIds h<n>::<i>.
func preExportLines(size int) [][]byte {
	var lines [][]byte
	n := len(`{"data":{"strings":[]}}`)
	for i := 0; ; i++ {
		var rec string
		if i%4 == 0 {
			rec = fmt.Sprintf(`{"uniqId":"h%d::%d","identifier":"plural.%d","context":"cart","hasPlurals":true,"maxLength":40,"text":{"one":"%d item in the cart","other":"%d items in the cart"},"translations":{"uk":{"text":{"one":"%d товар у кошику","few":"%d товари у кошику","many":"%d товарів у кошику","other":"%d товару у кошику"},"status":{"one":"approved","few":"translated","many":"translated","other":"untranslated"}}}}`,
				i%97, i, i, i, i, i, i, i, i)
		} else {
			rec = fmt.Sprintf(`{"uniqId":"h%d::%d","identifier":"key.%d","context":"Button on the settings page","isHidden":false,"labels":["ui","settings"],"text":"Save the changes to item %d","translations":{"uk":{"text":"Зберегти зміни до пункту %d","status":"approved"}}}`,
				i%97, i, i, i, i)
		}
		if n+len(rec)+1 > size {
			return lines
		}
		n += len(rec) + 1
		lines = append(lines, []byte(rec))
	}
}

// answer reads the whole job, as an app parses it before answering, and
// sends body.
func answer(w http.ResponseWriter, r *http.Request, body []byte) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	if _, err := io.CopyBuffer(io.Discard, onlyReader{r.Body}, *buf); err != nil {
		http.Error(w, `{"error":{"message":"could not read the job"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func isModulePath(p string) bool {
	return strings.HasPrefix(p, "/file-format/") || strings.HasPrefix(p, "/pre-export/")
}

// onlyReader hides WriteTo so that io.CopyBuffer uses the pooled buffer.
type onlyReader struct{ io.Reader }

func main() {
	addr := flag.String("addr", "127.0.0.1:18001", "loopback address to listen on")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatalf("upstream: bad -addr %q: %v", *addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("upstream: -addr must be a loopback IP address, got %q", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("upstream: %v", err)
	}
	fmt.Fprintf(os.Stderr, "upstream listening on %s\n", ln.Addr())
	srv := &http.Server{
		Handler:           http.HandlerFunc(handle),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	log.Fatal(srv.Serve(ln))
}
