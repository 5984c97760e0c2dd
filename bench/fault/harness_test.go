//go:build fault

package fault

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Ports of the suite: all on 127.0.0.1, chosen free when the test binary
// starts, so that two runs of the suite on one host never meet.
var (
	adminPort   = freePort()
	httpPort    = freePort()
	httpsPort   = freePort()
	servicePort = freePort()
)

// freePort asks the kernel for a free loopback port; the listener is
// closed at once, and the kernel does not hand the port out again soon.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("no free loopback port for the fault suite: %v", err))
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// secret is shared by service_auth and the tokens the tests mint; it
// protects nothing outside these tests.
const secret = "servicegate-fault-secret-0123456789abcdef"

var caddyBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("SERVICEGATE_CADDY"); bin != "" {
		caddyBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "servicegate-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	caddyBin = filepath.Join(dir, "caddy")
	cmd := exec.Command("go", "build", "-o", caddyBin, "./cmd/caddy")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ./cmd/caddy:", err)
		return 1
	}
	return m.Run()
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func siteURL(path string) string { return "http://" + addr(httpPort) + path }

// caddyfile is a complete Caddyfile: loopback only, no HTTPS, the admin
// API on adminPort, and sites with {port} replaced by httpPort.
func caddyfile(sites string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	http_port %d
	https_port %d
	default_bind 127.0.0.1
	auto_https off
	skip_install_trust
	persist_config off
	grace_period 5s
	log {
		level WARN
	}
}
`, adminPort, httpPort, httpsPort) + strings.ReplaceAll(sites, "{port}", strconv.Itoa(httpPort))
}

// caddy is the binary under test, running as a subprocess.
type caddy struct {
	t       *testing.T
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// startCaddy runs the binary on sites and stops it when the test ends.
func startCaddy(t *testing.T, sites string) *caddy {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(caddyfile(sites)), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "caddy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBin, "run", "--config", cfg, "--adapter", "caddyfile")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &caddy{t: t, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(c.done) }()
	t.Cleanup(c.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-c.done:
			t.Fatalf("caddy exited before it listened; its log:\n%s", c.log())
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr(httpPort), 200*time.Millisecond); err == nil {
			conn.Close()
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not listen on %s within 20s; its log:\n%s", addr(httpPort), c.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *caddy) log() string {
	b, _ := os.ReadFile(c.logPath)
	return string(b)
}

func (c *caddy) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	if c.t.Failed() {
		c.t.Logf("caddy log:\n%s", c.log())
	}
}

// peakRSS is VmHWM of the Caddy process, in bytes.
func (c *caddy) peakRSS() int64 { return c.status("VmHWM") }

// goroutines reads Caddy's goroutine count from its admin API.
func (c *caddy) goroutines() int {
	c.t.Helper()
	resp, err := http.Get("http://" + addr(adminPort) + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		c.t.Fatalf("goroutine profile: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	m := regexp.MustCompile(`goroutine profile: total (\d+)`).FindSubmatch(b)
	if m == nil {
		c.t.Fatalf("no goroutine total in the profile (status %d)", resp.StatusCode)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// settleGoroutines waits until Caddy's goroutine count is at most limit,
// and returns the last count seen.
func (c *caddy) settleGoroutines(limit int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		n := c.goroutines()
		if n <= limit || time.Now().After(deadline) {
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reload loads sites as the new config through the admin API.
func reload(sites string) error {
	resp, err := http.Post("http://"+addr(adminPort)+"/load", "text/caddyfile", strings.NewReader(caddyfile(sites)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /load answered %d: %s", resp.StatusCode, b)
	}
	return nil
}

// token mints an HS256 token for the organization with this domain and id.
func token(t *testing.T, domain string, orgID int) string {
	t.Helper()
	now := time.Now()
	claims, err := json.Marshal(map[string]any{
		"iss": "service-emulator", "aud": "demo-client", "sub": "7", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"domain": domain, "context": map[string]any{"organization_id": orgID, "user_id": 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// upstream is the app: a small answer to everything.
func upstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}
	return newLoopbackServer(t, h, true)
}

// upstreamNoKeepAlive is an app that closes every connection after its
// answer, so that Caddy keeps no idle connections (and their goroutines)
// to it: goroutine counts then show only what the clients left behind.
func upstreamNoKeepAlive(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	return newLoopbackServer(t, h, false)
}

func newLoopbackServer(t *testing.T, h http.Handler, keepAlive bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	srv.SetKeepAlivesEnabled(keepAlive)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// service is a stand-in for the service's subscription endpoint on a
// fixed port, so that it can go down and come back at the same address.
type service struct {
	t       *testing.T
	mu      sync.Mutex
	srv     *http.Server
	queries atomic.Int64
	// ttl is how long a 200 answer lasts (its expires); delay holds each
	// answer back.
	ttl   atomic.Int64
	delay atomic.Int64
	orgs  sync.Map // organization → number of queries
}

func newService(t *testing.T, ttl time.Duration) *service {
	s := &service{t: t}
	s.ttl.Store(int64(ttl))
	s.up()
	t.Cleanup(s.down)
	return s
}

func (s *service) baseURL() string { return "http://" + addr(servicePort) }

func (s *service) up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", addr(servicePort)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("service stand-in: %v", err)
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(s.srv)
}

// down closes the listener and every connection: the service is
// unreachable until up.
func (s *service) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/v2/applications/") || !strings.HasSuffix(r.URL.Path, "/subscription") {
		http.NotFound(w, r)
		return
	}
	s.queries.Add(1)
	org := organizationOf(r.Header.Get("Authorization"))
	n, _ := s.orgs.LoadOrStore(org, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if d := time.Duration(s.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	// The service writes whole seconds: rounded up, so that an answer is
	// never already past when it arrives (rounded down, an answer made
	// at x.999 s with a 1 s ttl expired a millisecond after it was sent,
	// and its organization read as unpaid).
	expires := time.Now().Add(time.Duration(s.ttl.Load())).Truncate(time.Second).Add(time.Second).UTC().Format("2006-01-02 15:04:05")
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"expires":%q}`, expires)
}

// organizationOf reads the domain claim of a bearer token without
// verifying it: the stand-in only counts queries per organization.
func organizationOf(auth string) string {
	_, tok, _ := strings.Cut(auth, " ")
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Domain string `json:"domain"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Domain
}

// client is a keep-alive client for the test Caddy.
func client(conns int) *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true},
	}
}

// get sends a GET with a bearer token and returns the status.
func get(c *http.Client, path, tok string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, siteURL(path), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// tally counts answers by status, and transport errors.
type tally struct {
	mu       sync.Mutex
	status   map[int]int
	errCount int
	errs     []error // the first few
}

func (t *tally) add(code int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == nil {
		t.status = map[int]int{}
	}
	if err != nil {
		t.errCount++
		if len(t.errs) < 5 {
			t.errs = append(t.errs, err)
		}
		return
	}
	t.status[code]++
}

func (t *tally) count(code int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status[code]
}

func (t *tally) errors() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.errCount
}

// only reports whether every answer had one of codes and nothing failed.
func (t *tally) only(codes ...int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.errCount > 0 {
		return false
	}
	for code := range t.status {
		found := false
		for _, c := range codes {
			found = found || c == code
		}
		if !found {
			return false
		}
	}
	return true
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "statuses %v", t.status)
	if t.errCount > 0 {
		fmt.Fprintf(&b, ", %d transport errors, first %v", t.errCount, t.errs)
	}
	return b.String()
}

// load runs workers that call do until stop is closed or each has made
// max calls.
func load(workers, max int, stop <-chan struct{}, do func(worker, i int)) {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < max; i++ {
				select {
				case <-stop:
					return
				default:
				}
				do(w, i)
			}
		}(w)
	}
	wg.Wait()
}

// limitsAndWebhookSite is a site that holds app's /file-format/* to
// service_limits' defaults and checks its /webhooks deliveries.
func limitsAndWebhookSite(app string) string {
	return fmt.Sprintf(`http://:{port} {
	route /file-format/* {
		service_limits
		reverse_proxy %s
	}
	route /webhooks {
		service_webhook {
			secret %s
		}
		reverse_proxy %s
	}
}
`, app, secret, app)
}
