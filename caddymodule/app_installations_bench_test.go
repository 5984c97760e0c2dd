package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/servicegate/servicegate/emulator"
	"github.com/servicegate/servicegate/installations"
)

// BenchmarkServiceAppDelivery compares a verified 1 KB delivery through
// service_app: checked with app_secret, against checked with the
// organization's installation secret and given its app token header.
func BenchmarkServiceAppDelivery(b *testing.B) {
	b.Setenv("XDG_DATA_HOME", b.TempDir())
	body := []byte(`{"events":[{"event":"project.translated","project":{"id":1,"name":"` + string(bytes.Repeat([]byte("x"), 900)) + `"}}]}`)
	for _, c := range []struct {
		name, descriptor, secret string
		inst                     bool
	}{
		{"app_secret", appDescriptor, "demo-app-secret", false},
		{"installations", installationsDescriptor, "secret-of-acme-installation", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "manifest.json")
			if err := os.WriteFile(path, []byte(c.descriptor), 0o600); err != nil {
				b.Fatal(err)
			}
			app := &ServiceApp{Descriptor: path, ClientID: "demo-client", ClientSecret: "demo-client-secret", Service: "http://127.0.0.1:1"}
			if c.inst {
				app.Installations = &AppInstallations{Key: testInstallationsKey}
			} else {
				app.AppSecrets = []string{c.secret}
			}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			if err := app.Provision(ctx); err != nil {
				b.Fatal(err)
			}
			defer app.Cleanup()
			if c.inst {
				now := time.Now()
				if err := app.inst.book.Install(&installations.Installation{OrganizationID: "1", Domain: "acme.example", AppID: "demo-app",
					AppSecret: c.secret, Token: installations.Token{AccessToken: "an-app-token", IssuedAt: now, Expires: now.Add(2 * time.Hour)}}); err != nil {
					b.Fatal(err)
				}
			}
			sig := emulator.SignDelivery(body, c.secret)
			w := httptest.NewRecorder()
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				return nil
			})
			const batch = 1024
			reqs := make([]*http.Request, batch)
			fill := func() {
				for i := range reqs {
					repl := caddy.NewReplacer()
					rctx := context.WithValue(context.Background(), caddy.ReplacerCtxKey, repl)
					rctx = context.WithValue(rctx, caddyhttp.VarsCtxKey, map[string]any{"client_ip": "127.0.0.1"})
					req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body)).WithContext(rctx)
					req.Header = http.Header{"Content-Type": {"application/json"}, "X-Service-Domain": {"acme.example"},
						"X-Module-Key": {"events-hook"}, "X-Service-Signature": {sig}}
					reqs[i] = req
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				if i%batch == 0 {
					b.StopTimer()
					fill()
					cpu -= benchCPUTime()
					b.StartTimer()
				}
				if err := app.ServeHTTP(w, reqs[i%batch], next); err != nil {
					b.Fatal(err)
				}
				if i%batch == batch-1 || i == b.N-1 {
					cpu += benchCPUTime()
				}
			}
			b.StopTimer()
			if c.inst && reqs[(b.N-1)%batch].Header.Get(appDefaultTokenHeader) != "an-app-token" {
				b.Fatal("the delivery went on without the app token")
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchCPUTime is the CPU time the process has used.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
