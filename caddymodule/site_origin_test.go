package caddymodule

import "testing"

// TestSiteHost: the host name is always one the site names; a request's
// Host header only picks among them (or the one a wildcard matched).
func TestSiteHost(t *testing.T) {
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
		got, ok := siteHost(c.hosts, c.requestHost)
		if got != c.want || ok != c.ok {
			t.Errorf("siteHost(%q, %q) = %q, %v; want %q, %v", c.hosts, c.requestHost, got, ok, c.want, c.ok)
		}
	}
}
