package approute

import (
	"net/http"
	"strings"

	"github.com/servicegate/servicegate/internal/trailers"
	"github.com/servicegate/servicegate/token"
	"github.com/servicegate/servicegate/webhook"
)

// identity is the headers the gateway sets for the app and tells it to
// trust: what a client sends under their names never reaches the app.
type identity struct {
	names []string // canonical, one per header
}

// newIdentity is the identity headers names, and header (the app token's)
// when it is set, each once.
func newIdentity(names []string, header string) identity {
	var id identity
	for _, name := range names {
		id.add(name)
	}
	id.add(header)
	return id
}

// add makes name an identity header, unless it is one already.
func (id *identity) add(name string) {
	if name != "" && !id.has(name) {
		id.names = append(id.names, http.CanonicalHeaderKey(name))
	}
}

// has tells whether name is one of the identity headers, in a spelling an
// app's stack may read as it: another case, or "_" for "-".
func (id identity) has(name string) bool {
	for _, n := range id.names {
		if token.SameHeaderName(name, n) {
			return true
		}
	}
	return false
}

// remove deletes from h every inbound copy of the identity headers, in
// any spelling, and the tokens of its Connection header that name one of
// them, so that a proxy after the router cannot drop a header the gateway
// set as hop-by-hop. On a webhook delivery's route, the delivery's
// organization headers as the service spells them are left to the webhook
// check, which keeps them only when the signature vouches for them. A
// request that carries none of them is left as it is, without
// allocating.
func (id identity) remove(h http.Header, delivery bool) {
	if len(id.names) == 0 {
		return
	}
	for name := range h {
		if delivery && (name == webhook.HeaderDomain || name == webhook.HeaderOrgID) {
			continue
		}
		if id.has(name) {
			delete(h, name)
		}
	}
	if lines, ok := h["Connection"]; ok && id.namedIn(lines) {
		if kept := id.withoutNamed(lines); len(kept) > 0 {
			h["Connection"] = kept
		} else {
			delete(h, "Connection")
		}
	}
}

// namedIn tells whether a token of the Connection header lines names an
// identity header.
func (id identity) namedIn(lines []string) bool {
	for _, line := range lines {
		for line != "" {
			var tok string
			tok, line, _ = strings.Cut(line, ",")
			if id.has(strings.Trim(tok, " \t")) {
				return true
			}
		}
	}
	return false
}

// withoutNamed is the Connection header lines without the tokens that
// name an identity header; a line left with no token is dropped.
func (id identity) withoutNamed(lines []string) []string {
	kept := lines[:0]
	for _, line := range lines {
		var toks []string
		for tok := range strings.SplitSeq(line, ",") {
			if tok = strings.Trim(tok, " \t"); tok != "" && !id.has(tok) {
				toks = append(toks, tok)
			}
		}
		if len(toks) > 0 {
			kept = append(kept, strings.Join(toks, ", "))
		}
	}
	return kept
}

// dropTrailers keeps the request's trailers from the app: every one when
// all (a route where the app is told to trust headers), else those named
// as an identity header, in any spelling. See trailers.Drop.
func (id identity) dropTrailers(r *http.Request, all bool) {
	if r.Trailer == nil {
		return
	}
	if all {
		trailers.Drop(r, nil)
		return
	}
	trailers.Drop(r, id.has)
}
