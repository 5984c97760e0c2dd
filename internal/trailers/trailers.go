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
// one when drop is nil. A request that declared no trailers (r.Trailer is
// nil, the common case) is left as it is, without allocating: net/http
// keeps the trailers of such a request in its own copy of the request,
// which no handler sees.
func Drop(r *http.Request, drop func(name string) bool) {
	if r.Trailer == nil {
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		r.Trailer = nil // no body, no trailers to come
		return
	}
	kept := make(http.Header)
	r.Body = &filter{ReadCloser: r.Body, from: r.Trailer, to: kept, drop: drop}
	r.Trailer = kept
}

// filter fills to from from, once the body has ended, with the trailers
// that drop does not name (none when drop is nil); it also removes those
// it names from to, which net/http fills itself when the request is its
// own value rather than a handler's copy of it.
type filter struct {
	io.ReadCloser
	from, to http.Header
	drop     func(string) bool
	done     bool
}

func (f *filter) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if err == io.EOF && !f.done {
		f.done = true
		for name, values := range f.from {
			if f.drop != nil && !f.drop(name) {
				f.to[name] = values
			}
		}
		for name := range f.to {
			if f.drop == nil || f.drop(name) {
				delete(f.to, name)
			}
		}
	}
	return n, err
}
