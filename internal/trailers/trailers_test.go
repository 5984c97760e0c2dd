package trailers

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// next records what the handler after Drop sees of a request: its body
// and, once the body is read, its trailers.
type next struct {
	mu      sync.Mutex
	trailer http.Header
	body    string
}

func (n *next) serve(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.trailer, n.body = r.Trailer.Clone(), string(b)
	n.mu.Unlock()
}

func (n *next) last() (http.Header, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.trailer, n.body
}

// identity is what the tests drop: X-Service-Domain in any case.
func identity(name string) bool { return strings.EqualFold(name, "X-Service-Domain") }

// gateway is a server whose handler drops trailers and passes the request
// on to n; with copied, as Caddy does, the handler works on a copy of
// net/http's request value, else on net/http's own.
func gateway(t *testing.T, n *next, drop func(string) bool, h2, copied bool) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if copied {
			r = r.WithContext(r.Context())
		}
		Drop(r, drop)
		n.serve(r)
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// sendChunked writes a chunked request to addr declaring declared and
// sending trailers, and reads the answer's status.
func sendChunked(t *testing.T, addr string, declared []string, trailers [][2]string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	b.WriteString("POST /x HTTP/1.1\r\nHost: gateway\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n")
	if len(declared) > 0 {
		b.WriteString("Trailer: " + strings.Join(declared, ", ") + "\r\n")
	}
	b.WriteString("\r\n5\r\nhello\r\n0\r\n")
	for _, tr := range trailers {
		fmt.Fprintf(&b, "%s: %s\r\n", tr[0], tr[1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

var sent = [][2]string{{"X-Service-Domain", "evil.example"}, {"x-service-domain", "evil2.example"}, {"X-Checksum", "abc"}}

// TestDropHTTP1: over HTTP/1.1, whether the handler works on net/http's own
// request value or on a copy, the trailers drop names never reach the next
// handler, declared or not; the others do, unless every trailer is dropped
// (a copy never sees undeclared ones: net/http writes them to its own).
func TestDropHTTP1(t *testing.T) {
	for _, tt := range []struct {
		name     string
		declared []string
		drop     func(string) bool
		want     string
	}{
		{"declared", []string{"X-Service-Domain", "X-Checksum"}, identity, "map[X-Checksum:[abc]]"},
		{"undeclared", nil, identity, "map[X-Checksum:[abc]]"},
		{"one declared", []string{"X-Checksum"}, identity, "map[X-Checksum:[abc]]"},
		{"all dropped", []string{"X-Service-Domain", "X-Checksum"}, nil, "map[]"},
		{"all dropped, undeclared", nil, nil, "map[]"},
	} {
		for _, copied := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, copied %v", tt.name, copied), func(t *testing.T) {
				n := &next{}
				gw := gateway(t, n, tt.drop, false, copied)
				sendChunked(t, gw.Listener.Addr().String(), tt.declared, sent)
				want := tt.want
				if copied && tt.declared == nil {
					want = "map[]"
				}
				got, body := n.last()
				if body != "hello" || fmt.Sprint(got) != want && !(want == "map[]" && len(got) == 0) {
					t.Fatalf("the next handler got trailers %v, body %q; want %s", got, body, want)
				}
			})
		}
	}
}

// TestDropHTTP2: over HTTP/2, where net/http writes the declared trailers
// from another goroutine, the same holds (run with -race).
func TestDropHTTP2(t *testing.T) {
	n := &next{}
	gw := gateway(t, n, identity, true, true)
	client := gw.Client()
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test's own server
	client.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", gw.URL+"/x", pr)
	req.Trailer = http.Header{"X-Service-Domain": nil, "X-Checksum": nil}
	go func() {
		_, _ = pw.Write([]byte("hello"))
		req.Trailer.Set("X-Service-Domain", "evil.example")
		req.Trailer.Set("X-Checksum", "abc")
		pw.Close()
	}()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the request went over %s", resp.Proto)
	}
	got, body := n.last()
	if body != "hello" || len(got) != 1 || got.Get("X-Checksum") != "abc" {
		t.Fatalf("the next handler got trailers %v, body %q", got, body)
	}
}

// TestDropLeavesPlainRequests: a request with a body of known length and
// no declared trailer, or with no body, is left as it is, without
// allocating.
func TestDropLeavesPlainRequests(t *testing.T) {
	r := httptest.NewRequest("POST", "/x", strings.NewReader("hello"))
	body := r.Body
	if n := testing.AllocsPerRun(100, func() { Drop(r, identity) }); n != 0 || r.Body != body {
		t.Fatalf("%v allocations, body replaced: %v", n, r.Body != body)
	}
	r = httptest.NewRequest("GET", "/x", nil)
	r.Trailer = http.Header{"X-Service-Domain": nil}
	Drop(r, identity)
	if r.Trailer != nil {
		t.Fatalf("a request with no body keeps trailers %v", r.Trailer)
	}
}
