package respond

import (
	"html"
	"net/http"
	"strconv"
	"strings"
)

// Page is a small HTML page for a person in a browser: a title, a message,
// and optionally a link and a note. Every text is escaped.
type Page struct {
	// Title is the page's title and heading.
	Title string
	// Message says what happened, for the person reading it.
	Message string
	// Link is where the link of the page goes: a same-site path or an
	// http(s) URL. Any other link (javascript:, //host, …) is left out.
	Link string
	// LinkText is the text of the link, "Continue" when empty.
	LinkText string
	// Note is a line in small print under the rest.
	Note string
	// Action, when set, is a same-site path the page's button POSTs to
	// (a form without fields); ActionText is the button's text.
	Action, ActionText string
}

// SetPageHeaders sets the headers of an HTML page that servicegate writes:
// its type, no caching, no content sniffing, no framing, no referrer, and
// a Content-Security-Policy that lets the page load nothing at all.
func SetPageHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
}

// WritePage writes p as a complete answer with status.
func WritePage(w http.ResponseWriter, status int, p Page) {
	body := p.HTML()
	SetPageHeaders(w.Header())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// HTML returns the page's markup.
func (p Page) HTML() string {
	var b strings.Builder
	title := html.EscapeString(p.Title)
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>")
	b.WriteString(title)
	b.WriteString("</title></head>\n<body><h1>")
	b.WriteString(title)
	b.WriteString("</h1><p>")
	b.WriteString(html.EscapeString(p.Message))
	b.WriteString("</p>\n")
	if linkAllowed(p.Link) {
		text := p.LinkText
		if text == "" {
			text = "Continue"
		}
		b.WriteString(`<p><a href="`)
		b.WriteString(html.EscapeString(p.Link))
		b.WriteString(`">`)
		b.WriteString(html.EscapeString(text))
		b.WriteString("</a></p>\n")
	}
	if strings.HasPrefix(p.Action, "/") && linkAllowed(p.Action) {
		b.WriteString(`<form method="post" action="`)
		b.WriteString(html.EscapeString(p.Action))
		b.WriteString(`"><button type="submit">`)
		b.WriteString(html.EscapeString(p.ActionText))
		b.WriteString("</button></form>\n")
	}
	if p.Note != "" {
		b.WriteString("<p><small>")
		b.WriteString(html.EscapeString(p.Note))
		b.WriteString("</small></p>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// linkAllowed keeps links that go to this site's paths or to an http(s)
// address, and nothing a browser would run or read as another host.
func linkAllowed(link string) bool {
	if link == "" || strings.ContainsAny(link, "\\\x00\t\r\n") {
		return false
	}
	if strings.HasPrefix(link, "/") {
		return !strings.HasPrefix(link, "//")
	}
	scheme, rest, ok := strings.Cut(link, "://")
	return ok && rest != "" && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}
