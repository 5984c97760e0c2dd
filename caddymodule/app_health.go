package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/health"
	"github.com/servicegate/servicegate/queue"
	"github.com/servicegate/servicegate/respond"
)

func init() {
	caddy.RegisterModule(HealthAdmin{})
}

// appDefaultHealthPath is where service_app answers its health check
// unless told otherwise, so that a load balancer's probe needs no line in
// the Caddyfile.
const appDefaultHealthPath = "/servicegate/health"

// appHealthTimeout bounds one health check (a Redis ping, a file created
// in each disk queue's directory).
const appHealthTimeout = 2 * time.Second

// appHealth holds the health check of every provisioned service_app, for
// the admin API.
var appHealth sync.Map // *ServiceApp → *appHealthCheck

// appHealthCheck is the health check of one service_app.
type appHealthCheck struct {
	app     string // the descriptor's identifier, or its name
	path    string // "" when the endpoint is off
	checker health.Checker
}

// descriptorState is the health state of a descriptor as read at load.
func descriptorState(l *descriptor.Loaded) health.Descriptor {
	if l.Stale {
		return health.Descriptor{State: health.DescriptorLastGood, At: l.KeptAt}
	}
	return health.Descriptor{State: health.DescriptorRead, At: time.Now()}
}

// provisionHealth sets up the app's health check: its endpoint among the
// exact paths, so that it is answered before any token check, and its
// entry for the admin API. It runs last in Provision: on an error it lets
// go of what the routes hold, as Caddy cleans up only modules that
// provisioned.
func (a *ServiceApp) provisionHealth(ctx caddy.Context, f *appRouting) error {
	if err := a.setUpHealth(ctx, f); err != nil {
		_ = a.cleanupHandlers()
		return err
	}
	return nil
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
	hc.checker.Descriptor = func() health.Descriptor { return health.Descriptor{State: health.DescriptorNotRead} }
	if a.Health != "off" {
		hc.path = cmp.Or(a.Health, appDefaultHealthPath)
	}
	router := a.newRouter(true)
	if hc.path != "" {
		router.Health(hc.path, routed(appHealthHandler{hc}))
	}
	a.router.Store(router)
	appHealth.Store(a, hc)
	registerCollector(ctx.GetMetricsRegistry(), prometheus.Collector(descriptorCollector))
	return nil
}

// newHealthCheck is the health check of app with the parts every app has:
// Redis, when the servicegate app holds a client.
func (a *ServiceApp) newHealthCheck(ctx caddy.Context, app string) (*appHealthCheck, error) {
	hc := &appHealthCheck{app: app}
	sg, err := servicegateApp(ctx)
	if err != nil {
		return nil, fmt.Errorf("service_app: %w", err)
	}
	if sg != nil {
		c := sg.Client()
		hc.checker.Redis, hc.checker.RedisAddress = c.Ping, c.Addr()
	}
	return hc, nil
}

func (a *ServiceApp) setUpHealth(ctx caddy.Context, f *appRouting) error {
	hc, err := a.newHealthCheck(ctx, cmp.Or(a.desc.Identifier, a.desc.Name))
	if err != nil {
		return err
	}
	hc.checker.Descriptor = func() health.Descriptor { return a.descState }
	var queues []appQueueHealth
	seen := map[string]bool{}
	for _, rt := range a.Routes {
		m := rt.Webhook
		if m == nil || m.queue == nil || seen[m.queueKey] {
			continue
		}
		seen[m.queueKey] = true
		q := appQueueHealth{where: m.queueAt, stats: m.queue.Stats}
		if !strings.HasPrefix(m.queueKey, "redis\x00") {
			// A disk queue: its directory must take a new file. A queue
			// in Redis can store as long as Redis answers.
			dir := filepath.Dir(m.queueKey)
			q.writable = func(context.Context) error { return health.DirWritable(dir) }
		}
		queues = append(queues, q)
	}
	if len(queues) > 0 {
		hc.checker.Queues = func() []health.Queue {
			out := make([]health.Queue, len(queues))
			for i, q := range queues {
				s := q.stats()
				out[i] = health.Queue{Where: q.where, Depth: s.Depth, Oldest: s.Oldest, Writable: q.writable}
			}
			return out
		}
	}
	if a.Health != "off" {
		hc.path = cmp.Or(a.Health, appDefaultHealthPath)
		if f.router.Routes(hc.path) || (f.spillPath != "" && strings.HasPrefix(hc.path, f.spillPath)) {
			return fmt.Errorf("service_app: the health check's path %s is also a path of the app: choose another with health <path>, or turn it off with health off", hc.path)
		}
		f.router.Health(hc.path, routed(appHealthHandler{hc}))
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
	type state struct {
		notRead, stale float64
		readAt         time.Time
	}
	byApp := map[string]state{}
	appHealth.Range(func(_, v any) bool {
		hc := v.(*appHealthCheck)
		d := hc.checker.Descriptor()
		s := byApp[hc.app]
		switch d.State {
		case health.DescriptorNotRead:
			s.notRead = 1
		case health.DescriptorLastGood:
			s.stale = 1
		}
		if !d.At.IsZero() && (s.readAt.IsZero() || d.At.Before(s.readAt)) {
			s.readAt = d.At
		}
		byApp[hc.app] = s
		return true
	})
	for app, s := range byApp {
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, 1-s.notRead, app)
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, s.stale, app)
		if !s.readAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.readAt, prometheus.GaugeValue, float64(s.readAt.UnixMilli())/1e3, app)
		}
	}
}

// appQueueHealth is what the health check reads of one webhook queue.
type appQueueHealth struct {
	where    string
	stats    func() queue.Stats
	writable func(context.Context) error
}

// check runs the health check, bounded by appHealthTimeout.
func (hc *appHealthCheck) check(ctx context.Context) health.Report {
	ctx, cancel := context.WithTimeout(ctx, appHealthTimeout)
	defer cancel()
	return hc.checker.Check(ctx)
}

// appHealthHandler answers service_app's health endpoint: GET or HEAD,
// no token, 200 when the app can serve and 503 with the reason when it
// cannot. The answer is the probe's, written here even with handle_errors
// routes, so that a 503 carries the state of each part.
type appHealthHandler struct{ hc *appHealthCheck }

func (h appHealthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(w, r, http.StatusMethodNotAllowed, "The health check answers GET and HEAD only.")
	}
	rep := h.hc.check(r.Context())
	body, err := json.Marshal(rep)
	if err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.HTTPStatus())
		return nil
	}
	respond.JSON(w, rep.HTTPStatus(), body)
	return nil
}

// HealthAdmin is the admin API of the health checks: the state of every
// service_app of the config, as each answers on its own health path.
//
//	GET /service/health   200 when every app can serve, else 503
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

// appHealthReport is one app's part of the admin answer.
type appHealthReport struct {
	App  string `json:"app"`
	Path string `json:"path,omitempty"`
	health.Report
}

func serveHealthAdmin(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("use GET")}
	}
	apps := []appHealthReport{}
	appHealth.Range(func(_, v any) bool {
		hc := v.(*appHealthCheck)
		apps = append(apps, appHealthReport{App: hc.app, Path: hc.path, Report: hc.check(r.Context())})
		return true
	})
	slices.SortFunc(apps, func(x, y appHealthReport) int { return cmp.Compare(x.App, y.App) })
	status, code := health.StatusOK, http.StatusOK
	for _, a := range apps {
		if !a.OK() {
			status, code = health.StatusUnavailable, http.StatusServiceUnavailable
		}
	}
	body, _ := json.Marshal(struct {
		Status string            `json:"status"`
		Apps   []appHealthReport `json:"apps"`
	}{status, apps})
	respond.JSON(w, code, body)
	return nil
}

// Interface guards.
var (
	_ caddy.AdminRouter           = HealthAdmin{}
	_ caddyhttp.MiddlewareHandler = appHealthHandler{}
)
