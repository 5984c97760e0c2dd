package approute

import (
	"errors"
	"net/http"
	"sync"

	"github.com/servicegate/servicegate/installations"
	"github.com/servicegate/servicegate/webhook"
)

// AppTokens gives the app the app token of the organization a request is
// for: on a webhook delivery its module's handler verified, the
// organization the delivery names (its organization headers, which the
// check removed unless the signature vouches for them); on a request
// through the guard, the organization of its verified token. Inbound
// copies of the header are removed from every request.
type AppTokens struct {
	// Header carries the token to the app. Required.
	Header string
	// Book holds the installations and gives their tokens. Required.
	Book *installations.Book
	// Verified returns the organization of the request's verified token,
	// the zero Org when there is none.
	Verified func(*http.Request) installations.Org
	// Failed, when set, is told when a request of an installed
	// organization goes on without its app token.
	Failed func(organization string, err error)
}

// delivery is h with a next handler that gives verified deliveries their
// organization's app token.
func (t *AppTokens) delivery(h Handler) Handler {
	return func(w http.ResponseWriter, r *http.Request, next Next) error {
		n := tokenNexts.Get().(*tokenNext)
		*n = tokenNext{tokens: t, next: next, delivery: true}
		err := h(w, r, n)
		*n = tokenNext{}
		tokenNexts.Put(n)
		return err
	}
}

// tokenNexts pools the next handlers that set the app token, so the hot
// path allocates none.
var tokenNexts = sync.Pool{New: func() any { return new(tokenNext) }}

// tokenNext sets the app token header, then calls next.
type tokenNext struct {
	tokens   *AppTokens
	next     Next
	delivery bool
}

// ServeHTTP sets the app token of the request's organization, if it has
// one, and calls next.
func (t *tokenNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	var org installations.Org
	if t.delivery {
		// The check removed the organization headers the signature does
		// not vouch for.
		org = installations.Org{Domain: r.Header.Get(webhook.HeaderDomain), ID: r.Header.Get(webhook.HeaderOrgID)}
	} else if t.tokens.Verified != nil {
		org = t.tokens.Verified(r)
	}
	if org != (installations.Org{}) {
		tok, _, err := t.tokens.Book.Token(r.Context(), org)
		switch {
		case err == nil:
			r.Header[t.tokens.Header] = []string{tok}
		case !errors.Is(err, installations.ErrNotFound) && t.tokens.Failed != nil:
			t.tokens.Failed(org.String(), err)
		}
	}
	return t.next.ServeHTTP(w, r)
}
