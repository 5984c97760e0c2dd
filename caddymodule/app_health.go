package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/health"
	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(HealthAdmin{})
}

// appDefaultHealthPath is where service_app answers its health check
// unless told otherwise, so that a load balancer's probe needs no line in
// the Caddyfile.
const appDefaultHealthPath = "/servicegate/health"

// appHealth holds the health check of every provisioned service_app, for
// the admin API and metrics.
var appHealth health.Registry

// descriptorState is the health state of a descriptor as read at load.
func descriptorState(l *descriptor.Loaded) health.Descriptor {
	if l.Stale {
		return health.Descriptor{State: health.DescriptorLastGood, At: l.KeptAt}
	}
	return health.Descriptor{State: health.DescriptorRead, At: time.Now()}
}

// provisionWaitingHealth sets up the health check of an app whose
// descriptor is still awaited: it reports the descriptor not read (503),
// with Redis, at the health path, which ServeHTTP answers while waiting.
// provisionHealth replaces it once the descriptor is read.
func (a *ServiceApp) provisionWaitingHealth(ctx caddy.Context) error {
	hc, err := a.newHealthCheck(ctx, a.descriptorLabel())
	if err != nil {
		return err
	}
	hc.Checker.Descriptor = func() health.Descriptor { return health.Descriptor{State: health.DescriptorNotRead} }
	if a.Health != "off" {
		hc.Path = cmp.Or(a.Health, appDefaultHealthPath)
	}
	router := a.newRouter(true, nil)
	if hc.Path != "" {
		router.Health(hc.Path, serveHealth(hc))
	}
	a.router.Store(router)
	appHealth.Store(a, hc)
	registerCollector(ctx.GetMetricsRegistry(), prometheus.Collector(descriptorCollector))
	return nil
}

// newHealthCheck is the health check of app with the parts every app has:
// Redis, when the servicegate app holds a client.
func (a *ServiceApp) newHealthCheck(ctx caddy.Context, app string) (*health.App, error) {
	hc := &health.App{Name: app}
	sg, err := servicegateApp(ctx)
	if err != nil {
		return nil, fmt.Errorf("service_app: %w", err)
	}
	if sg != nil {
		c := sg.Client()
		hc.Checker.Redis, hc.Checker.RedisAddress = c.Ping, c.Label()
	}
	return hc, nil
}

// storePinger is what the health check asks of an app's installations:
// whether their store can be read now (nil: it can). A disk store can
// once open; a store in Redis can while Redis answers its ping.
type storePinger interface {
	Ping(ctx context.Context) error
}

// installationsCheck is the health check's view of the app's
// installations: what to ask, and where they are kept; nil without them.
func (a *ServiceApp) installationsCheck() (func(context.Context) error, string) {
	if a.inst == nil {
		return nil, ""
	}
	if p, ok := any(a.inst.book).(storePinger); ok {
		return p.Ping, a.inst.where
	}
	return nil, ""
}

// provisionHealth sets up the app's health check: its endpoint, answered
// before any other route, token or not, and its entry for the admin API.
func (a *ServiceApp) provisionHealth(ctx caddy.Context, f *appRouting) error {
	hc, err := a.newHealthCheck(ctx, cmp.Or(a.desc.Identifier, a.desc.Name))
	if err != nil {
		return err
	}
	hc.Checker.Descriptor = func() health.Descriptor { return a.descState }
	var queues []health.QueueSource
	seen := map[string]bool{}
	for _, rt := range a.Routes {
		m := rt.Webhook
		if m == nil || m.openQueue == nil || seen[m.queueKey] {
			continue
		}
		seen[m.queueKey] = true
		q := health.QueueSource{Where: m.queueAt, Stats: m.queueStats}
		if strings.HasPrefix(m.queueKey, "redis\x00") {
			// A queue in Redis can store as long as Redis answers.
			q.Shared, q.Writable = true, hc.Checker.Redis
		} else {
			// A disk queue: its directory must take a new file.
			dir := filepath.Dir(m.queueKey)
			q.Writable = func(context.Context) error { return health.DirWritable(dir) }
		}
		queues = append(queues, q)
	}
	hc.Checker.Queues = health.QueuesOf(queues)
	hc.Checker.Installations, hc.Checker.InstallationsWhere = a.installationsCheck()
	if a.Health != "off" {
		hc.Path = cmp.Or(a.Health, appDefaultHealthPath)
		if f.router.Takes(hc.Path) || (f.spillPath != "" && strings.HasPrefix(hc.Path, f.spillPath)) {
			return fmt.Errorf("service_app: the health check's path %s is also a path of the app: choose another with health <path>, or turn it off with health off", hc.Path)
		}
		f.router.Health(hc.Path, serveHealth(hc))
	}
	appHealth.Store(a, hc)
	registerCollector(ctx.GetMetricsRegistry(), prometheus.Collector(descriptorCollector))
	return nil
}

// descriptorCollector reports the descriptor of every service_app when
// scraped, by app (the descriptor's identifier, or its file or address,
// without credentials, while it is awaited: bounded by the config):
// servicegate_app_descriptor_ready (0 while the descriptor, an address
// that did not answer at load, is awaited and the site answers 503),
// servicegate_app_descriptor_stale (1 while the last good copy serves
// because the app did not answer it) and
// servicegate_app_descriptor_read_timestamp_seconds (when the copy in use
// was read: a time, not an age, as Prometheus advises). Two blocks of one
// app (or the old and the new config during a reload) report the older
// copy.
var descriptorCollector = &appDescriptorCollector{
	ready: prometheus.NewDesc("servicegate_app_descriptor_ready",
		"1 while service_app has read the app's descriptor and serves the site, 0 while it awaits the descriptor and answers 503, by app.", []string{"app"}, nil),
	stale: prometheus.NewDesc("servicegate_app_descriptor_stale",
		"1 while service_app serves the last good copy of the app's descriptor because the app did not answer it, else 0, by app.", []string{"app"}, nil),
	readAt: prometheus.NewDesc("servicegate_app_descriptor_read_timestamp_seconds",
		"When the copy of the app's descriptor in use was read (Unix time), by app.", []string{"app"}, nil),
}

type appDescriptorCollector struct{ ready, stale, readAt *prometheus.Desc }

func (c *appDescriptorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ready
	ch <- c.stale
	ch <- c.readAt
}

func (c *appDescriptorCollector) Collect(ch chan<- prometheus.Metric) {
	for app, s := range appHealth.Descriptors() {
		notRead, stale := 0.0, 0.0
		if s.NotRead {
			notRead = 1
		}
		if s.Stale {
			stale = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, 1-notRead, app)
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, stale, app)
		if !s.ReadAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.readAt, prometheus.GaugeValue, float64(s.ReadAt.UnixMilli())/1e3, app)
		}
	}
}

// serveHealth answers service_app's health endpoint (see health.App.Serve)
// with the probe's answer, written here even with handle_errors routes, so
// that a 503 carries the state of each part.
func serveHealth(hc *health.App) approute.Handler {
	return func(w http.ResponseWriter, r *http.Request, _ approute.Next) error {
		return hc.Serve(w, r, refuse)
	}
}

// HealthAdmin is the admin API of the health checks: the state of every
// service_app of the config in full (where each part is, what failed, how
// deep each queue is), of which each app's health path answers the names
// and states alone.
//
//	GET /service/health   503 when an app is unavailable, else 200
type HealthAdmin struct{}

// CaddyModule returns the Caddy module information.
func (HealthAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_health",
		New: func() caddy.Module { return new(HealthAdmin) },
	}
}

// Routes returns the admin routes of the module.
func (HealthAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/service/health", Handler: caddy.AdminHandlerFunc(serveHealthAdmin)}}
}

func serveHealthAdmin(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use GET")}
	}
	rep := appHealth.Report(r.Context())
	body, _ := json.Marshal(rep)
	respond.JSON(w, rep.HTTPStatus(), body)
	return nil
}

// Interface guards.
var (
	_ caddy.AdminRouter = HealthAdmin{}
)
