package respond

import (
	"net/http"
	"strconv"
	"strings"
)

// WantsHTML reports whether the client sending h wants an HTML page rather
// than JSON: its Accept header names text/html with a non-zero weight, at
// least as heavy as the weight it gives application/json. Each weight is
// that of the most specific media range matching the type (RFC 9110
// §12.5.1: "application/json" before "application/*" before "*/*").
//
// Browsers name text/html first in the Accept of a page load; API
// clients send application/json, "*/*" or nothing, and get JSON. A
// wildcard alone never asks for a page.
func WantsHTML(h http.Header) bool {
	var html, json weight
	for _, value := range h["Accept"] {
		for part := range strings.SplitSeq(value, ",") {
			media, params, _ := strings.Cut(part, ";")
			media = strings.TrimSpace(media)
			typ, sub, ok := strings.Cut(media, "/")
			if !ok {
				continue
			}
			q := qValue(params)
			switch {
			case strings.EqualFold(typ, "text") && strings.EqualFold(sub, "html"):
				html.see(3, q)
			case strings.EqualFold(typ, "application") && strings.EqualFold(sub, "json"):
				json.see(3, q)
			case strings.EqualFold(typ, "application") && sub == "*":
				json.see(2, q)
			case typ == "*" && sub == "*":
				json.see(1, q)
			}
		}
	}
	return html.q > 0 && html.q >= json.q
}

// weight is the weight of the most specific media range seen for a type.
type weight struct {
	specificity int
	q           float64
}

func (w *weight) see(specificity int, q float64) {
	switch {
	case specificity > w.specificity:
		w.specificity, w.q = specificity, q
	case specificity == w.specificity:
		w.q = max(w.q, q)
	}
}

// qValue reads the q parameter of a media range's parameters: 1 when there
// is none, 0 when it is not a number from 0 to 1.
func qValue(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		name, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return 0
		}
		return f
	}
	return 1
}
