package installations

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBooks: the latest config's book of a store is the one kept (an
// older config's release leaves it); list, remove and token reach every
// book; a queued delivery gets its organization's token and no inbound
// copy.
func TestBooks(t *testing.T) {
	c := newClock()
	svc := newFakeService(c.now)
	svc.give("1", "s1")
	older, latest := newTestBook(t, NewMemoryStore(), svc, c), newTestBook(t, NewMemoryStore(), svc, c)
	if err := latest.Install(testInstallation("1", "acme", "s1")); err != nil {
		t.Fatal(err)
	}
	var books Books
	releaseOlder := books.Keep("file", older)
	releaseLatest := books.Keep("file", latest)
	releaseOlder()
	if books.Of("file") != latest || books.Len() != 1 {
		t.Fatalf("the latest book is not the one kept: %d installations", books.Len())
	}
	if list, err := books.List(); err != nil || len(list) != 1 {
		t.Errorf("list %v %v", list, err)
	}
	if tok, _, err := books.Token(context.Background(), "acme"); err != nil || tok == "" {
		t.Errorf("token %q %v", tok, err)
	}
	h := http.Header{"X-App-Token": {"forged"}, "X-Service-Domain": {"acme"}}
	books.QueuedToken("file", "X-App-Token")(context.Background(), "1", h)
	if got := h.Get("X-App-Token"); got == "forged" || got == "" {
		t.Errorf("queued delivery's token %q", got)
	}
	if n, err := books.Remove("acme"); n != 1 || err != nil {
		t.Errorf("remove: %d %v", n, err)
	}
	if _, _, err := books.Token(context.Background(), "acme"); !errors.Is(err, ErrNotFound) {
		t.Errorf("token of a removed installation: %v", err)
	}
	releaseLatest()
	if books.Of("file") != nil {
		t.Error("released, still kept")
	}
}

// TestBooksAdmin: the admin answers and its refusals, each an
// *AdminError with the status the admin API answers.
func TestBooksAdmin(t *testing.T) {
	var books Books
	c := newClock()
	svc := newFakeService(c.now)
	svc.give("1", "s1")
	b := newTestBook(t, NewMemoryStore(), svc, c)
	if err := b.Install(testInstallation("1", "acme", "s1")); err != nil {
		t.Fatal(err)
	}
	defer books.Keep("file", b)()
	for _, c := range []struct {
		serve        func(*Books, http.ResponseWriter, *http.Request) error
		method, body string
		query        string
		status       int
	}{
		{(*Books).ServeInstallations, "GET", "", "", 200},
		{(*Books).ServeInstallations, "PUT", "", "", 405},
		{(*Books).ServeInstallations, "DELETE", "", "", 400},
		{(*Books).ServeInstallations, "DELETE", "", "?organization=other", 404},
		{(*Books).ServeToken, "GET", "", "", 405},
		{(*Books).ServeToken, "POST", `{}`, "", 400},
		{(*Books).ServeToken, "POST", `{"organization":"other"}`, "", 404},
		{(*Books).ServeToken, "POST", `{"organization":"acme"}`, "", 200},
		{(*Books).ServeInstallations, "DELETE", "", "?organization=acme", 200},
	} {
		w := httptest.NewRecorder()
		err := c.serve(&books, w, httptest.NewRequest(c.method, "/service/installations"+c.query, strings.NewReader(c.body)))
		status := w.Code
		var refused *AdminError
		if errors.As(err, &refused) {
			status = refused.Status
		} else if err != nil {
			t.Errorf("%s %s: %v", c.method, c.query, err)
		}
		if status != c.status {
			t.Errorf("%s %s %s: %d, want %d", c.method, c.query, c.body, status, c.status)
		}
	}
}
