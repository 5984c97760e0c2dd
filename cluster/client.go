package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Defaults of Options.
const (
	DefaultKeyPrefix   = "servicegate:"
	DefaultTimeout     = 250 * time.Millisecond
	DefaultLogInterval = 10 * time.Second
	// DefaultReplicasTimeout is how long a write that must not be lost
	// waits for its replicas (Options.Replicas).
	DefaultReplicasTimeout = 500 * time.Millisecond
)

// Op names a kind of Redis call, for metrics and log lines.
type Op uint8

// The kinds of Redis calls.
const (
	OpGet         Op = iota // read a shared answer
	OpSet                   // write a shared answer
	OpLock                  // take a lock with expiry
	OpUnlock                // release a lock
	OpForget                // delete shared answers
	OpPublish               // publish a message to every instance
	OpSubscribe             // the pub/sub listener's connection
	OpSpillStore            // keep a spilled payload
	OpSpillTake             // hand a spilled payload over (or remove it)
	OpQueueAdd              // store a webhook delivery in the shared queue
	OpQueueClaim            // take the next due delivery of an organization
	OpQueueSettle           // record how an attempt ended
	OpQueueAdmin            // list, replay or drop deliveries
	OpPing                  // a health check's ping
	numOps
)

// Ops lists every Op, for metrics that create one series per Op.
var Ops = [numOps]Op{OpGet, OpSet, OpLock, OpUnlock, OpForget, OpPublish, OpSubscribe, OpSpillStore, OpSpillTake, OpQueueAdd, OpQueueClaim, OpQueueSettle, OpQueueAdmin, OpPing}

// String names the op as metrics and logs show it.
func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpSet:
		return "set"
	case OpLock:
		return "lock"
	case OpUnlock:
		return "unlock"
	case OpForget:
		return "forget"
	case OpPublish:
		return "publish"
	case OpSubscribe:
		return "subscribe"
	case OpSpillStore:
		return "spill_store"
	case OpSpillTake:
		return "spill_take"
	case OpQueueAdd:
		return "queue_add"
	case OpQueueClaim:
		return "queue_claim"
	case OpQueueSettle:
		return "queue_settle"
	case OpQueueAdmin:
		return "queue_admin"
	case OpPing:
		return "ping"
	}
	return "unknown"
}

func init() {
	// go-redis logs every failed dial on its own: one line per request
	// while Redis is away. Client reports failures itself, rate-limited.
	redis.SetLogger(quietLogger{})
}

// quietLogger drops go-redis' own log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// Options configure a Client. Exactly one of URL, Sentinel and Cluster
// names the Redis it talks to.
type Options struct {
	// URL is the Redis server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS (see redis.ParseURL for the query options).
	URL string
	// Sentinel reaches the primary that Redis Sentinel watches under a
	// name, and follows it when the sentinels promote a replica.
	Sentinel *Sentinel
	// Cluster is some nodes of a Redis Cluster (host:port); the client
	// learns the others from them.
	Cluster []string
	// Password authenticates to the Sentinel or Cluster nodes (and to the
	// sentinels). A URL carries its own.
	Password string
	// TLS connects to the Sentinel or Cluster nodes with TLS. A URL says
	// it with rediss://.
	TLS bool
	// Replicas is how many replicas must have a write that must not be
	// lost (a queued delivery before it is acknowledged, a dead letter, a
	// replay) before it counts as done: WAIT after the write, one WAIT
	// for the writes of concurrent callers (see durable). 0, the default,
	// waits for none: a primary that dies may take its last writes with
	// it.
	Replicas int
	// ReplicasTimeout bounds that wait; fewer confirmations within it
	// make the write fail (ErrReplicas). Default DefaultReplicasTimeout.
	ReplicasTimeout time.Duration
	// KeyPrefix starts every key and channel name. Default
	// DefaultKeyPrefix.
	KeyPrefix string
	// Timeout bounds each Redis call. Default DefaultTimeout.
	Timeout time.Duration
	// OnError, when set, is called for every failed call (for a metric).
	OnError func(op Op, err error)
	// OnReplicasWait, when set, is told of every round of durable writes
	// with Replicas set (see durable): how many writes it carried and how
	// long it took from sending them to the WAIT's answer (for a metric).
	OnReplicasWait func(writes int, took time.Duration)
	// Log, when set, is told of Redis' health: a failure (err non-nil) at
	// most once per LogInterval, with how many failures went unlogged
	// since the last line; and the first success after a failure (err nil).
	Log func(op Op, err error, suppressed int)
	// OnPrimary, when set, is told of the primary the client connects to
	// through Sentinel: once for the first (was ""), then once each time
	// it changes (a promotion). Not called for the other forms.
	OnPrimary func(was, now string)
	// LogInterval is the least time between two failure lines. Default
	// DefaultLogInterval.
	LogInterval time.Duration
	// Now is the clock answers' lifetimes are computed with. Default
	// time.Now.
	Now func() time.Time
}

// Sentinel names a primary watched by Redis Sentinel.
type Sentinel struct {
	// Master is the name the sentinels know the primary by.
	Master string
	// Addrs are the sentinels' host:port.
	Addrs []string
}

// Client is one connection pool to a Redis server (or the nodes of a
// Sentinel or Cluster deployment) and one pub/sub listener, shared by
// everything that uses the same Redis and prefix. Its methods are safe for
// concurrent use.
type Client struct {
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration
	opts    Options
	addr    string

	primaryMu sync.Mutex
	primary   string // host:port of the Sentinel primary last connected to

	failing  atomic.Bool
	logMu    sync.Mutex
	lastLog  time.Time
	unlogged int

	listenMu  sync.Mutex
	listeners map[string]map[*listener]struct{} // by full channel name
	pubsub    *redis.PubSub
	stop      context.CancelFunc
	done      chan struct{}

	lanesMu sync.Mutex
	lanes   map[string]*lane // the durable writes' rounds, by primary (durable.go)
}

type listener struct{ fn func(payload string) }

// New returns a Client for the Redis o names. It does not wait for Redis:
// a server that is down is reported on first use, and the client recovers
// by itself when it is back.
func New(o Options) (*Client, error) {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LogInterval <= 0 {
		o.LogInterval = DefaultLogInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Replicas < 0 {
		return nil, errors.New("replicas must not be negative")
	}
	if o.ReplicasTimeout <= 0 {
		o.ReplicasTimeout = DefaultReplicasTimeout
	}
	c := &Client{
		prefix:    o.KeyPrefix,
		timeout:   o.Timeout,
		opts:      o,
		listeners: make(map[string]map[*listener]struct{}),
		done:      make(chan struct{}),
	}
	var err error
	if c.rdb, c.addr, err = dial(o, c.connectedTo); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	// The listener's connection blocks on reads: it must not use the
	// per-call read timeout. It pings Redis itself and reconnects.
	c.pubsub = c.rdb.Subscribe(ctx)
	go c.listen(ctx)
	return c, nil
}

// dial makes the go-redis client of the form o names, and says where it
// goes without credentials (safe to log). The Sentinel form tells
// connected the primary's address on every new connection.
func dial(o Options, connected func(addr string)) (rdb redis.UniversalClient, addr string, err error) {
	forms := 0
	for _, set := range []bool{o.URL != "", o.Sentinel != nil, len(o.Cluster) > 0} {
		if set {
			forms++
		}
	}
	if forms != 1 {
		return nil, "", errors.New("name the Redis one way: a URL, a Sentinel master and its sentinels, or Cluster nodes")
	}
	var tlsConfig *tls.Config
	if o.TLS {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// Calls are bounded by Timeout and retried once; the connection pool
	// waits no longer than a call.
	noMaint := func() *maintnotifications.Config {
		return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	}
	switch {
	case o.URL != "":
		if o.Password != "" || o.TLS {
			return nil, "", errors.New("a Redis URL carries its own password and TLS (rediss://)")
		}
		ro, err := redis.ParseURL(o.URL)
		if err != nil {
			// ParseURL's errors may quote the URL, password included.
			return nil, "", errors.New("the Redis URL is not of the form redis://[user:password@]host:port/db or rediss://…")
		}
		ro.ContextTimeoutEnabled = true
		ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = o.Timeout, o.Timeout, o.Timeout, o.Timeout
		ro.MaxRetries = 1
		ro.DisableIdentity = true
		ro.MaintNotificationsConfig = noMaint()
		return redis.NewClient(ro), ro.Addr, nil
	case o.Sentinel != nil:
		if o.Sentinel.Master == "" || len(o.Sentinel.Addrs) == 0 {
			return nil, "", errors.New("Redis Sentinel needs the primary's name and at least one sentinel's host:port")
		}
		fc := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            o.Sentinel.Master,
			SentinelAddrs:         o.Sentinel.Addrs,
			Password:              o.Password,
			SentinelPassword:      o.Password,
			TLSConfig:             tlsConfig,
			ContextTimeoutEnabled: true,
			DialTimeout:           o.Timeout,
			ReadTimeout:           o.Timeout,
			WriteTimeout:          o.Timeout,
			PoolTimeout:           o.Timeout,
			MaxRetries:            1,
			DisableIdentity:       true,
		})
		// The client's own connections all go to the primary (the
		// sentinels have clients of their own).
		fc.AddHook(dialHook(func(conn net.Conn) { connected(conn.RemoteAddr().String()) }))
		return fc, "sentinel " + o.Sentinel.Master + " via " + strings.Join(o.Sentinel.Addrs, ","), nil
	default:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    o.Cluster,
			Password:                 o.Password,
			TLSConfig:                tlsConfig,
			ContextTimeoutEnabled:    true,
			DialTimeout:              o.Timeout,
			ReadTimeout:              o.Timeout,
			WriteTimeout:             o.Timeout,
			PoolTimeout:              o.Timeout,
			MaxRetries:               1,
			DisableIdentity:          true,
			MaintNotificationsConfig: noMaint(),
		}), "cluster " + strings.Join(o.Cluster, ","), nil
	}
}

// dialHook is a go-redis hook that tells of every new connection.
type dialHook func(conn net.Conn)

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h(conn)
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// connectedTo notes a new connection to the Sentinel primary at addr, and
// reports a change of primary once.
func (c *Client) connectedTo(addr string) {
	c.primaryMu.Lock()
	was := c.primary
	c.primary = addr
	c.primaryMu.Unlock()
	if was != addr && c.opts.OnPrimary != nil {
		c.opts.OnPrimary(was, addr)
	}
}

// Addr says where the Redis is, without credentials: safe to log. A
// host:port for a URL; "sentinel <master> via <sentinels>" or
// "cluster <nodes>" for the other forms.
func (c *Client) Addr() string { return c.addr }

// Label names the Redis in words, without credentials and bounded by the
// config, for metric labels and health checks: its host:port for a URL,
// "sentinel <master>" or "cluster" for the other forms (whose nodes change
// as the deployment does).
func (c *Client) Label() string {
	switch {
	case c.opts.Sentinel != nil:
		return "sentinel " + c.opts.Sentinel.Master
	case len(c.opts.Cluster) > 0:
		return "cluster"
	}
	return c.addr
}

// Prefix is the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Redis is the underlying go-redis client (a single server's, Sentinel's
// or Cluster's), for the parts of servicegate that build their own
// commands on this Client's connections. Bound each call with Call; keys
// that one script or transaction touches must share a hash tag (see Key).
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// TaggedKey is the Redis key <prefix>{<tag>}<rest>. Redis Cluster keeps
// the keys of one hash tag on one node, and runs a script or a transaction
// only on keys of one node: keys that one script or transaction touches
// (or that a script names itself, from a common base) must share their
// tag. A key only ever touched alone needs none: <prefix><name> spreads
// over the nodes. Any key of servicegate is one of the two.
func (c *Client) TaggedKey(tag, rest string) string {
	return c.prefix + "{" + tag + "}" + rest
}

// Call runs fn with a context bounded by the Client's timeout and reports
// its error as op; redis.Nil (no such key) is not a failure.
func (c *Client) Call(ctx context.Context, op Op, fn func(ctx context.Context) error) error {
	return c.callWithin(ctx, op, c.timeout, fn)
}

// callWithin is Call bounded by timeout.
func (c *Client) callWithin(ctx context.Context, op Op, timeout time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	err := fn(ctx)
	cancel()
	if err != nil && !errors.Is(err, redis.Nil) {
		c.Failed(op, err)
		return &CallError{Op: op, Addr: c.addr, Err: err}
	}
	c.succeeded(op)
	return err
}

// Ping asks Redis whether it answers, within the Client's timeout; a
// failure counts as any other (OpPing).
func (c *Client) Ping(ctx context.Context) error {
	return c.Call(ctx, OpPing, func(ctx context.Context) error { return c.rdb.Ping(ctx).Err() })
}

// CallError is a failed Redis call, as Call returns it. Its failure has
// been reported already (counted, and logged at most once per
// LogInterval), so callers need not log it again.
type CallError struct {
	Op   Op
	Addr string // host:port, without credentials
	Err  error
}

func (e *CallError) Error() string { return fmt.Sprintf("redis %s at %s: %v", e.Op, e.Addr, e.Err) }

// Unwrap returns the error of the call.
func (e *CallError) Unwrap() error { return e.Err }

// lock takes the lock named key (prefix included) for ttl, when nobody
// holds it (SET NX PX), and returns the token that releases it.
func (c *Client) lock(ctx context.Context, key string, ttl time.Duration) (held bool, token string, err error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails
	token = hex.EncodeToString(b[:])
	err = c.Call(ctx, OpLock, func(ctx context.Context) error {
		var err error
		held, err = c.rdb.SetNX(ctx, key, token, ttl).Result()
		return err
	})
	return held, token, err
}

// unlockScript deletes a lock only when it is still the caller's: a lock
// that expired and was taken by another instance stays.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// unlock releases the lock named key when it is still held with token.
func (c *Client) unlock(ctx context.Context, key, token string) {
	// The work under the lock may have used up ctx's time; the release
	// must still go out.
	ctx = context.WithoutCancel(ctx)
	_ = c.Call(ctx, OpUnlock, func(ctx context.Context) error {
		return unlockScript.Run(ctx, c.rdb, []string{key}, token).Err()
	})
}

// Failed reports a failed call: counted every time, logged at most once
// per LogInterval.
func (c *Client) Failed(op Op, err error) {
	c.failing.Store(true)
	if c.opts.OnError != nil {
		c.opts.OnError(op, err)
	}
	if c.opts.Log == nil {
		return
	}
	now := time.Now()
	c.logMu.Lock()
	if !c.lastLog.IsZero() && now.Sub(c.lastLog) < c.opts.LogInterval {
		c.unlogged++
		c.logMu.Unlock()
		return
	}
	suppressed := c.unlogged
	c.lastLog, c.unlogged = now, 0
	c.logMu.Unlock()
	c.opts.Log(op, err, suppressed)
}

// succeeded notes a successful call; the first after a failure is logged.
func (c *Client) succeeded(op Op) {
	if !c.failing.Load() || !c.failing.CompareAndSwap(true, false) {
		return
	}
	if c.opts.Log == nil {
		return
	}
	c.logMu.Lock()
	suppressed := c.unlogged
	c.lastLog, c.unlogged = time.Time{}, 0
	c.logMu.Unlock()
	c.opts.Log(op, nil, suppressed)
}

// scan calls fn with every key matching pattern (SCAN MATCH), on every
// primary of a Redis Cluster.
func (c *Client) scan(ctx context.Context, pattern string, fn func(key string)) error {
	var mu sync.Mutex
	each := func(ctx context.Context, r redis.UniversalClient) error {
		iter := r.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			fn(iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return each(ctx, node) })
	}
	return each(ctx, c.rdb)
}

// Publish sends payload on channel (the prefix is added) to every
// instance listening.
func (c *Client) Publish(ctx context.Context, channel, payload string) error {
	return c.Call(ctx, OpPublish, func(ctx context.Context) error {
		return c.rdb.Publish(ctx, c.prefix+channel, payload).Err()
	})
}

// Listen calls fn with the payload of every message published on channel
// (the prefix is added), by any instance, this one included, until the
// returned stop is called. Messages published while the listener's
// connection is down are lost; it reconnects by itself.
func (c *Client) Listen(channel string, fn func(payload string)) (stop func()) {
	full := c.prefix + channel
	l := &listener{fn: fn}
	c.listenMu.Lock()
	set, ok := c.listeners[full]
	if !ok {
		set = make(map[*listener]struct{})
		c.listeners[full] = set
		// The channel is kept even when Redis is down: the listener
		// subscribes to it again on every reconnection.
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		if err := c.pubsub.Subscribe(ctx, full); err != nil {
			c.Failed(OpSubscribe, err)
		}
		cancel()
	}
	set[l] = struct{}{}
	c.listenMu.Unlock()
	return func() {
		c.listenMu.Lock()
		delete(c.listeners[full], l)
		c.listenMu.Unlock()
	}
}

// listen dispatches messages until ctx ends.
func (c *Client) listen(ctx context.Context) {
	defer close(c.done)
	for {
		msg, err := c.pubsub.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.Failed(OpSubscribe, err)
			// Receive reconnects on its next call; do not spin while
			// Redis is away.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		c.succeeded(OpSubscribe)
		m, ok := msg.(*redis.Message)
		if !ok {
			continue // subscription confirmations, pongs
		}
		c.listenMu.Lock()
		fns := make([]func(string), 0, len(c.listeners[m.Channel]))
		for l := range c.listeners[m.Channel] {
			fns = append(fns, l.fn)
		}
		c.listenMu.Unlock()
		for _, fn := range fns {
			fn(m.Payload)
		}
	}
}

// Close stops the listener and closes the connections.
func (c *Client) Close() error {
	c.stop()
	err := c.pubsub.Close()
	<-c.done
	if cerr := c.rdb.Close(); err == nil {
		err = cerr
	}
	return err
}
