// Package cluster runs servicegate as a cluster: two Caddy processes built
// from ./cmd/caddy sharing one redis-server, and a third Caddy balancing
// round robin between them, in front of a stand-in of the service that
// counts subscription queries. Every port is chosen free on 127.0.0.1.
package cluster

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/servicegate/servicegate/cluster/redistest"
	"github.com/servicegate/servicegate/emulator"
)

// secret is shared by service_auth and the tokens the tests mint; it
// protects nothing outside these tests.
const secret = "servicegate-cluster-secret-0123456789abcdef"

var caddyBin string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if bin := os.Getenv("SERVICEGATE_CADDY"); bin != "" {
		caddyBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "servicegate-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	caddyBin = filepath.Join(dir, "caddy")
	if !testingShort() && redistest.Binary() != "" {
		cmd := exec.Command("go", "build", "-o", caddyBin, "./cmd/caddy")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building ./cmd/caddy:", err)
			return 1
		}
	}
	return m.Run()
}

// testingShort reads -test.short before testing.Short is usable.
func testingShort() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.short" || a == "-test.short=true" {
			return true
		}
	}
	return false
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// service is the stand-in of the service's subscription endpoint: paid
// organizations until 2099, the others unpaid; it counts queries per
// organization and answers after a delay, as a real service over a network.
type service struct {
	*httptest.Server
	mu      sync.Mutex
	unpaid  map[string]bool
	queries map[string]int
}

func newService(t *testing.T) *service {
	s := &service{unpaid: map[string]bool{}, queries: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		domain := tokenDomain(tok)
		s.mu.Lock()
		s.queries[domain]++
		unpaid := s.unpaid[domain]
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if unpaid {
			w.WriteHeader(http.StatusPaymentRequired)
			_, _ = io.WriteString(w, `{"subscribe_link":"https://service.example/pay"}`)
			return
		}
		_, _ = io.WriteString(w, `{"expires":"2099-01-01 00:00:00"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *service) count(domain string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[domain]
}

func (s *service) setUnpaid(domain string, unpaid bool) {
	s.mu.Lock()
	s.unpaid[domain] = unpaid
	s.mu.Unlock()
}

// tokens maps each minted token to its organization's domain.
var tokens sync.Map

func mint(t *testing.T, domain string) string {
	t.Helper()
	tok, err := emulator.MintToken(secret, emulator.Token{UserID: 7, OrganizationID: 1, Domain: domain, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tokens.Store(tok, domain)
	return tok
}

func tokenDomain(tok string) string {
	if d, ok := tokens.Load(tok); ok {
		return d.(string)
	}
	return ""
}

// caddy is one Caddy process.
type caddy struct {
	cmd   *exec.Cmd
	port  int
	admin int
	log   *os.File
}

func startCaddy(t *testing.T, name, site string, port int) *caddy {
	t.Helper()
	dir := t.TempDir()
	c := &caddy{port: port, admin: freePort(t)}
	config := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tauto_https off\n\tpersist_config off\n%s", c.admin, site)
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	c.log = log
	c.cmd = exec.Command(caddyBin, "run", "--config", file, "--adapter", "caddyfile")
	c.cmd.Stdout, c.cmd.Stderr = log, log
	c.cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, tail(string(out), 4000))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/config/", c.admin))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("%s did not start:\n%s", name, tail(string(out), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// alive reports whether the process still runs.
func (c *caddy) alive() bool {
	return c.cmd.ProcessState == nil && c.cmd.Process.Signal(syscallZero) == nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// theCluster is two servicegate instances sharing srv and a balancer.
type theCluster struct {
	svc       *service
	instances [2]*caddy
	lb        *caddy
	client    *http.Client
}

func startCluster(t *testing.T, srv *redistest.Server) *theCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test: skipped in -short mode")
	}
	cl := &theCluster{svc: newService(t)}
	for i := range cl.instances {
		port := freePort(t)
		cl.instances[i] = startCaddy(t, fmt.Sprintf("instance-%d", i+1), fmt.Sprintf(`	servicegate {
		%s
		timeout 1s
	}
}
:%d {
	bind 127.0.0.1
	route {
		service_auth {
			hs256_secret %s
		}
		service_subscription {
			app_identifier my-app
			base_url %s
			negative_ttl 1h
			timeout 5s
		}
		respond "instance %d" 200
	}
}
`, srv.ServicegateOption(), port, secret, cl.svc.URL, i+1), port)
	}
	lbPort := freePort(t)
	cl.lb = startCaddy(t, "balancer", fmt.Sprintf(`}
:%d {
	bind 127.0.0.1
	reverse_proxy 127.0.0.1:%d 127.0.0.1:%d {
		lb_policy round_robin
	}
}
`, lbPort, cl.instances[0].port, cl.instances[1].port), lbPort)
	cl.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 600}}
	t.Cleanup(cl.client.CloseIdleConnections)
	return cl
}

// get sends a request with token to port and returns the status and body.
func (cl *theCluster) get(port int, token string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/x", port), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := cl.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestClusterOneQueryFor500ConcurrentFirstRequests(t *testing.T) {
	srv := startRedis(t)
	cl := startCluster(t, srv)
	tok := mint(t, "acme.example")

	const requests = 500
	var wg sync.WaitGroup
	var ok atomic.Int32
	var byInstance [2]atomic.Int32
	start := make(chan struct{})
	for range requests {
		wg.Go(func() {
			<-start
			status, body, err := cl.get(cl.lb.port, tok)
			if err != nil || status != 200 {
				t.Errorf("%d %q %v", status, body, err)
				return
			}
			ok.Add(1)
			if strings.Contains(body, "instance 1") {
				byInstance[0].Add(1)
			} else {
				byInstance[1].Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := cl.svc.count("acme.example"); n != 1 {
		t.Errorf("%d subscription queries for %d concurrent first requests on two instances, want 1", n, requests)
	}
	if ok.Load() != requests || byInstance[0].Load() == 0 || byInstance[1].Load() == 0 {
		t.Errorf("%d answered 200 (%d by instance 1, %d by instance 2), want %d over both", ok.Load(), byInstance[0].Load(), byInstance[1].Load(), requests)
	}
}

func TestClusterPurgeOnOneInstanceReachesTheOther(t *testing.T) {
	srv := startRedis(t)
	cl := startCluster(t, srv)
	tok := mint(t, "globex.example")
	cl.svc.setUnpaid("globex.example", true)
	for _, c := range cl.instances {
		if status, _, err := cl.get(c.port, tok); err != nil || status != 402 {
			t.Fatalf("unpaid organization: %d %v", status, err)
		}
	}
	// The organization pays; the admin API of instance 1 is told.
	cl.svc.setUnpaid("globex.example", false)
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("http://127.0.0.1:%d/service/subscription/cache?organization=globex.example", cl.instances[0].admin), nil)
	resp, err := cl.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("purge: %d %s", resp.StatusCode, body)
	}
	purged := time.Now()
	for {
		status, _, err := cl.get(cl.instances[1].port, tok)
		if err != nil {
			t.Fatal(err)
		}
		if status == 200 {
			break
		}
		if time.Since(purged) > time.Second {
			t.Fatalf("instance 2 still answers %d a second after the purge on instance 1", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status, _, _ := cl.get(cl.instances[0].port, tok); status != 200 {
		t.Errorf("instance 1 after its own purge: %d", status)
	}
}

func TestClusterRedisKilledMidLoadAndRestarted(t *testing.T) {
	srv := startRedis(t)
	cl := startCluster(t, srv)

	// Load: 8 clients, each asking for a new organization now and then
	// (local misses that go to Redis) and an old one in between (hits).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served, refused atomic.Int32
	var failures sync.Map
	var next atomic.Int32
	for w := range 8 {
		wg.Go(func() {
			old := mint(t, fmt.Sprintf("steady-%d.example", w))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok := old
				if i%3 == 0 {
					tok = mint(t, fmt.Sprintf("org-%d.example", next.Add(1)))
				}
				status, body, err := cl.get(cl.lb.port, tok)
				if err != nil || status != 200 {
					refused.Add(1)
					failures.Store(fmt.Sprintf("%d %q %v", status, tail(body, 200), err), true)
					continue
				}
				served.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	srv.Stop()
	time.Sleep(time.Second)
	srv.Restart()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	failures.Range(func(k, _ any) bool { t.Errorf("answer during the Redis outage: %s", k); return true })
	if refused.Load() > 0 || served.Load() < 50 {
		t.Errorf("%d requests served, %d not", served.Load(), refused.Load())
	}
	for i, c := range cl.instances {
		if !c.alive() {
			t.Errorf("instance %d died", i+1)
		}
	}
	// Recovery: a new organization's answer is shared again, so the
	// other instance asks nobody.
	tok := mint(t, "after.example")
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, c := range cl.instances {
			if status, body, err := cl.get(c.port, tok); err != nil || status != 200 {
				t.Fatalf("after Redis came back: %d %s %v", status, body, err)
			}
		}
		if cl.svc.count("after.example") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers still not shared 5s after Redis came back: %d queries", cl.svc.count("after.example"))
		}
		tok = mint(t, fmt.Sprintf("after-%d.example", time.Now().UnixNano()))
		time.Sleep(100 * time.Millisecond)
	}
}
