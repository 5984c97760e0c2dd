package redistest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Sentinel is a Redis primary, its replicas and three sentinels watching
// it, all on loopback.
type Sentinel struct {
	// Master is the name the sentinels know the primary by.
	Master string
	// Servers are the primary as started, then its replicas; after a
	// failover another is the primary (see Primary).
	Servers []*Server
	// Sentinels are the three sentinels.
	Sentinels []*Server
	t         testing.TB
}

// StartSentinel starts a primary, replicas replicas of it and three
// sentinels (redis-server --sentinel) that declare the primary down after a
// second without answer and promote a replica, and waits until every
// sentinel knows the others and the replicas. Everything stops when the
// test ends; the test is skipped when redis-server is not installed.
func StartSentinel(t testing.TB, replicas int) *Sentinel {
	t.Helper()
	primary := Start(t)
	s := &Sentinel{Master: "servicegate-test", Servers: []*Server{primary}, t: t}
	for range replicas {
		s.Servers = append(s.Servers, primary.StartReplica(t))
	}
	for range 3 {
		s.Sentinels = append(s.Sentinels, startConf(t, primary.bin, func(int) string {
			return fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
				"sentinel down-after-milliseconds %s 1000\n"+
				"sentinel failover-timeout %s 5000\n", s.Master, primary.Port, s.Master, s.Master)
		}, "--sentinel"))
	}
	want := fmt.Sprintf("status=ok,address=%s,slaves=%d,sentinels=3", primary.Addr, replicas)
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range s.Sentinels {
		for {
			info, _ := sn.Do("INFO", "sentinel")
			if strings.Contains(info, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sentinels did not see the primary, %d replicas and each other within 20s: %s says %q", replicas, sn.Addr, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return s
}

// Addrs are the sentinels' host:port.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr
	}
	return addrs
}

// PrimaryAddr is the host:port the sentinels give as the primary's now.
func (s *Sentinel) PrimaryAddr() string {
	for _, sn := range s.Sentinels {
		if addr := s.primaryGivenBy(sn); addr != "" {
			return addr
		}
	}
	return ""
}

// primaryGivenBy is the host:port one sentinel gives as the primary, or ""
// when it does not answer.
func (s *Sentinel) primaryGivenBy(sn *Server) string {
	out, err := sn.Do("SENTINEL", "get-master-addr-by-name", s.Master)
	host, port, ok := strings.Cut(out, "\n")
	if err != nil || !ok {
		return ""
	}
	return host + ":" + port
}

// AgreedPrimaryAddr waits until every sentinel gives the same primary and
// returns its host:port. After a failover the sentinels learn the new
// primary from each other within a few seconds; until then one may still
// give the old one. The test fails if they disagree for 30 s.
func (s *Sentinel) AgreedPrimaryAddr() string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var given []string
		for _, sn := range s.Sentinels {
			given = append(given, s.primaryGivenBy(sn))
		}
		if given[0] != "" && !slices.ContainsFunc(given, func(a string) bool { return a != given[0] }) {
			return given[0]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the sentinels did not agree on a primary within 30 s: they give %q", given)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Primary is the server the sentinels give as the primary now.
func (s *Sentinel) Primary() *Server {
	addr := s.PrimaryAddr()
	for _, srv := range s.Servers {
		if srv.Addr == addr {
			return srv
		}
	}
	s.t.Fatalf("the sentinels give %q as the primary, none of the servers started", addr)
	return nil
}
