package installations

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// appRequest is the request that tells the app of a lifecycle call: one
// the gateway builds, not the caller's request with a new body. It is a
// POST of body (Content-Type application/json) to path, the descriptor's
// path of the call, with no query; its headers are Content-Type,
// Content-Length, tokenHeader with token when both are set, and the
// caller's traceparent and tracestate when they are well formed (with
// Caddy's tracing, the gateway's own span's). Nothing else of r goes
// with it: no query, cookie, authorization, Forwarded, method override,
// Connection, Upgrade or other hop-by-hop header, and no trailer. It keeps
// r's context, Host, remote address, protocol and TLS state, which a proxy
// after the handler reads to set its own X-Forwarded-* and Via headers.
func appRequest(r *http.Request, path string, body []byte, tokenHeader, token string) *http.Request {
	h := make(http.Header, 4)
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	if tokenHeader != "" && token != "" {
		h.Set(tokenHeader, token)
	}
	if tp := r.Header.Values("Traceparent"); len(tp) == 1 && validTraceparent(tp[0]) {
		h["Traceparent"] = []string{tp[0]}
		if ts := r.Header.Values("Tracestate"); len(ts) == 1 && validTracestate(ts[0]) {
			h["Tracestate"] = []string{ts[0]}
		}
	}
	out := &http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: path},
		Proto:         r.Proto,
		ProtoMajor:    r.ProtoMajor,
		ProtoMinor:    r.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          r.Host,
		RemoteAddr:    r.RemoteAddr,
		RequestURI:    path,
		TLS:           r.TLS,
	}
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return out.WithContext(r.Context())
}

// validTraceparent tells whether v is a W3C traceparent header of
// version 00: 2, 32, 16 and 2 lowercase hex digits joined by "-".
func validTraceparent(v string) bool {
	if len(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return v[:2] == "00"
}

// validTracestate tells whether v may be a W3C tracestate header: at most
// 512 bytes of printable ASCII.
func validTracestate(v string) bool {
	if len(v) > 512 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
