package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fromAddress is a client whose connections to the test Caddy leave from
// the loopback address source (any of 127.0.0.0/8), so that the gateway
// sees one source per address.
func fromAddress(source string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	target := "127.0.0.1:" + strconv.Itoa(e2eHTTPPort)
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp4", target)
		},
		MaxIdleConnsPerHost: 1,
	}}
}

// forgedInstalled posts an installed call with a forged app secret from
// client, and returns the status and body of the answer (0 when none
// came). It may run outside the test's goroutine.
func forgedInstalled(client *http.Client, svc *tenantsService, org int) (int, string) {
	body := svc.body(strconv.Itoa(org), "acme.example", "forged-secret-0123456789")
	resp, err := client.Post(e2eURL("/installed"), "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// budgetSite is the tenants site with unproved_budget set to budget.
func budgetSite(t *testing.T, svc *tenantsService, upstream, budget string) string {
	key := `key "` + testInstallationsKey + `"`
	return strings.Replace(svc.site(t, upstream), key, key+"\n\t\t\tunproved_budget "+budget, 1)
}

// TestE2EForgedCallsFromManyAddressesDoNotStarveExemptInstalls: forged
// installed calls from many loopback addresses spend the overall budget of
// unproved calls, and the 429s say which budget was spent (this source's,
// or the overall one); while they go on, every genuine install the
// service makes from an exempt address succeeds. A genuine install from an
// address that is not exempt finds the overall budget spent.
func TestE2EForgedCallsFromManyAddressesDoNotStarveExemptInstalls(t *testing.T) {
	svc := newTenantsService(t)
	app := newLifecycleUpstream(t)
	startCaddy(t, budgetSite(t, svc, app.URL, "2 5 exempt 127.0.0.1"))

	// One source spends its own budget: its third call is refused for it.
	first := fromAddress("127.0.0.2")
	for i, want := range []int{http.StatusForbidden, http.StatusForbidden, http.StatusTooManyRequests} {
		status, body := forgedInstalled(first, svc, 100+i)
		if status != want || (want == http.StatusTooManyRequests && !strings.Contains(body, "came from this address: its budget")) {
			t.Fatalf("forged call %d from one address: %d %s", i, status, body)
		}
	}
	// Other sources spend the rest of the overall budget: then a fresh
	// source is refused for the overall budget.
	overall := ""
	for i := 3; i < 10 && overall == ""; i++ {
		if status, body := forgedInstalled(fromAddress(fmt.Sprintf("127.0.0.%d", i)), svc, 100+i); status == http.StatusTooManyRequests {
			overall = body
		}
	}
	if !strings.Contains(overall, "came from all addresses together: the overall budget") {
		t.Fatalf("no forged call was refused for the overall budget: %q", overall)
	}
	// A genuine install from an address that is not exempt is refused.
	if call, err := svc.InstallApp(context.Background(), fromAddress("127.0.0.200"), e2eURL("/installed"), "initech.example", svc.URL); err != nil ||
		call.Status != http.StatusTooManyRequests || !strings.Contains(string(call.Body), "overall budget") {
		t.Fatalf("a genuine install from a source that is not exempt, the overall budget spent: %+v %v", call, err)
	}

	// Forged calls from 60 addresses go on while the service installs 12
	// times from its exempt address.
	var forged sync.WaitGroup
	var limited atomic.Int64
	stop := make(chan struct{})
	for i := range 60 {
		client := fromAddress(fmt.Sprintf("127.0.1.%d", i+1))
		forged.Go(func() {
			for n := range 50 {
				select {
				case <-stop:
					return
				default:
				}
				if status, _ := forgedInstalled(client, svc, 1000+i*100+n%100); status == http.StatusTooManyRequests {
					limited.Add(1)
				}
			}
		})
	}
	service := fromAddress("127.0.0.1")
	domains := []string{"acme.example", "globex.example", "initech.example"}
	for i := range 12 {
		call, err := svc.InstallApp(context.Background(), service, e2eURL("/installed"), domains[i%3], svc.URL)
		if err != nil || !call.OK() {
			t.Errorf("genuine install %d (%s) from the exempt address: %d %s %v", i, domains[i%3], call.Status, call.Body, err)
		}
	}
	close(stop)
	forged.Wait()
	if limited.Load() == 0 {
		t.Error("no forged call was limited while the genuine installs went on")
	}
	for _, d := range domains {
		secret, _ := svc.AppSecret(d)
		if status, _ := deliverFor(t, d, secret, nil); status != http.StatusOK {
			t.Errorf("%s's last installation is not the one stored: %d", d, status)
		}
	}
}

// TestMeasureGenuineInstallsUnderForgedLoad measures, for the README, how
// many genuine installs a minute get through while forged installed calls
// arrive at a steady rate from 60 rotating loopback addresses, with the
// default budget (10 a source, 100 overall, a minute), with and without
// exempt for the service's address. It runs only with
// SERVICEGATE_MEASURE_BUDGET set (a minute per case, or
// SERVICEGATE_MEASURE_BUDGET_SECONDS), and reports; it fails on nothing.
//
//	SERVICEGATE_MEASURE_BUDGET=1 go test -run TestMeasureGenuineInstallsUnderForgedLoad -v ./caddymodule
func TestMeasureGenuineInstallsUnderForgedLoad(t *testing.T) {
	if os.Getenv("SERVICEGATE_MEASURE_BUDGET") == "" {
		t.Skip("a measurement: set SERVICEGATE_MEASURE_BUDGET=1")
	}
	seconds, _ := strconv.Atoi(os.Getenv("SERVICEGATE_MEASURE_BUDGET_SECONDS"))
	if seconds <= 0 {
		seconds = 60
	}
	forgedPerSecond, _ := strconv.Atoi(os.Getenv("SERVICEGATE_MEASURE_FORGED_PER_SECOND"))
	if forgedPerSecond <= 0 {
		forgedPerSecond = 4
	}
	const installsPerMinute = 12
	for _, budget := range []string{"10 100", "10 100 exempt 127.0.0.1"} {
		svc := newTenantsService(t)
		app := newLifecycleUpstream(t)
		startCaddy(t, budgetSite(t, svc, app.URL, budget))
		clients := make([]*http.Client, 60)
		for i := range clients {
			clients[i] = fromAddress(fmt.Sprintf("127.0.2.%d", i+1))
		}
		done := make(chan struct{})
		var forged sync.WaitGroup
		forged.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(forgedPerSecond))
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				case <-tick.C:
					forged.Go(func() { forgedInstalled(clients[n%len(clients)], svc, 5000+n) })
				}
			}
		})
		service := fromAddress("127.0.0.1")
		domains := []string{"acme.example", "globex.example", "initech.example"}
		tick := time.NewTicker(time.Minute / installsPerMinute)
		end := time.After(time.Duration(seconds) * time.Second)
		tried, through := 0, 0
	measure:
		for {
			select {
			case <-end:
				break measure
			case <-tick.C:
				call, err := svc.InstallApp(context.Background(), service, e2eURL("/installed"), domains[tried%3], svc.URL)
				tried++
				if err == nil && call.OK() {
					through++
				}
			}
		}
		tick.Stop()
		close(done)
		forged.Wait()
		t.Logf("unproved_budget %s: forged %d/s from 60 addresses for %ds: %d of %d genuine installs got through (%.1f a minute)",
			budget, forgedPerSecond, seconds, through, tried, float64(through)*60/float64(seconds))
	}
}
