package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// startRedis runs a redis-server of the chain's own on port (ports.redis,
// or ports.plainRedis for the plain side's), 127.0.0.1 only, saving
// nothing; its working directory is bench/out/<name>.redis, emptied first.
// durable: it syncs its append-only file before every answer.
func startRedis(env *benchEnv, name string, port int, durable bool) (*proc, error) {
	dir := filepath.Join(env.out, name+".redis")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr := loopback(port)
	p, err := startProc("redis-server", filepath.Join(env.out, name+"-redis.log"), nil, "redis-server",
		redisArgs(port, dir, fsyncOf(durable, "always"))...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(addr, 10*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// startRedisReplica runs a replica of the chain's redis-server on
// ports.redisReplica (durable, it syncs as -replica-appendfsync says,
// always by default), and waits until it has caught up: a queue with
// replicas 1 acknowledges nothing before.
func startRedisReplica(env *benchEnv, name string, durable bool) (*proc, error) {
	dir := filepath.Join(env.out, name+".redis-replica")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr := loopback(env.ports.redisReplica)
	args := append(redisArgs(env.ports.redisReplica, dir, fsyncOf(durable, cmp.Or(env.opts.replicaFsync, "always"))),
		"--replicaof", "127.0.0.1", strconv.Itoa(env.ports.redis))
	p, err := startProc("redis-server (replica)", filepath.Join(env.out, name+"-redis-replica.log"), nil, "redis-server", args...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(addr, 10*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := redisInfo(addr, "replication", time.Second)
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("the Redis replica on %s did not catch up within 10s: %q %v", addr, info, err)
		}
	}
}

// redisArgs are the arguments of the bench's redis-server: loopback only,
// no snapshots; no append-only file when appendfsync is "", else one
// synced as it says (always: before every answer, what a queue that loses
// nothing acknowledged needs of its Redis).
func redisArgs(port int, dir, appendfsync string) []string {
	aof := []string{"--appendonly", "no"}
	if appendfsync != "" {
		aof = []string{"--appendonly", "yes", "--appendfsync", appendfsync}
	}
	return append(append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", ""}, aof...), "--dir", dir)
}

// fsyncOf is the appendfsync of a durable Redis (how), or "" for none.
func fsyncOf(durable bool, how string) string {
	if !durable {
		return ""
	}
	return how
}

// redisNote says how many commands Redis served during the chain (INFO
// commandstats, read after the last round) next to the requests the chain
// side was sent, or why they could not be read.
func redisNote(addr string, chainSide sideResult) string {
	stats, err := redisCommandStats(addr, 5*time.Second)
	if err != nil {
		return "Redis' INFO commandstats not read: " + err.Error()
	}
	var requests int64
	for _, r := range chainSide.runs {
		requests += r.Requests
	}
	return fmt.Sprintf("Redis `INFO commandstats` after the last round: GET %d, SET %d calls; all commands: %s; for %d measured requests to the chain side (and its warm-up)",
		stats["get"], stats["set"], formatCommandStats(stats), requests)
}

// formatCommandStats lists the calls per command, most first.
func formatCommandStats(stats map[string]int64) string {
	if len(stats) == 0 {
		return "none"
	}
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if stats[names[i]] != stats[names[j]] {
			return stats[names[i]] > stats[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", strings.ToUpper(n), stats[n])
	}
	return strings.Join(parts, ", ")
}

// redisCommandStats sends INFO commandstats to the Redis at addr over RESP
// and returns the calls per command (lower case, as Redis names them).
func redisCommandStats(addr string, timeout time.Duration) (map[string]int64, error) {
	info, err := redisInfo(addr, "commandstats", timeout)
	if err != nil {
		return nil, err
	}
	return parseCommandStats(info)
}

// redisInfo sends INFO <section> to the Redis at addr over RESP and
// returns its text.
func redisInfo(addr, section string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section); err != nil {
		return "", err
	}
	return readBulkString(bufio.NewReader(conn), 1<<20)
}

// readBulkString reads one RESP bulk string of at most max bytes; an
// error reply becomes an error.
func readBulkString(r *bufio.Reader, max int) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the reply: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis answered %q", line[1:])
	case !strings.HasPrefix(line, "$"):
		return "", fmt.Errorf("unexpected reply %q, want a bulk string", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > max {
		return "", fmt.Errorf("unexpected bulk string length %q", line[1:])
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", fmt.Errorf("reading the reply: %w", err)
	}
	if string(buf[n:]) != "\r\n" {
		return "", fmt.Errorf("bulk string of %d bytes not ended by CRLF", n)
	}
	return string(buf[:n]), nil
}

// parseCommandStats reads the lines cmdstat_<command>:calls=N,… of INFO
// commandstats.
func parseCommandStats(info string) (map[string]int64, error) {
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("unexpected commandstats line %q", line)
		}
		found := false
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("unexpected commandstats line %q: %w", line, err)
				}
				stats[name], found = n, true
			}
		}
		if !found {
			return nil, fmt.Errorf("commandstats line without calls= %q", line)
		}
	}
	return stats, nil
}
