// Command upstream is the app behind Caddy in servicegate's benchmarks: a
// small, fast HTTP server on a loopback address. POSTs to module endpoints
// (/file-format/… and /pre-export/…) get their body echoed back, as a custom
// file format app answers a job with a body of about the same size, except
// POST /file-format/answer5m, which reads the job and answers a valid
// parse-file answer of about 5 MB (answer5MPath); every other request has
// its body read and gets a small JSON answer, as a webhook handler or an
// API call would.
package main

import (
	"bytes"
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
