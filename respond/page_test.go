package respond

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestWritePage(t *testing.T) {
	rec := httptest.NewRecorder()
	WritePage(rec, http.StatusPaymentRequired, Page{
		Title:    "Sub <needed>",
		Message:  `Pay "now" & <script>alert(1)</script>`,
		Link:     "https://service.example/checkout?a=1&b=<2>",
		LinkText: "Subscribe & go",
		Note:     "small <print>",
	})
	if rec.Code != http.StatusPaymentRequired {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		"<title>Sub &lt;needed&gt;</title>",
		"<h1>Sub &lt;needed&gt;</h1>",
		"<p>Pay &#34;now&#34; &amp; &lt;script&gt;alert(1)&lt;/script&gt;</p>",
		`<a href="https://service.example/checkout?a=1&amp;b=&lt;2&gt;">Subscribe &amp; go</a>`,
		"<small>small &lt;print&gt;</small>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<2>") {
		t.Fatalf("unescaped text in the page:\n%s", body)
	}
	h := rec.Header()
	for name, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Length":          strconv.Itoa(len(body)),
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
		"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
}

func TestPageLinks(t *testing.T) {
	tests := []struct {
		link string
		want bool
	}{
		{"/settings", true},
		{"/a?b=c#d", true},
		{"https://service.example/pay", true},
		{"HTTP://service.example/pay", true},
		{"", false},
		{"javascript:alert(1)", false},
		{"JavaScript://%0Aalert(1)", false},
		{"data:text/html,<b>x</b>", false},
		{"//evil.example/x", false},
		{"/\\evil.example", false},
		{"/a\nb", false},
		{"https://", false},
		{"relative/path", false},
	}
	for _, tt := range tests {
		page := Page{Title: "t", Message: "m", Link: tt.link, LinkText: "go"}.HTML()
		if got := strings.Contains(page, "<a href="); got != tt.want {
			t.Errorf("link %q shown %v, want %v", tt.link, got, tt.want)
		}
	}
	if page := (Page{Title: "t", Link: "/x"}).HTML(); !strings.Contains(page, `<a href="/x">Continue</a>`) {
		t.Errorf("default link text missing: %s", page)
	}
	if page := (Page{Title: "t", Message: "m"}).HTML(); strings.Contains(page, "<small>") || strings.Contains(page, "<a ") {
		t.Errorf("a page without link or note has one: %s", page)
	}
}

func FuzzPage(f *testing.F) {
	f.Add("Sign-in declined", "You declined", "/settings")
	f.Add("<t>", "<script>", "javascript:alert(1)")
	f.Add("a", "b", "https://x.example/?a=\"><script>")
	f.Fuzz(func(t *testing.T, title, message, link string) {
		page := Page{Title: title, Message: message, Link: link, LinkText: "go"}.HTML()
		// The page's own markup is the only markup in it.
		if n := strings.Count(page, "<"); n != strings.Count(Page{Title: "t", Message: "m", Link: safeLinkOr(link), LinkText: "go"}.HTML(), "<") {
			t.Fatalf("the texts added markup: %s", page)
		}
	})
}

// safeLinkOr is a harmless link that the page shows when it shows link.
func safeLinkOr(link string) string {
	if linkAllowed(link) {
		return "/"
	}
	return ""
}

// TestPageAction: a page's button POSTs only to a same-site path.
func TestPageAction(t *testing.T) {
	got := Page{Title: "t", Action: "/out?a=1&b=2", ActionText: "Sign <out>"}.HTML()
	if !strings.Contains(got, `<form method="post" action="/out?a=1&amp;b=2"><button type="submit">Sign &lt;out&gt;</button></form>`) {
		t.Errorf("page: %s", got)
	}
	for _, action := range []string{"//evil.example/out", "https://evil.example/out", "javascript:alert(1)", "/\\evil"} {
		if got := (Page{Title: "t", Action: action, ActionText: "x"}).HTML(); strings.Contains(got, "<form") {
			t.Errorf("action %q kept: %s", action, got)
		}
	}
}
