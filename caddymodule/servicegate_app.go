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
	caddy.RegisterModule(new(App))
}

// App is the Caddy app "servicegate": what several servicegate instances
// share. Configured, it connects them through one Redis server
// (subscription answers and their purges, spilled payloads); not configured, every
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
type App struct {
	// Redis is the Redis server the instances share:
	// redis://[user:password@]host:port/db, or rediss:// for TLS. {env.*}
	// and {file.*} placeholders are resolved when the config loads, so the
	// password need not be written into the config. Required.
	Redis string `json:"redis,omitempty"`

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

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "servicegate",
		New: func() caddy.Module { return new(App) },
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

// Provision resolves the URL's placeholders and takes the shared client.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if a.Redis == "" {
		return errors.New("servicegate: redis <url> is required")
	}
	if a.Timeout < 0 {
		return errors.New("servicegate: timeout must not be negative")
	}
	u, err := caddy.NewReplacer().ReplaceOrErr(a.Redis, true, true)
	if err != nil {
		return fmt.Errorf("servicegate redis: %w", err)
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") || pu.Host == "" {
		// The URL may hold a password: never quote it.
		return errors.New("servicegate redis: the URL is not of the form redis://[user:password@]host:port/db or rediss://…")
	}
	o := cluster.Options{
		URL:       u,
		KeyPrefix: a.KeyPrefix,
		Timeout:   time.Duration(a.Timeout),
		OnError:   func(op cluster.Op, _ error) { redisErrorsBy[op].Inc() },
		Log:       logRedisHealth,
		Now:       func() time.Time { return subscriptionNow() },
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = cluster.DefaultKeyPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = cluster.DefaultTimeout
	}
	a.poolKey = strings.Join([]string{u, o.KeyPrefix, o.Timeout.String()}, "\x00")
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
	log.Error("Redis call failed: serving from this instance alone (subscriptions from the local cache and direct queries; OAuth sessions and sign-ins kept in Redis answer 503) until it answers again",
		zap.Stringer("op", op), zap.Error(err), zap.Int("failures_not_logged", suppressed))
}

// Start does nothing: the client connects on first use.
func (a *App) Start() error {
	a.logger.Info("sharing state through Redis", zap.String("address", a.client.Addr()), zap.String("key_prefix", a.client.Prefix()))
	return nil
}

// Stop does nothing; Cleanup lets go of the client.
func (a *App) Stop() error { return nil }

// Cleanup lets go of the shared client; the last config to use it closes it.
func (a *App) Cleanup() error {
	if a.client != nil {
		_, _ = redisClients.Delete(a.poolKey)
	}
	return nil
}

// Subscriptions is the sharing of subscription answers.
func (a *App) Subscriptions() *cluster.Subscriptions { return a.subs }

// Client is the shared Redis client, for the parts of servicegate that keep
// their own state in Redis.
func (a *App) Client() *cluster.Client { return a.client }

// servicegateApp returns the servicegate app of the config being loaded, or
// nil when it is not configured: then nothing is shared and no Redis is
// contacted.
func servicegateApp(ctx caddy.Context) (*App, error) {
	v, err := ctx.AppIfConfigured("servicegate")
	if errors.Is(err, caddy.ErrNotConfigured) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.(*App), nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
