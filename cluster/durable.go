package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrReplicas is the error of a write that fewer replicas than
// Options.Replicas confirmed within Options.ReplicasTimeout: it may be on
// the primary alone, which could take it along if it died, so it is not
// to be acknowledged.
var ErrReplicas = errors.New("fewer Redis replicas than required confirmed the write")

// durable runs the script s on keys with args, a write whose loss would
// lose something acknowledged, as op, and returns its command to read the
// reply from. With Options.Replicas set, the write counts as done only
// once that many replicas have it (or anything the primary did after it)
// within Options.ReplicasTimeout; else the error is ErrReplicas.
//
// The writes of concurrent callers to one primary share their WAIT: a
// round sends writes together in one pipeline on one connection to the
// primary that holds key, followed by one WAIT on that connection, which
// Redis answers once the replicas have every write the connection made
// before it. Up to laneRounds rounds are under way at once; a write that
// finds them all under way goes in the next round, sent as soon as one of
// them ends. So no write is confirmed by a WAIT issued before it, nor by
// one on another connection (which might reach another primary after a
// failover), and a write takes at most two rounds, each bounded by the
// Client's timeout plus ReplicasTimeout. The script's redis.Nil is not a
// failure, and is returned once the replicas confirm.
func (c *Client) durable(ctx context.Context, op Op, key string, s *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if c.opts.Replicas == 0 {
		var cmd *redis.Cmd
		err := c.Call(ctx, op, func(ctx context.Context) error {
			cmd = s.Run(ctx, c.rdb, keys, args...)
			return cmd.Err()
		})
		return cmd, err
	}
	l, err := c.laneFor(ctx, key)
	if err == nil {
		w := &laneWrite{script: s, keys: keys, args: args, done: make(chan struct{})}
		l.submit(w)
		select {
		case <-w.done:
			if err = w.err; err == nil {
				err = w.cmd.Err()
			}
		case <-ctx.Done():
			// Not acknowledged; the write may still be made.
			err = ctx.Err()
		}
		if err == nil || errors.Is(err, redis.Nil) {
			c.succeeded(op)
			return w.cmd, err
		}
	}
	c.Failed(op, err)
	return nil, &CallError{Op: op, Addr: c.addr, Err: err}
}

// laneFor is the lane of the primary that holds key: the one server (or
// Sentinel's primary), or the Cluster node that serves key's slot.
func (c *Client) laneFor(ctx context.Context, key string) (*lane, error) {
	node, ok := c.rdb.(*redis.Client) // one server, or Sentinel's primary
	if cc, isCluster := c.rdb.(*redis.ClusterClient); isCluster {
		var err error
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		node, err = cc.MasterForKey(ctx, key)
		cancel()
		if err != nil {
			return nil, err
		}
	} else if !ok {
		return nil, fmt.Errorf("a %T cannot wait for replicas", c.rdb)
	}
	addr := node.Options().Addr
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	if c.lanes == nil {
		c.lanes = make(map[string]*lane)
	}
	l := c.lanes[addr]
	if l == nil {
		// Pipelines read with the client's read timeout: the lane's
		// must allow for the WAIT.
		l = &lane{c: c, node: node.WithTimeout(c.timeout + c.opts.ReplicasTimeout)}
		c.lanes[addr] = l
	}
	return l, nil
}

// laneRounds is how many rounds of durable writes may be under way at
// once toward one primary. A round costs the time the primary and then a
// replica take to write (and, with appendfsync always, sync) what it
// sends, about the same whatever it carries. In the bench (2 cores, 32
// connections, both Redis servers syncing every write, paired rounds
// against replicas 0 on empty queues) one round at a time carried 15.6
// writes each and acknowledged 0.58 of what replicas 0 did; two, 0.62;
// eight, 0.60 to 0.62 with 2.75 writes a round; sixteen, 0.65; sixty-four,
// one round per write, 0.60. Eight keeps the rounds short for few
// callers and still shares a WAIT among the writes of many.
const laneRounds = 8

// lane sends the durable writes to one primary, in rounds: every write
// that comes while laneRounds rounds are under way goes in the next one.
type lane struct {
	c    *Client
	node *redis.Client

	mu       sync.Mutex
	queued   []*laneWrite
	underWay int // rounds
}

// laneWrite is one script call waiting for its round.
type laneWrite struct {
	script *redis.Script
	keys   []string
	args   []any
	// eval sends the script's source: the primary did not know its hash
	// (a promoted replica, a flushed script cache).
	eval bool

	cmd  *redis.Cmd
	err  error // of the round: the WAIT failed or fell short
	done chan struct{}
}

// submit queues w, and starts a round unless laneRounds are under way.
func (l *lane) submit(w *laneWrite) {
	l.mu.Lock()
	l.queued = append(l.queued, w)
	var batch []*laneWrite
	if l.underWay < laneRounds {
		l.underWay++
		batch, l.queued = l.queued, nil
	}
	l.mu.Unlock()
	if batch != nil {
		go l.run(batch)
	}
}

// run sends batch's round, then the writes queued meanwhile, until none
// is left waiting.
func (l *lane) run(batch []*laneWrite) {
	for len(batch) > 0 {
		again := l.round(batch)
		l.mu.Lock()
		batch, l.queued = append(again, l.queued...), nil
		if len(batch) == 0 {
			l.underWay--
		}
		l.mu.Unlock()
	}
}

// round sends batch's writes, then WAIT, in one pipeline on one
// connection, and tells each write how it went. It returns the writes
// whose script the primary did not know, to go again with the script's
// source.
func (l *lane) round(batch []*laneWrite) (again []*laneWrite) {
	c := l.c
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout+c.opts.ReplicasTimeout)
	defer cancel()
	var wait *redis.Cmd
	start := time.Now()
	_, _ = l.node.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, w := range batch {
			if w.eval {
				w.cmd = w.script.Eval(ctx, p, w.keys, w.args...)
			} else {
				w.cmd = w.script.EvalSha(ctx, p, w.keys, w.args...)
			}
		}
		wait = p.Do(ctx, "wait", c.opts.Replicas, c.opts.ReplicasTimeout.Milliseconds())
		return nil
	})
	if c.opts.OnReplicasWait != nil {
		c.opts.OnReplicasWait(len(batch), time.Since(start))
	}
	got, roundErr := wait.Int64()
	if roundErr == nil && got < int64(c.opts.Replicas) {
		roundErr = fmt.Errorf("%w: %d of %d within %s", ErrReplicas, got, c.opts.Replicas, c.opts.ReplicasTimeout)
	}
	for _, w := range batch {
		if !w.eval && redis.HasErrorPrefix(w.cmd.Err(), "NOSCRIPT") {
			w.eval = true
			again = append(again, w)
			continue
		}
		w.err = roundErr
		close(w.done)
	}
	return again
}
