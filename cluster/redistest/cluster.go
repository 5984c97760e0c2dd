package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster starts a Redis Cluster of three primaries (no replicas) on
// free ports, its 16384 slots split between them, and stops it when the
// test ends. The test is skipped, saying why, when redis-server is not
// installed. The Server it returns stands for the whole cluster: Addrs
// lists its nodes, Do sends a command where it belongs, Stop and Restart
// act on every node.
func StartCluster(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server); skipping the tests that need a real Redis")
	}
	c := &Server{t: t, bin: bin}
	const primaries = 3
	for i := range primaries {
		n := startNode(t, bin)
		from, to := i*16384/primaries, (i+1)*16384/primaries-1
		if _, err := n.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(from), strconv.Itoa(to)); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", n.Addr, err)
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes[1:] {
		if err := c.nodes[0].meet(n); err != nil {
			t.Fatalf("CLUSTER MEET: %v", err)
		}
	}
	c.Addr = c.nodes[0].Addr
	c.Port = c.nodes[0].Port
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.nodes {
		for {
			info, _ := n.Do("CLUSTER", "INFO")
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Redis Cluster did not come up within 20s: %s says %q", n.Addr, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// startNode starts one node of a cluster. Its cluster bus gets a free port
// of its own: by default Redis takes the client port plus 10000, which
// another process may hold (or which lies past 65535).
func startNode(t testing.TB, bin string) *Server {
	t.Helper()
	bus := freePort(t)
	n := start(t, bin, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(bus))
	n.bus = bus
	return n
}

// meet introduces the node n to the cluster through s, naming n's bus
// port (CLUSTER MEET would take n's port plus 10000).
func (s *Server) meet(n *Server) error {
	_, err := s.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port), strconv.Itoa(n.bus))
	return err
}

// IsCluster tells whether s is a Redis Cluster (StartCluster).
func (s *Server) IsCluster() bool { return s.nodes != nil }

// Addrs are the host:port of the cluster's nodes, or of the one server.
func (s *Server) Addrs() []string {
	if s.nodes == nil {
		return []string{s.Addr}
	}
	addrs := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// doCluster is Do on a Redis Cluster.
func (s *Server) doCluster(args ...string) (string, error) {
	cmd := strings.ToUpper(args[0])
	everyNode := cmd == "KEYS" || cmd == "DBSIZE" || cmd == "CONFIG" || cmd == "FLUSHALL" ||
		(cmd == "PUBSUB" && len(args) == 3 && strings.EqualFold(args[1], "NUMSUB"))
	if !everyNode {
		// The node that holds the key answers; the others say MOVED.
		var err error
		for _, n := range s.nodes {
			var out string
			out, err = n.Do(args...)
			if err == nil || !strings.Contains(err.Error(), "MOVED") {
				return out, err
			}
		}
		return "", err
	}
	var lines []string
	sum := 0
	for _, n := range s.nodes {
		out, err := n.Do(args...)
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.Addr, err)
		}
		switch cmd {
		case "KEYS":
			if out != "" {
				lines = append(lines, out)
			}
		case "DBSIZE":
			k, _ := strconv.Atoi(out)
			sum += k
		case "PUBSUB":
			_, k, _ := strings.Cut(out, "\n")
			v, _ := strconv.Atoi(k)
			sum += v
		default:
			lines = append(lines[:0], out)
		}
	}
	switch cmd {
	case "DBSIZE":
		return strconv.Itoa(sum), nil
	case "PUBSUB":
		return args[2] + "\n" + strconv.Itoa(sum), nil
	}
	return strings.Join(lines, "\n"), nil
}

// StartClusterReplicas gives every primary of the cluster c one replica,
// and waits until each has caught up. It returns the replicas.
func (c *Server) StartClusterReplicas(t testing.TB) []*Server {
	t.Helper()
	var replicas []*Server
	for _, n := range c.nodes {
		id, err := n.Do("CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("CLUSTER MYID: %v", err)
		}
		r := startNode(t, c.bin)
		if err := r.meet(n); err != nil {
			t.Fatalf("CLUSTER MEET: %v", err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			// The replica must know its primary before it can follow it.
			_, err := r.Do("CLUSTER", "REPLICATE", id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CLUSTER REPLICATE on %s: %v", r.Addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for {
			info, _ := r.Do("INFO", "replication")
			if strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replica on %s did not catch up with %s within 20s: %q", r.Addr, n.Addr, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		replicas = append(replicas, r)
	}
	return replicas
}

// ServicegateOption is the line of the servicegate global option that
// names s: redis <url> for one server, redis_cluster <nodes> for a cluster.
func (s *Server) ServicegateOption() string {
	if s.nodes == nil {
		return "redis " + s.URL()
	}
	return "redis_cluster " + strings.Join(s.Addrs(), " ")
}
