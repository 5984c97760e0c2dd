// Package redistest starts a throwaway redis-server for tests: on
// 127.0.0.1, a free port, no persistence, in a temporary directory.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	// Addr is its host:port.
	Addr string
	// Port is its port.
	Port int

	t     testing.TB
	bin   string
	dir   string
	cmd   *exec.Cmd
	conf  string    // a config file, first argument, when set
	extra []string  // more redis-server arguments
	nodes []*Server // the primaries, for a Redis Cluster
	bus   int       // a cluster node's bus port (startNode)
}

// Binary is the redis-server the tests run: $REDIS_SERVER, else
// redis-server on PATH, else /usr/bin/redis-server; "" when none exists.
func Binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	if b, err := exec.LookPath("redis-server"); err == nil {
		return b
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	return ""
}

// Start starts a redis-server on a free port and stops it when the test
// ends. The test is skipped, saying why, when redis-server is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server); skipping the tests that need a real Redis")
	}
	return start(t, bin)
}

// start starts a redis-server with the extra arguments.
func start(t testing.TB, bin string, extra ...string) *Server {
	t.Helper()
	return startConf(t, bin, nil, extra...)
}

// startConf starts a redis-server with a config file written by conf (when
// not nil, given the server's port) and the extra arguments.
func startConf(t testing.TB, bin string, conf func(port int) string, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), extra: extra}
	s.Port = freePort(t)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	s.bin = bin
	if conf != nil {
		s.conf = s.dir + "/redis.conf"
		if err := os.WriteFile(s.conf, []byte(conf(s.Port)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Restart starts the server again on the same port after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	if s.nodes != nil {
		for _, n := range s.nodes {
			n.Restart()
		}
		return
	}
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "")
	args = append(args, s.extra...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Dir = s.dir
	out, err := os.Create(s.dir + "/redis.log")
	if err != nil {
		s.t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Do("PING"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.dir + "/redis.log")
			s.t.Fatalf("redis-server did not answer on %s within 10s:\n%s", s.Addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *Server) Stop() {
	for _, n := range s.nodes {
		n.Stop()
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Do sends one command in RESP and returns the reply as text: simple and
// bulk strings as they are, integers in decimal, arrays flattened one
// element a line. It needs no client library, so tests can inspect Redis
// (INFO commandstats, KEYS) without touching the code under test.
//
// On a Redis Cluster, a command naming a key goes to the node that holds
// it, and KEYS, DBSIZE, PUBSUB NUMSUB and CONFIG go to every node, their
// answers added up.
func (s *Server) Do(args ...string) (string, error) {
	if s.nodes != nil {
		return s.doCluster(args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	var out strings.Builder
	if err := readReply(bufio.NewReader(conn), &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

// readReply reads one RESP2 reply into out.
func readReply(r *bufio.Reader, out *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		out.WriteString(line[1:])
	case '-':
		return fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		out.Write(buf[:n])
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				out.WriteByte('\n')
			}
			if err := readReply(r, out); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// CommandCalls returns how many times each command ran since the last
// CONFIG RESETSTAT, from INFO commandstats: "get" → 3.
func (s *Server) CommandCalls() map[string]int {
	s.t.Helper()
	if s.nodes != nil {
		calls := make(map[string]int)
		for _, n := range s.nodes {
			for name, k := range n.CommandCalls() {
				calls[name] += k
			}
		}
		return calls
	}
	info, err := s.Do("INFO", "commandstats")
	if err != nil {
		s.t.Fatalf("INFO commandstats: %v", err)
	}
	calls := make(map[string]int)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(num)
		calls[name] = n
	}
	return calls
}

// upkeep are the commands no caller of the client asks for: the test's
// own (INFO, CONFIG RESETSTAT) and what a client sends on a new connection
// or to keep one (HELLO, CLIENT SETINFO, PING, a cluster's slot map,
// READONLY on a replica).
var upkeep = map[string]bool{
	"info": true, "config|resetstat": true, "hello": true, "client|setinfo": true, "ping": true,
	"cluster|slots": true, "cluster|shards": true, "cluster|nodes": true, "readonly": true,
}

// WorkCalls is CommandCalls without the commands of upkeep: the calls made
// for what the code under test asked, which a local cache hit must not make.
// A client may open a connection at any time (a pool refilled, a
// subscription resumed), so a test counting calls counts these.
func (s *Server) WorkCalls() map[string]int {
	s.t.Helper()
	calls := s.CommandCalls()
	for name := range calls {
		if upkeep[name] {
			delete(calls, name)
		}
	}
	return calls
}

// ResetStats clears the command counts (CONFIG RESETSTAT).
func (s *Server) ResetStats() {
	s.t.Helper()
	if _, err := s.Do("CONFIG", "RESETSTAT"); err != nil {
		s.t.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

// Dbsize returns how many keys the server holds.
func (s *Server) Dbsize(t testing.TB) int {
	t.Helper()
	out, err := s.Do("DBSIZE")
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	n, _ := strconv.Atoi(out)
	return n
}

// StartReplica starts a redis-server replicating s, on a free port, and
// waits until it has caught up with s. It stops when the test ends.
func (s *Server) StartReplica(t testing.TB) *Server {
	t.Helper()
	r := start(t, s.bin, "--replicaof", "127.0.0.1", strconv.Itoa(s.Port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := r.Do("INFO", "replication")
		if strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica on %s did not catch up with %s within 10s: %q", r.Addr, s.Addr, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pause stops the server's process (SIGSTOP): it keeps its connections
// but answers nothing, as a machine that hangs. Resume lets it go on.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume undoes Pause (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil || s.cmd.Process == nil {
		s.t.Fatal("the redis-server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signalling redis-server: %v", err)
	}
}
