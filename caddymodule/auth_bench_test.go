package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

type nopHandler struct{}

func (nopHandler) ServeHTTP(http.ResponseWriter, *http.Request) error { return nil }

// benchmarkAuth serves requests carrying one token. Each request has its
// own replacer, vars and header map, as Caddy gives every request; they are
// made in batches outside the timer, since Caddy makes them before any
// handler runs.
func benchmarkAuth(b *testing.B, a caddyhttp.MiddlewareHandler) {
	tok := hsToken(b, emulatorClaims())
	base := httptest.NewRequest(http.MethodGet, "/api/projects", nil)
	w := httptest.NewRecorder()
	next := nopHandler{}
	const batch = 4096
	reqs := make([]*http.Request, batch)
	fill := func() {
		for i := range reqs {
			repl := caddy.NewReplacer()
			repl.Map(func(string) (any, bool) { return nil, false }) // as Caddy's HTTP placeholders
			ctx := context.WithValue(base.Context(), caddy.ReplacerCtxKey, repl)
			// Caddy's vars map holds a few entries before handlers run.
			vars := map[string]any{"client_ip": "127.0.0.1", "trusted_proxy": false}
			ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, vars)
			req := base.WithContext(ctx)
			req.Header = http.Header{"Authorization": {"Bearer " + tok}, "X-Service-User-Id": {"spoofed"}, "Accept": {"*/*"}}
			reqs[i] = req
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%batch == 0 {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		if err := a.ServeHTTP(w, reqs[i%batch], next); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthServeHTTP(b *testing.B) {
	b.Run("remembered", func(b *testing.B) {
		benchmarkAuth(b, provisionAuth(b, hsAuth()))
	})
	b.Run("fresh", func(b *testing.B) {
		zero := 0
		a := hsAuth()
		a.CacheSize = &zero
		benchmarkAuth(b, provisionAuth(b, a))
	})
	b.Run("remembered-no-claim-headers", func(b *testing.B) {
		a := hsAuth()
		a.ClaimHeaders = nil
		benchmarkAuth(b, provisionAuth(b, a))
	})
}
