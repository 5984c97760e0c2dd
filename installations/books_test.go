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
	h := http.Header{"X-App-Token": {"forged"}, "X-Service-Domain": {"acme"}}
	books.QueuedToken("file", "X-App-Token")(context.Background(), "1", h)
	if got := h.Get("X-App-Token"); got == "forged" || got == "" {
		t.Errorf("queued delivery's token %q", got)
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
		{(*Books).ServeInstallations, "DELETE", "", "?organization=acme&organization=other", 400},
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

// TestBooksAdminScopedToAnApp: with two apps, every entry names its app,
// an action on one installation must name the app, and acts on that app
// alone.
func TestBooksAdminScopedToAnApp(t *testing.T) {
	var books Books
	c := newClock()
	svc := newFakeService(c.now)
	svc.give("1", "s1")
	sealer, _ := NewSealer(testKey)
	for _, app := range []string{"app-a", "app-b"} {
		b, err := NewBook(BookConfig{Store: NewMemoryStore(), Sealer: sealer, App: app, Grant: svc.grant, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Install(testInstallation("1", "acme", "s1")); err != nil {
			t.Fatal(err)
		}
		defer books.Keep(app, b)()
	}
	call := func(serve func(*Books, http.ResponseWriter, *http.Request) error, method, target, body string) (int, string) {
		w := httptest.NewRecorder()
		err := serve(&books, w, httptest.NewRequest(method, target, strings.NewReader(body)))
		var refused *AdminError
		if errors.As(err, &refused) {
			return refused.Status, refused.Error()
		}
		return w.Code, w.Body.String()
	}
	if status, list := call((*Books).ServeInstallations, "GET", "/service/installations", ""); status != 200 ||
		!strings.Contains(list, `"app":"app-a"`) || !strings.Contains(list, `"app":"app-b"`) {
		t.Fatalf("listing: %d %s", status, list)
	}
	if status, list := call((*Books).ServeInstallations, "GET", "/service/installations?app=app-b", ""); status != 200 || strings.Contains(list, "app-a") {
		t.Fatalf("listing of app-b: %d %s", status, list)
	}
	for _, target := range []string{"/service/installations/token", "/service/installations/token?app=app-a&app=app-b"} {
		if status, msg := call((*Books).ServeToken, "POST", target, `{"organization":"acme"}`); status != 400 {
			t.Errorf("%s: %d %s", target, status, msg)
		}
	}
	if status, msg := call((*Books).ServeToken, "POST", "/service/installations/token?app=app-c", `{"organization":"acme"}`); status != 404 {
		t.Errorf("an unknown app: %d %s", status, msg)
	}
	if status, body := call((*Books).ServeToken, "POST", "/service/installations/token?app=app-a", `{"organization":"acme"}`); status != 200 {
		t.Fatalf("token of app-a: %d %s", status, body)
	}
	if status, msg := call((*Books).ServeInstallations, "DELETE", "/service/installations?organization=acme", ""); status != 400 || !strings.Contains(msg, "app-a, app-b") {
		t.Fatalf("delete without the app: %d %s", status, msg)
	}
	if status, _ := call((*Books).ServeInstallations, "DELETE", "/service/installations?organization=acme&app=app-a", ""); status != 200 {
		t.Fatalf("delete of app-a: %d", status)
	}
	if books.Of("app-b").Len() != 1 || books.Of("app-a").Len() != 0 {
		t.Fatal("the removal reached another app")
	}
}
