package siteorigin

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHost: the host name is always one the site names; a request's
// Host header only picks among them (or the one a wildcard matched).
func TestHost(t *testing.T) {
	for _, c := range []struct {
		hosts       []string
		requestHost string
		want        string
		ok          bool
	}{
		{[]string{"app.example.com"}, "evil.example", "app.example.com", true},
		{[]string{"App.Example.com"}, "APP.example.com:8443", "app.example.com", true},
		{[]string{"a.example", "b.example"}, "b.example:80", "b.example", true},
		{[]string{"a.example", "b.example"}, "evil.example", "", false},
		{[]string{"*.example.com"}, "x.example.com", "x.example.com", true},
		{[]string{"*.example.com"}, "x.y.example.com", "", false},
		{[]string{"*.example.com"}, ".example.com", "", false},
		{[]string{"{env.HOST}"}, "evil.example", "", false},
		{[]string{"::1"}, "[::1]:8080", "::1", true},
		{nil, "evil.example", "", false},
	} {
		got, ok := Host(c.hosts, c.requestHost)
		if got != c.want || ok != c.ok {
			t.Errorf("Host(%q, %q) = %q, %v; want %q, %v", c.hosts, c.requestHost, got, ok, c.want, c.ok)
		}
	}
}

// TestOf: the scheme and port are the ones the request came in on, the
// port left out when it is the scheme's own; no host name, no origin.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		tls   bool
		port  int
		hosts []string
		want  string
	}{
		{false, 80, []string{"app.example"}, "http://app.example"},
		{true, 443, []string{"app.example"}, "https://app.example"},
		{true, 8443, []string{"app.example"}, "https://app.example:8443"},
		{false, 80, []string{"::1"}, "http://[::1]"},
		{false, 80, nil, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = "evil.example"
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: c.port}))
		got, err := Of(r, c.hosts)
		if got != c.want || (c.want == "") != errors.Is(err, ErrNoHost) {
			t.Errorf("Of(tls %v, port %d, %q) = %q, %v; want %q", c.tls, c.port, c.hosts, got, err, c.want)
		}
	}
}
