package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("servicegate", parseServicegateOption)
}

// parseServicegateOption sets up the servicegate app from the global option:
//
//	servicegate {
//		redis <url>                                 # one server
//		redis_sentinel <master-name> <host:port>... # or: Sentinel, the sentinels' addresses
//		redis_cluster <host:port>...                # or: some nodes of a Redis Cluster
//		password <password>                         # for the forms without a URL
//		tls on|off
//		replicas <n>
//		replicas_timeout <duration>
//		key_prefix <prefix>
//		timeout <duration>
//	}
//
// or, shorter, servicegate { redis <url> } alone.
func parseServicegateOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("the servicegate global option is given more than once")
	}
	app := new(Servicegate)
	err := parseDirective(d, map[string]subdirective{
		"redis": once(func(d *caddyfile.Dispenser) (err error) {
			at := d.Token()
			if app.Redis, err = oneArg(d); err != nil {
				return err
			}
			if err := checkRedisURL(app.Redis); err != nil {
				return d.Err(err.Error())
			}
			warnWrittenSecret(d, at, "servicegate", "the password in the redis URL", redisURLPassword(app.Redis))
			return nil
		}),
		"redis_sentinel": once(func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) < 2 {
				return d.Errf("redis_sentinel takes the primary's name, then at least one sentinel's host:port")
			}
			app.RedisSentinel = &RedisSentinel{Master: args[0], Addresses: args[1:]}
			return nil
		}),
		"redis_cluster": once(func(d *caddyfile.Dispenser) (err error) {
			app.RedisCluster, err = someArgs(d)
			return err
		}),
		"password":         once(secretArg("servicegate", &app.Password)),
		"tls":              once(onOffTo(&app.TLS)),
		"key_prefix":       once(stringArg(&app.KeyPrefix)),
		"timeout":          once(durationTo(&app.Timeout)),
		"replicas":         once(intTo(&app.Replicas, 0)),
		"replicas_timeout": once(durationTo(&app.ReplicasTimeout)),
	})
	if err != nil {
		return nil, err
	}
	if err := app.check(); err != nil {
		return nil, directiveErr(d, err)
	}
	return httpcaddyfile.App{Name: "servicegate", Value: caddyconfig.JSON(app, nil)}, nil
}

// redisURLPassword is the password a Redis URL carries
// (rediss://:password@host:port), or "".
func redisURLPassword(redisURL string) string {
	_, rest, ok := strings.Cut(redisURL, "://")
	if !ok {
		return ""
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, password, _ := strings.Cut(rest[:at], ":")
	return password
}

// checkRedisURL refuses a redis address that does not start with
// redis:// or rediss://, as checkAddress refuses an http(s) address
// without its scheme. A value that starts with a placeholder is checked
// once it is resolved (Provision). Errors never quote the password the
// URL may hold.
func checkRedisURL(value string) error {
	if value == "" || strings.HasPrefix(value, "{") {
		return nil
	}
	literal, _, _ := strings.Cut(value, "{")
	shown := withoutUserInfo(value)
	scheme, _, ok := strings.Cut(literal, "://")
	switch {
	case !ok:
		return fmt.Errorf("servicegate redis %s has no scheme: write redis://%s (or rediss:// for TLS)", strconv.Quote(shown), shown)
	case !strings.EqualFold(scheme, "redis") && !strings.EqualFold(scheme, "rediss"):
		return fmt.Errorf("servicegate redis %s is not a Redis URL (its scheme is %s): write redis://host:port/db or rediss://…", strconv.Quote(shown), strconv.Quote(scheme))
	}
	return nil
}
