package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

// Options configure a Client.
type Options struct {
	// URL is the Redis server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS (see redis.ParseURL for the query options).
	URL string
	// KeyPrefix starts every key and channel name. Default
	// DefaultKeyPrefix.
	KeyPrefix string
	// Timeout bounds each Redis call. Default DefaultTimeout.
	Timeout time.Duration
	// OnError, when set, is called for every failed call (for a metric).
	OnError func(op Op, err error)
	// Log, when set, is told of Redis' health: a failure (err non-nil) at
	// most once per LogInterval, with how many failures went unlogged
	// since the last line; and the first success after a failure (err nil).
	Log func(op Op, err error, suppressed int)
	// LogInterval is the least time between two failure lines. Default
	// DefaultLogInterval.
	LogInterval time.Duration
	// Now is the clock answers' lifetimes are computed with. Default
	// time.Now.
	Now func() time.Time
}

// Client is one connection pool to a Redis server and one pub/sub
// listener, shared by everything that uses the same server and prefix. Its
// methods are safe for concurrent use.
type Client struct {
	rdb     *redis.Client
	prefix  string
	timeout time.Duration
	opts    Options
	addr    string

	failing  atomic.Bool
	logMu    sync.Mutex
	lastLog  time.Time
	unlogged int

	listenMu  sync.Mutex
	listeners map[string]map[*listener]struct{} // by full channel name
	pubsub    *redis.PubSub
	stop      context.CancelFunc
	done      chan struct{}
}

type listener struct{ fn func(payload string) }

// New returns a Client for o.URL. It does not wait for Redis: a server
// that is down is reported on first use, and the client recovers by
// itself when it is back.
func New(o Options) (*Client, error) {
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		// ParseURL's errors may quote the URL, password included.
		return nil, errors.New("the Redis URL is not of the form redis://[user:password@]host:port/db or rediss://…")
	}
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
	ro.ContextTimeoutEnabled = true
	ro.DialTimeout = o.Timeout
	ro.ReadTimeout = o.Timeout
	ro.WriteTimeout = o.Timeout
	ro.PoolTimeout = o.Timeout
	ro.MaxRetries = 1
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	c := &Client{
		rdb:       redis.NewClient(ro),
		prefix:    o.KeyPrefix,
		timeout:   o.Timeout,
		opts:      o,
		addr:      ro.Addr,
		listeners: make(map[string]map[*listener]struct{}),
		done:      make(chan struct{}),
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	// The listener's connection blocks on reads: it must not use the
	// per-call read timeout. It pings Redis itself and reconnects.
	c.pubsub = c.rdb.Subscribe(ctx)
	go c.listen(ctx)
	return c, nil
}

// Addr is the host:port of the Redis server, without credentials: safe to log.
func (c *Client) Addr() string { return c.addr }

// Prefix is the key prefix.
func (c *Client) Prefix() string { return c.prefix }

// Redis is the underlying go-redis client, for the parts of servicegate
// that build their own commands on this Client's connections. Bound each
// call with Call.
func (c *Client) Redis() *redis.Client { return c.rdb }

// Call runs fn with a context bounded by the Client's timeout and reports
// its error as op; redis.Nil (no such key) is not a failure.
func (c *Client) Call(ctx context.Context, op Op, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
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
