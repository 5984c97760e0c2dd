package caddymodule

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/servicegate/servicegate/token"
)

func (a *ServiceAuth) lookup(raw string, gen uint64) (*authEntry, bool) {
	if a.cache == nil || len(raw) > token.MaxLength {
		return nil, false
	}
	return a.cache.Get(raw, gen)
}

// extract finds the token: the Authorization header with the Bearer scheme,
// else the from_query parameter. sent tells whether a token was presented
// (it may be empty), fromQuery where it came from; a problem is a malformed
// request (answered 400).
func (a *ServiceAuth) extract(r *http.Request) (raw string, sent, fromQuery bool, problem string) {
	if vals := r.Header["Authorization"]; len(vals) > 0 {
		if len(vals) > 1 {
			return "", false, false, "more than one Authorization header"
		}
		if tok, ok := token.FromAuthorization(vals[0]); ok {
			return tok, true, false, ""
		}
	}
	if a.FromQuery == "" || !strings.Contains(r.URL.RawQuery, a.FromQuery) {
		return "", false, false, ""
	}
	// Pairs that parse are kept: a stray % elsewhere in the query is no
	// reason to refuse the token.
	q, _ := url.ParseQuery(r.URL.RawQuery)
	vals, ok := q[a.FromQuery]
	switch {
	case !ok:
		return "", false, false, ""
	case len(vals) > 1:
		return "", false, true, "the token query parameter appears more than once"
	}
	return vals[0], true, true, ""
}

// stripQueryParam removes param from the request's query, however its
// name is escaped, keeping the other pairs as they were written. A query
// without it is left untouched.
func stripQueryParam(r *http.Request, param string) {
	q := r.URL.RawQuery
	if param == "" || (!strings.Contains(q, param) && !strings.Contains(q, "%")) {
		return // not there in any spelling
	}
	pairs := strings.Split(q, "&")
	kept := pairs[:0]
	for _, p := range pairs {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == param {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(pairs) {
		return
	}
	r.URL.RawQuery = strings.Join(kept, "&")
	r.URL.ForceQuery = false
	r.RequestURI = r.URL.RequestURI()
}
