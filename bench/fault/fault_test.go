//go:build fault

package fault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scale picks the short or the long version of a load.
func scale[T any](short, long T) T {
	if testing.Short() {
		return short
	}
	return long
}

// subscriptionSites is service_auth + service_subscription against the
// service stand-in, with extra sub-directives for service_subscription.
func subscriptionSites(app string, extra string) string {
	return fmt.Sprintf(`http://:{port} {
	route /api/* {
		service_auth {
			hs256_secret %s
		}
		service_subscription {
			app_identifier demo-app
			base_url http://127.0.0.1:%d
			%s
		}
		reverse_proxy %s
	}
}
`, secret, servicePort, extra, app)
}

// The service goes down in the middle of a load and comes back. Answers
// last one second, so entries lapse during the outage and must be asked
// again: no request may be answered 402 because of the outage, and on_error
// decides what the others get.
func TestServiceOutageUnderLoad(t *testing.T) {
	tests := []struct {
		onError string
		allowed []int // during the outage
		needs   int   // a status that must appear during the outage (0: none)
	}{
		{"deny", []int{http.StatusOK, http.StatusServiceUnavailable}, http.StatusServiceUnavailable},
		{"allow", []int{http.StatusOK}, 0},
		{"stale 1m", []int{http.StatusOK}, 0},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.onError, " ", "_"), func(t *testing.T) {
			svc := newService(t, time.Second)
			app := upstream(t, nil)
			startCaddy(t, subscriptionSites(app, "on_error "+tt.onError+"\n\t\t\ttimeout 2s"))

			const orgs = 20
			toks := make([]string, orgs)
			for i := range toks {
				toks[i] = token(t, fmt.Sprintf("org%d.example", i), i+1)
			}
			c := client(8)
			for i, tok := range toks {
				if code, err := get(c, "/api/projects", tok); err != nil || code != http.StatusOK {
					t.Fatalf("organization %d before the outage: %d, %v", i, code, err)
				}
			}

			// 0 up, 1 down, 2 up again; 3 holds the requests that
			// straddled a switch, held only to "never 402".
			var phase atomic.Int32
			tallies := [4]*tally{{}, {}, {}, {}}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				load(4, 1_000_000, stop, func(w, i int) {
					p := phase.Load()
					code, err := get(c, "/api/projects", toks[(w*7+i)%orgs])
					if phase.Load() != p {
						p = 3
					}
					tallies[p].add(code, err)
				})
			}()
			time.Sleep(scale(time.Second, 3*time.Second))
			svc.down()
			phase.Store(1)
			time.Sleep(scale(2500*time.Millisecond, 6*time.Second))
			svc.up()
			time.Sleep(500 * time.Millisecond) // answers in flight at the switch
			phase.Store(2)
			time.Sleep(scale(2*time.Second, 4*time.Second))
			close(stop)
			<-done

			for p, tl := range tallies {
				t.Logf("phase %d: %s", p, tl)
				if n := tl.count(http.StatusPaymentRequired); n > 0 {
					t.Errorf("phase %d: %d requests answered 402, though every organization has paid", p, n)
				}
			}
			if !tallies[0].only(http.StatusOK) {
				t.Errorf("before the outage: %s, want only 200", tallies[0])
			}
			if !tallies[2].only(http.StatusOK) {
				t.Errorf("after the outage: %s, want only 200", tallies[2])
			}
			if !tallies[1].only(tt.allowed...) {
				t.Errorf("during the outage with on_error %s: %s, want only %v", tt.onError, tallies[1], tt.allowed)
			}
			if tt.needs != 0 && tallies[1].count(tt.needs) == 0 {
				t.Errorf("during the outage with on_error %s: no %d at all (%s): lapsed entries were not asked again", tt.onError, tt.needs, tallies[1])
			}
			// After the outage every organization is let in again: errors
			// were not cached as unpaid.
			for i, tok := range toks {
				if code, err := get(c, "/api/projects", tok); err != nil || code != http.StatusOK {
					t.Errorf("organization %d after the outage: %d, %v", i, code, err)
				}
			}
		})
	}
}

// The service answers slowly: a request waits at most the configured
// timeout, then on_error decides.
func TestSlowService(t *testing.T) {
	tests := []struct {
		onError string
		want    int
	}{
		{"deny", http.StatusServiceUnavailable},
		{"allow", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.onError, func(t *testing.T) {
			svc := newService(t, time.Hour)
			svc.delay.Store(int64(time.Minute))
			app := upstream(t, nil)
			startCaddy(t, subscriptionSites(app, "on_error "+tt.onError+"\n\t\t\ttimeout 500ms"))

			c := client(4)
			var wg sync.WaitGroup
			results := make([]string, 5)
			for i := range results {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					start := time.Now()
					code, err := get(c, "/api/projects", token(t, fmt.Sprintf("slow%d.example", i), 100+i))
					took := time.Since(start)
					// 500ms timeout; the bound leaves room for a loaded machine
					// and stays far below the service's one-minute delay.
					if err != nil || code != tt.want || took > 5*time.Second {
						results[i] = fmt.Sprintf("request %d: %d, %v after %s; want %d within the timeout", i, code, err, took, tt.want)
					}
				}(i)
			}
			wg.Wait()
			for _, r := range results {
				if r != "" {
					t.Error(r)
				}
			}
			if svc.queries.Load() == 0 {
				t.Error("the service was never asked")
			}
		})
	}
}

// 10 000 distinct organizations, each asked once: one query each, every
// request let in, and Caddy's memory recorded.
func TestManyOrganizations(t *testing.T) {
	n := scale(3000, 10_000)
	svc := newService(t, time.Hour)
	app := upstream(t, nil)
	cd := startCaddy(t, subscriptionSites(app, ""))

	toks := make([]string, n)
	for i := range toks {
		toks[i] = token(t, fmt.Sprintf("org%05d.example", i), 1000+i)
	}
	c := client(8)
	if code, err := get(c, "/api/projects", toks[0]); err != nil || code != http.StatusOK {
		t.Fatalf("first request: %d, %v", code, err)
	}
	before := cd.peakRSS()
	var next atomic.Int64
	next.Store(1)
	var tl tally
	stop := make(chan struct{})
	timer := time.AfterFunc(3*time.Minute, func() { close(stop) })
	defer timer.Stop()
	load(8, n, stop, func(int, int) {
		i := int(next.Add(1)) - 1
		if i >= n {
			return
		}
		tl.add(get(c, "/api/projects", toks[i]))
	})
	after := cd.peakRSS()
	t.Logf("%d organizations: %s; %d subscription queries; caddy peak RSS %d MiB before, %d MiB after",
		n, &tl, svc.queries.Load(), before>>20, after>>20)
	if got := tl.count(http.StatusOK); got != n-1 || !tl.only(http.StatusOK) {
		t.Errorf("%d of %d requests let in (%s)", got, n-1, &tl)
	}
	if q := svc.queries.Load(); q != int64(n) {
		t.Errorf("%d subscription queries for %d organizations asked once each", q, n)
	}
	// A generous bound: a cache entry is a key and a date, not a response.
	if grew := after - before; grew > 256<<20 {
		t.Errorf("peak RSS grew by %d MiB for %d organizations", grew>>20, n)
	}
	// Organizations seen first may have left a bounded cache; either way
	// they are let in.
	for i := 0; i < 50; i++ {
		if code, err := get(c, "/api/projects", toks[i]); err != nil || code != http.StatusOK {
			t.Errorf("organization %d asked again: %d, %v", i, code, err)
		}
	}
}

// With a small cache_size, organizations seen long ago leave the cache
// and are asked again: the cache is bounded, and still lets them in.
func TestCacheBounded(t *testing.T) {
	const size, n, again = 500, 2000, 100
	svc := newService(t, time.Hour)
	app := upstream(t, nil)
	startCaddy(t, subscriptionSites(app, fmt.Sprintf("cache_size %d", size)))
	c := client(8)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = token(t, fmt.Sprintf("lru%05d.example", i), 20_000+i)
	}
	var next atomic.Int64
	var tl tally
	load(8, n, nil, func(int, int) {
		if i := int(next.Add(1)) - 1; i < n {
			tl.add(get(c, "/api/projects", toks[i]))
		}
	})
	first := svc.queries.Load()
	for i := 0; i < again; i++ {
		tl.add(get(c, "/api/projects", toks[i]))
	}
	second := svc.queries.Load() - first
	t.Logf("cache_size %d, %d organizations: %s; %d queries, then %d for the first %d again", size, n, &tl, first, second, again)
	if !tl.only(http.StatusOK) {
		t.Errorf("answers %s, want only 200", &tl)
	}
	if first != n {
		t.Errorf("%d queries for %d organizations asked once each", first, n)
	}
	if second < again/2 {
		t.Errorf("only %d of the %d oldest organizations were asked again: the cache holds more than cache_size %d", second, again, size)
	}
}

// Slow clients send job bodies byte by byte to service_limits and then go
// away: Caddy's goroutines come back to where they were.
func TestSlowClientsLimits(t *testing.T) {
	var received atomic.Int64
	app := upstreamNoKeepAlive(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err == nil {
			received.Add(1)
		}
		_, _ = w.Write(b)
	})
	cd := startCaddy(t, fmt.Sprintf(`http://:{port} {
	route /file-format/* {
		service_limits
		reverse_proxy %s
	}
}
`, app))
	c := client(2)
	job := []byte(`{"jobType":"parse-file","file":{"content":"aGVsbG8="}}`)
	post := func() (int, error) {
		resp, err := c.Post(siteURL("/file-format/parse"), "application/json", bytes.NewReader(job))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Fatalf("a normal job: %d, %v", code, err)
	}
	c.CloseIdleConnections()
	base := cd.goroutines()

	clients := scale(20, 50)
	crawl := scale(2*time.Second, 5*time.Second)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr(httpPort))
			if err != nil {
				t.Errorf("slow client %d: %v", i, err)
				return
			}
			defer conn.Close()
			// Half announce their length, half send chunks of unknown length.
			head := "POST /file-format/parse HTTP/1.1\r\nHost: " + addr(httpPort) + "\r\nContent-Type: application/json\r\n"
			if i%2 == 0 {
				head += "Content-Length: 100000\r\n\r\n"
			} else {
				head += "Transfer-Encoding: chunked\r\n\r\n"
			}
			if _, err := conn.Write([]byte(head)); err != nil {
				return
			}
			end := time.Now().Add(crawl)
			for time.Now().Before(end) {
				b := []byte("x")
				if i%2 == 1 {
					b = []byte("1\r\nx\r\n")
				}
				if _, err := conn.Write(b); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}(i)
	}
	time.Sleep(crawl / 2)
	during := cd.goroutines()
	wg.Wait()
	after := cd.settleGoroutines(base+5, 15*time.Second)
	t.Logf("caddy goroutines: %d before, %d with %d slow clients, %d after they left; peak RSS %d MiB", base, during, clients, after, cd.peakRSS()>>20)
	if after > base+5 {
		t.Errorf("caddy has %d goroutines after the slow clients left, %d before", after, base)
	}
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Errorf("a normal job after the slow clients: %d, %v", code, err)
	}
	// The slow clients went away mid-body: the app read two whole jobs,
	// the normal ones, and no cut-off body as if it were whole.
	if n := received.Load(); n != 2 {
		t.Errorf("the app read %d whole jobs, want the 2 normal ones", n)
	}
}

// The app closes its connection in the middle of its answer: the client
// never gets a complete-looking 200, Caddy keeps serving, and nothing is
// left running.
func TestAppClosesMidResponse(t *testing.T) {
	var calls atomic.Int64
	app := upstreamNoKeepAlive(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
		_, _ = buf.WriteString(`{"data":{"strings":[` + strings.Repeat(`{"identifier":"a","text":"b"},`, 30))
		_ = buf.Flush()
	})
	cd := startCaddy(t, limitsAndWebhookSite(app))
	c := client(4)
	base := cd.goroutines()

	var mu sync.Mutex
	var problems []string
	var tl tally
	load(4, scale(10, 50), nil, func(w, i int) {
		resp, err := c.Post(siteURL("/file-format/parse"), "application/json", strings.NewReader(`{"jobType":"parse-file"}`))
		if err != nil {
			tl.add(0, err) // the connection may go with the app's
			return
		}
		body, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		tl.add(resp.StatusCode, readErr)
		if resp.StatusCode == http.StatusOK && readErr == nil {
			mu.Lock()
			problems = append(problems, fmt.Sprintf("a complete 200 of %d bytes although the app hung up", len(body)))
			mu.Unlock()
		}
		if resp.StatusCode == http.StatusBadGateway {
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("502 without a JSON error message: %q", body))
				mu.Unlock()
			}
		}
	})
	t.Logf("answers while the app hung up: %s", &tl)
	for _, p := range problems {
		t.Error(p)
	}
	if calls.Load() == 0 {
		t.Error("no job reached the app")
	}
	c.CloseIdleConnections()
	if after := cd.settleGoroutines(base+5, 15*time.Second); after > base+5 {
		t.Errorf("caddy has %d goroutines after the app's hang-ups, %d before", after, base)
	}
	resp, err := c.Get(siteURL("/nothing-here"))
	if err != nil {
		t.Fatalf("caddy stopped serving: %v", err)
	}
	resp.Body.Close()
}

// Config reloads through the admin API while requests flow: no request
// is dropped, and the subscription cache survives the reloads.
func TestReloadUnderLoad(t *testing.T) {
	tests := []struct {
		name         string
		subscription bool
	}{
		{"auth", false},
		{"auth+subscription", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := newService(t, time.Hour)
			app := upstream(t, nil)
			sites := func(leeway string) string {
				s := subscriptionSites(app, "")
				if !tt.subscription {
					s = fmt.Sprintf("http://:{port} {\n\troute /api/* {\n\t\tservice_auth {\n\t\t\ths256_secret %s\n\t\t}\n\t\treverse_proxy %s\n\t}\n}\n", secret, app)
				}
				// Each reload changes the config, or Caddy would skip it.
				return strings.Replace(s, "hs256_secret", "leeway "+leeway+"\n\t\t\ths256_secret", 1)
			}
			startCaddy(t, sites("30s"))
			tok := token(t, "reload.example", 7)
			c := client(8)
			if code, err := get(c, "/api/projects", tok); err != nil || code != http.StatusOK {
				t.Fatalf("first request: %d, %v", code, err)
			}

			var tl tally
			var retried atomic.Int64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				load(4, 1_000_000, stop, func(int, int) {
					code, err := get(c, "/api/projects", tok)
					if err != nil {
						// As the new config takes the listener over, Caddy
						// may close a connection the old server had just
						// accepted, before any answer; a client sends an
						// idempotent request again once, as browsers do.
						// A second failure counts.
						retried.Add(1)
						code, err = get(c, "/api/projects", tok)
					}
					tl.add(code, err)
				})
			}()
			reloads := scale(5, 15)
			for i := 0; i < reloads; i++ {
				time.Sleep(300 * time.Millisecond)
				if err := reload(sites(fmt.Sprintf("%ds", 31+i))); err != nil {
					t.Errorf("reload %d: %v", i+1, err)
				}
			}
			time.Sleep(300 * time.Millisecond)
			close(stop)
			<-done
			t.Logf("%d reloads: %s; %d requests sent again after a transport error; %d subscription queries", reloads, &tl, retried.Load(), svc.queries.Load())
			if !tl.only(http.StatusOK) || tl.count(http.StatusOK) == 0 {
				t.Errorf("under reloads: %s, want only 200s", &tl)
			}
			if q := svc.queries.Load(); tt.subscription && q != 1 {
				t.Errorf("%d subscription queries for one organization across %d reloads; the cache should survive them", q, reloads)
			}
		})
	}
}
