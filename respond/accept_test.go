package respond

import (
	"net/http"
	"strings"
	"testing"
)

func TestWantsHTML(t *testing.T) {
	tests := []struct {
		name   string
		accept []string // nil: no Accept header
		want   bool
	}{
		{"no header", nil, false},
		{"empty header", []string{""}, false},
		{"curl and fetch", []string{"*/*"}, false},
		{"JSON only", []string{"application/json"}, false},
		{"axios", []string{"application/json, text/plain, */*"}, false},
		{"HTML only", []string{"text/html"}, true},
		{"case of the type", []string{"TEXT/HTML"}, true},
		{"Firefox and Safari page load", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, true},
		{"Chrome page load", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"}, true},
		{"Chrome image load", []string{"image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"}, false},
		{"JSON weighs less", []string{"application/json;q=0.9, text/html"}, true},
		{"HTML weighs less", []string{"application/json, text/html;q=0.5"}, false},
		{"HTML weighs much less", []string{"application/json, text/html;q=0.1"}, false},
		{"equal weights", []string{"application/json, text/html"}, true},
		{"q=0 refuses HTML", []string{"text/html;q=0"}, false},
		{"q=0.000 refuses HTML", []string{"text/html;q=0.000, */*"}, false},
		{"q not a number", []string{"text/html;q=abc"}, false},
		{"q over 1", []string{"text/html;q=2"}, false},
		{"q negative", []string{"text/html;q=-1"}, false},
		{"q empty", []string{"text/html;q="}, false},
		{"spaces around parameters", []string{"text/html ; q=0.7, */*;q=0.1"}, true},
		{"Q in capitals", []string{"text/html;Q=0.2, application/json;Q=0.4"}, false},
		{"other parameters", []string{"text/html;level=1;q=0.8, application/json;q=0.5"}, true},
		{"wildcard heavier than HTML", []string{"text/html;q=0.5, */*"}, false},
		{"application wildcard heavier", []string{"text/html;q=0.5, application/*"}, false},
		{"JSON refused, wildcard allowed", []string{"text/html;q=0.2, application/json;q=0, */*"}, true},
		{"application/* more specific than */*", []string{"text/html;q=0.5, application/*;q=0.4, */*"}, true},
		{"text wildcard is not a page", []string{"text/*"}, false},
		{"several header lines", []string{"application/json;q=0.5", "text/html"}, true},
		{"several lines, JSON heavier", []string{"text/html;q=0.3", "application/json"}, false},
		{"garbage", []string{";;,,q=1,text,/,html/"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.accept != nil {
				h["Accept"] = tt.accept
			}
			if got := WantsHTML(h); got != tt.want {
				t.Errorf("WantsHTML(%q) = %v, want %v", tt.accept, got, tt.want)
			}
		})
	}
}

func FuzzWantsHTML(f *testing.F) {
	f.Add("text/html,application/xhtml+xml,*/*;q=0.8")
	f.Add("application/json;q=0.9, text/html;q=")
	f.Add(";;,,q=1")
	f.Add("text/html;q=0.5, application/*;q=0.4, */*")
	f.Fuzz(func(t *testing.T, accept string) {
		got := WantsHTML(http.Header{"Accept": {accept}})
		if got && !strings.Contains(strings.ToLower(accept), "text/html") {
			t.Fatalf("HTML chosen for %q", accept)
		}
		// Naming JSON first with full weight never asks for less JSON.
		if WantsHTML(http.Header{"Accept": {accept + ", application/json"}}) &&
			!WantsHTML(http.Header{"Accept": {accept}}) {
			t.Fatalf("adding application/json to %q made HTML wanted", accept)
		}
	})
}
