// Package trailers keeps request trailers from carrying, to the app behind
// the gateway, a header the gateway sets and tells the app to trust. Some
// stacks merge a request's trailers into its headers; a client that sent
// X-Service-Domain as a trailer would then be read as the gateway.
//
// net/http fills a server request's Trailer map only once its body has
// been read to the end, and the map must not be touched while the body is
// being read (HTTP/2 writes it from another goroutine). So Drop never
// reads or changes the map the client's trailers arrive in before then:
// it gives the request a map of its own, empty until the body ends, and
// fills it then with the trailers that may go on. A proxy after it (Caddy's
// reverse_proxy, httputil.ReverseProxy) reads the request's Trailer map once
// the body it sends has ended, and sends what it holds.
package trailers

import (
	"io"
	"net/http"
)

// Drop keeps from r's trailers each one whose name drop reports, or every
// one when drop is nil. A request that can bring no trailer (no body, or a
// body of known length that declared none: the common case) is left as it
// is, without allocating.
func Drop(r *http.Request, drop func(name string) bool) {
	if r.Body == nil || r.Body == http.NoBody {
		r.Trailer = nil // no body, no trailers to come
		return
	}
	if r.Trailer == nil && r.ContentLength >= 0 {
		return // HTTP/1 sends trailers only after chunks; HTTP/2 only declared ones
	}
	f := &filter{ReadCloser: r.Body, r: r, from: r.Trailer, drop: drop}
	if f.from != nil {
		r.Trailer = make(http.Header) // filled once the body ends
	}
	r.Body = f
}

// filter, once the body has ended, fills r's Trailer with the trailers
// from holds (those the client declared, which net/http fills in a map of
// its own request value) that drop does not name, none when drop is nil;
// then it removes from r's Trailer every one drop names, which net/http
// wrote there itself when r is its own request value rather than a
// handler's copy of it (and the client declared no trailers).
type filter struct {
	io.ReadCloser
	r    *http.Request
	from http.Header
	drop func(string) bool
	done bool
}

func (f *filter) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF && !f.done {
		f.done = true
		if f.drop != nil && f.from != nil {
			for name, values := range f.from {
				// A declared trailer that did not come, or that net/http
				// wrote to r's own map, has no values here.
				if values != nil && !f.drop(name) {
					f.r.Trailer[name] = values
				}
			}
		}
		for name := range f.r.Trailer {
			if f.drop == nil || f.drop(name) {
				delete(f.r.Trailer, name)
			}
		}
	}
	return n, err
}
