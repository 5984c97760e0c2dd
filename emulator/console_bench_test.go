package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
)

// benchApp answers every call in memory: 1 KiB, or 100 KiB (over what
// the console keeps of a body) for every tenth.
type benchApp struct{ n int }

func (a *benchApp) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	a.n++
	size := 1 << 10
	if a.n%10 == 0 {
		size = 100 << 10
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("x"), size))), Request: r}, nil
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkConsoleCallLog100k sends 100,000 calls through the console
// (two of three sent by the emulator with a 2 KiB body, answered 1 KiB or
// 100 KiB; one of three answered by it, a token request) and reports the
// live heap once the log first holds keep calls and after all of them:
// the log, and so memory, stays where keep puts it. It fails when the
// heap after 100,000 calls is more than 1.5 times (plus 1 MiB) the heap
// at keep.
func BenchmarkConsoleCallLog100k(b *testing.B) {
	const calls = 100_000
	for _, keep := range []int{100, 1000} {
		b.Run("keep="+strconv.Itoa(keep), func(b *testing.B) {
			for range b.N {
				cfg := testConfig(&clock{now: testStart})
				cfg.Console = ConsoleConfig{Keep: keep, App: "http://app.test", Transport: &benchApp{}}
				s, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				body := bytes.Repeat([]byte("y"), 2<<10)
				header := http.Header{"Content-Type": {"application/json"}}
				call := func(i int) {
					if i%3 == 2 {
						do(s, tokenRequestOf(`{"grant_type":"refresh_token","client_id":"demo-client","client_secret":"demo-client-secret","refresh_token":"r"}`))
						return
					}
					ctx := withCall(context.Background(), callMeta{kind: kindDelivery, org: "acme.example"})
					if _, err := s.console.send(ctx, http.MethodPost, "http://app.test/webhooks", header.Clone(), body); err != nil {
						b.Fatal(err)
					}
				}
				for i := range keep {
					call(i)
				}
				atKeep := heapInUse()
				for i := keep; i < calls; i++ {
					call(i)
				}
				after := heapInUse()
				if n := len(s.console.log.ring); n != keep || s.console.log.lastID != calls {
					b.Fatalf("the log holds %d calls of %d, want %d", n, s.console.log.lastID, keep)
				}
				b.ReportMetric(float64(atKeep)/(1<<20), "MiB-at-keep")
				b.ReportMetric(float64(after)/(1<<20), "MiB-after-100k")
				if after > atKeep*3/2+1<<20 {
					b.Fatalf("the heap grew from %s at keep to %s after %d calls", mib(atKeep), mib(after), calls)
				}
			}
		})
	}
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
