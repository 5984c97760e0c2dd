package caddymodule

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/cluster"
)

func init() {
	caddy.RegisterModule(new(Servicegate))
}

// Servicegate is the Caddy app "servicegate": what several servicegate instances
// share. Configured, it connects them through Redis: one server, a primary
// watched by Redis Sentinel, or a Redis Cluster (subscription answers and
// their purges, spilled payloads, sign-ins, the webhook queue); not configured, every
// instance keeps everything in its own process and no Redis is ever
// contacted. Every servicegate handler finds it through the Caddy context.
//
// In a Caddyfile it is the global option
//
//	{
//		servicegate {
//			redis rediss://:{env.REDIS_PASSWORD}@redis.internal:6380/0
//			key_prefix servicegate:
//			timeout 250ms
//		}
//	}
//
// or, without a single point of failure,
//
//	servicegate {
//		redis_sentinel mymaster 10.0.0.1:26379 10.0.0.2:26379 10.0.0.3:26379
//		password {env.REDIS_PASSWORD}
//		replicas 1
//	}
type Servicegate struct {
	// Redis is the Redis server the instances share:
	// redis://[user:password@]host:port/db, or rediss:// for TLS. {env.*}
	// and {file.*} placeholders are resolved when the config loads, so the
	// password need not be written into the config. Exactly one of Redis,
	// RedisSentinel and RedisCluster is required.
	Redis string `json:"redis,omitempty"`

	// RedisSentinel is a Redis primary watched by Redis Sentinel: the
	// instances follow it when the sentinels promote a replica.
	RedisSentinel *RedisSentinel `json:"redis_sentinel,omitempty"`

	// RedisCluster is some nodes (host:port) of a Redis Cluster; the
	// others are learnt from them.
	RedisCluster []string `json:"redis_cluster,omitempty"`

	// Password authenticates to the RedisSentinel or RedisCluster nodes
	// and to the sentinels; placeholders are resolved when the config
	// loads. A Redis URL carries its own.
	Password string `json:"password,omitempty"`

	// TLS connects to the RedisSentinel or RedisCluster nodes with TLS. A
	// Redis URL says it with rediss://.
	TLS bool `json:"tls,omitempty"`

	// Replicas is how many replicas must hold a write whose loss would
	// lose something acknowledged (a queued webhook delivery before its
	// 202, a dead letter, a replay) before it counts as done; fewer
	// within ReplicasTimeout and the write fails (the service gets 503
	// with Retry-After and sends again). Reads and caches never wait.
	// Default 0: Redis replicates asynchronously, and a primary that dies
	// may take its last acknowledged writes with it.
	Replicas int `json:"replicas,omitempty"`

	// ReplicasTimeout bounds the wait for Replicas. Default 500ms.
	ReplicasTimeout caddy.Duration `json:"replicas_timeout,omitempty"`

	// KeyPrefix starts every Redis key and pub/sub channel servicegate
	// uses, so that several clusters (or other programs) can share one
	// Redis. Default "servicegate:".
	KeyPrefix string `json:"key_prefix,omitempty"`

	// Timeout bounds each Redis call. A call that takes longer counts as a
	// Redis failure: the handler goes on as a lone instance would.
	// Default 250ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	client  *cluster.Client
	poolKey string
	subs    *cluster.Subscriptions
	logger  *zap.Logger
}

// RedisSentinel names a primary watched by Redis Sentinel.
type RedisSentinel struct {
	// Master is the name the sentinels know the primary by.
	Master string `json:"master,omitempty"`
	// Addresses are the sentinels' host:port.
	Addresses []string `json:"addresses,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*Servicegate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "servicegate",
		New: func() caddy.Module { return new(Servicegate) },
	}
}

// redisClients holds the Redis clients, one per server, key prefix and
// timeout, kept across config reloads so that a reload keeps its
// connections (the new config takes its reference before the old one lets
// go).
var redisClients = caddy.NewUsagePool()

// redisClient is a cluster.Client held in redisClients.
type redisClient struct {
	*cluster.Client
	stopForget func()
}

// Destruct closes the client's connections and its listener.
func (c redisClient) Destruct() error {
	c.stopForget()
	return c.Close()
}

// Provision resolves the placeholders and takes the shared client.
func (a *Servicegate) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	o, err := a.clientOptions()
	if err != nil {
		return err
	}
	a.poolKey = poolKeyOf(o)
	v, _, err := redisClients.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		c, err := cluster.New(o)
		if err != nil {
			return nil, err
		}
		// A purge on any instance reaches this one here, whatever
		// config is loaded when it arrives.
		stop := c.Subscriptions().OnForget(func(org string) { forgetLocalSubscriptions(org) })
		return redisClient{Client: c, stopForget: stop}, nil
	})
	if err != nil {
		return fmt.Errorf("servicegate redis: %w", err)
	}
	a.client = v.(redisClient).Client
	a.subs = a.client.Subscriptions()
	registerRedisMetrics(ctx.GetMetricsRegistry())
	return nil
}

// clientOptions checks the config and turns it into the client's options,
// placeholders resolved. Its errors never quote a URL or a password.
func (a *Servicegate) clientOptions() (cluster.Options, error) {
	if err := a.check(); err != nil {
		return cluster.Options{}, err
	}
	repl := caddy.NewReplacer()
	o := cluster.Options{
		KeyPrefix:       a.KeyPrefix,
		Timeout:         time.Duration(a.Timeout),
		TLS:             a.TLS,
		Replicas:        a.Replicas,
		ReplicasTimeout: time.Duration(a.ReplicasTimeout),
		OnError:         func(op cluster.Op, _ error) { redisErrorsBy[op].Inc() },
		OnReplicasWait:  observeReplicasWait,
		Log:             logRedisHealth,
		OnPrimary:       reportRedisPrimary,
	}
	if a.Redis != "" {
		u, err := repl.ReplaceOrErr(a.Redis, true, true)
		if err != nil {
			return o, fmt.Errorf("servicegate redis: %w", err)
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") || pu.Host == "" {
			// The URL may hold a password: never quote it.
			return o, errors.New("servicegate redis: the URL is not of the form redis://[user:password@]host:port/db or rediss://…")
		}
		o.URL = u
	}
	if a.RedisSentinel != nil {
		o.Sentinel = &cluster.Sentinel{Master: a.RedisSentinel.Master, Addrs: a.RedisSentinel.Addresses}
	}
	o.Cluster = a.RedisCluster
	if a.Password != "" {
		p, err := repl.ReplaceOrErr(a.Password, true, true)
		if err != nil {
			return o, fmt.Errorf("servicegate password: %w", err)
		}
		o.Password = p
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = cluster.DefaultKeyPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = cluster.DefaultTimeout
	}
	if o.ReplicasTimeout == 0 {
		o.ReplicasTimeout = cluster.DefaultReplicasTimeout
	}
	return o, nil
}

// check refuses what is wrong whatever the placeholders hold: for
// Provision, and for the Caddyfile at the option's line.
func (a *Servicegate) check() error {
	forms := 0
	for _, set := range []bool{a.Redis != "", a.RedisSentinel != nil, len(a.RedisCluster) > 0} {
		if set {
			forms++
		}
	}
	switch {
	case forms != 1:
		return errors.New(errOneRedisForm)
	case a.Redis != "" && (a.Password != "" || a.TLS):
		return errors.New(errURLCarriesPassword)
	case checkRedisURL(a.Redis) != nil:
		return checkRedisURL(a.Redis)
	case a.RedisSentinel != nil && (a.RedisSentinel.Master == "" || len(a.RedisSentinel.Addresses) == 0):
		return errors.New("servicegate redis_sentinel: give the primary's name, then at least one sentinel's host:port")
	case a.Timeout < 0:
		return errors.New("servicegate: timeout must not be negative")
	case a.Replicas < 0:
		return errors.New("servicegate: replicas must not be negative")
	case a.ReplicasTimeout < 0:
		return errors.New("servicegate: replicas_timeout must not be negative")
	}
	return nil
}

// The whole-option errors.
const (
	errOneRedisForm       = "servicegate: give exactly one of redis <url>, redis_sentinel <master> <host:port> [<host:port>…] and redis_cluster <host:port> [<host:port>…]"
	errURLCarriesPassword = "servicegate: password and tls go with redis_sentinel and redis_cluster; a redis URL carries its own (rediss://:password@host:port)"
)

// poolKeyOf is the key of the shared client for o: configs that name the
// same Redis the same way share one client.
func poolKeyOf(o cluster.Options) string {
	var sentinel string
	if o.Sentinel != nil {
		sentinel = o.Sentinel.Master + "@" + strings.Join(o.Sentinel.Addrs, ",")
	}
	return strings.Join([]string{o.URL, sentinel, strings.Join(o.Cluster, ","), o.Password, fmt.Sprint(o.TLS),
		o.KeyPrefix, o.Timeout.String(), fmt.Sprint(o.Replicas), o.ReplicasTimeout.String()}, "\x00")
}

// logRedisHealth writes the rate-limited lines about Redis: a failure, or
// the return of Redis after failures. They go to Caddy's default logger at
// the time of writing: the client outlives the config that created it.
func logRedisHealth(op cluster.Op, err error, suppressed int) {
	log := caddy.Log().Named("servicegate.redis")
	if err == nil {
		log.Info("Redis answers again: sharing state with the other instances",
			zap.Int("failures_not_logged", suppressed))
		return
	}
	if errors.Is(err, cluster.ErrReplicas) {
		log.Error("Redis replicas did not confirm a write in time (servicegate replicas): deliveries and replays are refused with 503 until they do",
			zap.Stringer("op", op), zap.Error(err), zap.Int("failures_not_logged", suppressed))
		return
	}
	log.Error("Redis call failed: serving from this instance alone (subscriptions from the local cache and direct queries; OAuth sessions and sign-ins kept in Redis answer 503) until it answers again",
		zap.Stringer("op", op), zap.Error(err), zap.Int("failures_not_logged", suppressed))
}

// reportRedisPrimary tells, once per change, which Redis primary the
// instance reaches through Sentinel: a log line and the
// servicegate_redis_primary gauge.
func reportRedisPrimary(was, now string) {
	if was != "" {
		redisPrimary.DeleteLabelValues(was)
	}
	redisPrimary.WithLabelValues(now).Set(1)
	log := caddy.Log().Named("servicegate.redis")
	if was == "" {
		log.Info("Redis primary found through Sentinel", zap.String("primary", now))
		return
	}
	log.Warn("Redis primary changed: Sentinel promoted a replica", zap.String("primary", now), zap.String("was", was))
}

// Start does nothing: the client connects on first use.
func (a *Servicegate) Start() error {
	a.logger.Info("sharing state through Redis", zap.String("address", a.client.Addr()), zap.String("key_prefix", a.client.Prefix()))
	return nil
}

// Stop does nothing; Cleanup lets go of the client.
func (a *Servicegate) Stop() error { return nil }

// Cleanup lets go of the shared client; the last config to use it closes it.
func (a *Servicegate) Cleanup() error {
	if a.client != nil {
		_, _ = redisClients.Delete(a.poolKey)
	}
	return nil
}

// Subscriptions is the sharing of subscription answers.
func (a *Servicegate) Subscriptions() *cluster.Subscriptions { return a.subs }

// Client is the shared Redis client, for the parts of servicegate that keep
// their own state in Redis.
func (a *Servicegate) Client() *cluster.Client { return a.client }

// servicegateApp returns the servicegate app of the config being loaded, or
// nil when it is not configured: then nothing is shared and no Redis is
// contacted.
func servicegateApp(ctx caddy.Context) (*Servicegate, error) {
	v, err := ctx.AppIfConfigured("servicegate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.(*Servicegate), nil
}

// Interface guards.
var (
	_ caddy.App          = (*Servicegate)(nil)
	_ caddy.Provisioner  = (*Servicegate)(nil)
	_ caddy.CleanerUpper = (*Servicegate)(nil)
)
