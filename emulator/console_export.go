package emulator

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/version"
)

// maxSearch bounds the text of a search of calls.
const maxSearch = 256

// callFilter is what GET calls selects: calls after an id, of an
// organization, a kind and a status class, and holding a text.
type callFilter struct {
	after           int64
	org, kind       string
	hasOrg, hasKind bool
	status          string
	text            string // lowercase
	format          string
}

// parseCallFilter reads the query of GET calls.
func parseCallFilter(q url.Values) (callFilter, error) {
	f := callFilter{org: q.Get("organization"), hasOrg: q.Has("organization"), kind: q.Get("kind"), hasKind: q.Has("kind"),
		status: q.Get("status"), format: q.Get("format")}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, failf(http.StatusBadRequest, "after must be a call's id, a positive integer.")
		}
		f.after = n
	}
	if f.status != "" && !slices.Contains([]string{"1xx", "2xx", "3xx", "4xx", "5xx", "none"}, f.status) {
		return f, failf(http.StatusBadRequest, "status must be a class such as 2xx or 4xx, or none for calls that got no answer.")
	}
	text := q.Get("q")
	if len(text) > maxSearch {
		return f, failf(http.StatusBadRequest, "q, the text to search for, is longer than %d bytes.", maxSearch)
	}
	f.text = strings.ToLower(strings.TrimSpace(text))
	switch f.format {
	case "", "json", "har", "ndjson":
	default:
		return f, failf(http.StatusBadRequest, "format must be json, har or ndjson, not %s.", respond.Quote(f.format))
	}
	return f, nil
}

// match reports whether e is one of the calls f selects.
func (f callFilter) match(e *callRecord) bool {
	if (f.hasOrg && e.org != f.org) || (f.hasKind && e.kind != f.kind) || (f.status != "" && statusClass(e.status) != f.status) {
		return false
	}
	return f.text == "" || e.holds(f.text)
}

// holds reports whether the call's address, headers or bodies, as the
// console shows them (secrets masked, so that a search cannot probe for a
// secret), hold text, in any case.
func (e *callRecord) holds(text string) bool {
	has := func(s string) bool { return strings.Contains(strings.ToLower(s), text) }
	message := func(m messageDetail) bool {
		for name, values := range m.Headers {
			for _, v := range values {
				if has(name + ": " + v) {
					return true
				}
			}
		}
		return has(m.Body)
	}
	if has(maskURL(e.url)) || message(detailOf(e.reqHeader, e.reqBody)) || message(detailOf(e.respHeader, e.respBody)) {
		return true
	}
	if a := e.app.detail(); a != nil {
		return has(a.Request.URL) || message(a.Request.messageDetail) || message(a.Answer.messageDetail)
	}
	return false
}

// detailOfCall is a call as GET calls/{id} shows it.
func detailOfCall(e *callRecord) callDetail {
	return callDetail{
		callItem:   itemOf(e),
		Request:    detailOf(e.reqHeader, e.reqBody),
		Answer:     detailOf(e.respHeader, e.respBody),
		Replayable: e.sent && e.reqBody.whole(),
		App:        e.app.detail(),
	}
}

// writeNDJSON writes calls, oldest first, one call's detail a line.
func writeNDJSON(w http.ResponseWriter, calls []*callRecord) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="emulator-calls.ndjson"`)
	h.Set("X-Content-Type-Options", "nosniff")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range calls {
		if enc.Encode(detailOfCall(e)) != nil {
			return // the client went away
		}
	}
}

// harLog and the types below are HAR 1.2, the archive browsers and
// proxies' inspectors export; members starting with _ are the console's
// own, as HAR allows.
type harEntry struct {
	Started  string      `json:"startedDateTime"`
	Time     float64     `json:"time"`
	Request  harRequest  `json:"request"`
	Response harResponse `json:"response"`
	Cache    struct{}    `json:"cache"`
	Timings  harTimings  `json:"timings"`
	ID       int64       `json:"_id"`
	Kind     string      `json:"_kind"`
	Org      string      `json:"_organization,omitempty"`
	Gateway  Verdict     `json:"_gateway"`
	Error    string      `json:"_error,omitempty"`
	App      *appDetail  `json:"_app,omitempty"`
}

type harRequest struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []harPair   `json:"cookies"`
	Headers     []harPair   `json:"headers"`
	QueryString []harPair   `json:"queryString"`
	PostData    *harContent `json:"postData,omitempty"`
	HeadersSize int         `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
}

type harResponse struct {
	Status      int        `json:"status"`
	StatusText  string     `json:"statusText"`
	HTTPVersion string     `json:"httpVersion"`
	Cookies     []harPair  `json:"cookies"`
	Headers     []harPair  `json:"headers"`
	Content     harContent `json:"content"`
	RedirectURL string     `json:"redirectURL"`
	HeadersSize int        `json:"headersSize"`
	BodySize    int64      `json:"bodySize"`
}

type harPair struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type harContent struct {
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
	Comment  string `json:"comment,omitempty"`
}

type harTimings struct {
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
}

// harPairs are a header's fields in name order.
func harPairs(h map[string][]string) []harPair {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]harPair, 0, len(names))
	for _, name := range names {
		for _, v := range h[name] {
			out = append(out, harPair{Name: name, Value: v})
		}
	}
	return out
}

// harContentOf is a body as HAR holds it: the text the page shows.
func harContentOf(m messageDetail) harContent {
	c := harContent{Size: m.Size, Text: m.Body}
	if v := m.Headers["Content-Type"]; len(v) > 0 {
		c.MimeType = v[0]
	}
	if m.Cut {
		c.Comment = "only the first 64 KiB were kept"
	}
	return c
}

func harEntryOf(e *callRecord) harEntry {
	d := detailOfCall(e)
	req := harRequest{Method: d.Method, URL: d.URL, HTTPVersion: "HTTP/1.1", Cookies: []harPair{},
		Headers: harPairs(d.Request.Headers), QueryString: []harPair{}, HeadersSize: -1, BodySize: d.Request.Size}
	if u, err := url.Parse(d.URL); err == nil {
		for name, values := range u.Query() {
			for _, v := range values {
				req.QueryString = append(req.QueryString, harPair{Name: name, Value: v})
			}
		}
		slices.SortFunc(req.QueryString, func(a, b harPair) int { return strings.Compare(a.Name, b.Name) })
	}
	if d.Request.Size > 0 {
		c := harContentOf(d.Request)
		req.PostData = &c
	}
	resp := harResponse{Status: d.Status, StatusText: http.StatusText(d.Status), HTTPVersion: "HTTP/1.1", Cookies: []harPair{},
		Headers: harPairs(d.Answer.Headers), Content: harContentOf(d.Answer), HeadersSize: -1, BodySize: d.Answer.Size}
	if v := d.Answer.Headers["Location"]; len(v) > 0 {
		resp.RedirectURL = v[0]
	}
	return harEntry{Started: d.Time, Time: d.DurationMS, Request: req, Response: resp,
		Timings: harTimings{Send: 0, Wait: d.DurationMS, Receive: 0},
		ID:      d.ID, Kind: d.Kind, Org: d.Organization, Gateway: d.Gateway, Error: d.Error, App: d.App}
}

// writeHAR writes calls, oldest first, as a HAR 1.2 archive, one entry at
// a time.
func writeHAR(w http.ResponseWriter, calls []*callRecord) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Disposition", `attachment; filename="emulator-calls.har"`)
	h.Set("X-Content-Type-Options", "nosniff")
	creator, _ := json.Marshal(map[string]string{"name": "servicegate service emulator", "version": version.Get()})
	if _, err := w.Write([]byte(`{"log":{"version":"1.2","creator":` + string(creator) + `,"pages":[],"entries":[`)); err != nil {
		return
	}
	for i, e := range calls {
		entry, err := json.Marshal(harEntryOf(e))
		if err != nil {
			continue
		}
		if i > 0 {
			entry = append([]byte{','}, entry...)
		}
		if _, err := w.Write(append(entry, '\n')); err != nil {
			return
		}
	}
	_, _ = w.Write([]byte("]}}\n"))
}
