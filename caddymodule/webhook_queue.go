package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/cluster"
	"github.com/servicegate/servicegate/queue"
	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/siteorigin"
	"github.com/servicegate/servicegate/spans"
	"github.com/servicegate/servicegate/webhook"
)

// WebhookQueue makes service_webhook answer the service itself once a
// verified delivery is stored durably, then deliver it to the app with
// retries: no event is lost while the app is down, restarting or slow.
// Deliveries go to To with their original method, path, headers and exact
// body, plus X-Servicegate-Delivery-Id (the same on every attempt, for the
// app to deduplicate) and X-Servicegate-Attempt; their Host and
// X-Forwarded-Host are the site's own host (see forwardedHeader). The answers 2xx (done),
// 408, 425, 429, 5xx, a timeout or no connection (tried again with
// exponential backoff and jitter, Retry-After honoured) and any other
// (set aside at once as a dead letter) decide what happens next; one
// organization's deliveries reach the app in the order received.
//
// The deliveries are kept on disk (an embedded bbolt file), or, when the
// servicegate app shares state through Redis, in Redis streams: then
// every instance delivering to the same app shares one queue, any of them
// delivers, and the deliveries an instance was sending when it died are
// sent by another once its lease runs out (twice Timeout plus a second,
// plus twice the servicegate app's Redis timeout).
type WebhookQueue struct {
	// To is the app's address (scheme, host and port), e.g.
	// http://127.0.0.1:3000. Required.
	To string `json:"to,omitempty"`

	// Store is where deliveries are kept: "disk" (Dir) or "redis" (the
	// servicegate app's Redis, shared by the instances). Default: redis
	// when the servicegate app configures Redis, else disk.
	Store string `json:"store,omitempty"`

	// Dir holds the queue's file (store disk). Handlers naming the same directory share
	// one queue (each delivery keeps its own To); its delivery settings
	// below are those of the config that opened it, kept across reloads
	// until no config uses it. Default: servicegate/webhook-queue in
	// Caddy's data directory.
	Dir string `json:"dir,omitempty"`

	// Concurrency caps the deliveries in flight toward the app. Default 8.
	Concurrency int `json:"concurrency,omitempty"`

	// MaxAge gives a delivery up once it is this old. Default 72h.
	MaxAge caddy.Duration `json:"max_age,omitempty"`

	// MaxAttempts, when set, gives a delivery up after that many attempts.
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Timeout bounds one attempt. Default: service_webhook's timeout
	// (30s unless set).
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Dedup, when set, drops a delivery identical (same organization and
	// body) to one received within it. Off by default: the service sends
	// no delivery id, and identical bulk bodies can be legitimate.
	Dedup caddy.Duration `json:"dedup,omitempty"`
}

// webhookQueues holds each open queue by its file, so that a config reload
// keeps the queue and its workers (neither duplicated nor lost) and
// handlers naming one directory share it.
var webhookQueues = caddy.NewUsagePool()

// pooledQueue is a queue in the pool: where it keeps its deliveries (its
// directory, or its Redis in words and keys, as cluster.Queue.Where names
// them), and what to let go of once it is closed.
type pooledQueue struct {
	queue.Deliveries
	where   string
	release func()
}

// Destruct closes the queue when no config uses it any more.
func (p pooledQueue) Destruct() error {
	err := p.Deliveries.Close()
	if p.release != nil {
		p.release()
	}
	return err
}

// The queue's metrics, created once per process.
var (
	webhookQueueAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "servicegate", Subsystem: "webhook_queue", Name: "attempts_total",
		Help: "Attempts to deliver a queued webhook delivery to the app, by outcome (delivered, retry, dead).",
	}, []string{"outcome"})
	webhookQueueCollector = &queueCollector{
		depth:  prometheus.NewDesc("servicegate_webhook_queue_depth", "Deliveries waiting or in flight toward the app, by queue (its directory, or its Redis in words and keys).", []string{"dir"}, nil),
		oldest: prometheus.NewDesc("servicegate_webhook_queue_oldest_age_seconds", "Age of the oldest delivery not yet delivered, by queue (its directory, or its Redis in words and keys).", []string{"dir"}, nil),
	}
)

// queueCollector reports the state of every open queue when scraped.
type queueCollector struct{ depth, oldest *prometheus.Desc }

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.depth; ch <- c.oldest }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	webhookQueues.Range(func(key, v any) bool {
		p, ok := v.(pooledQueue)
		if !ok {
			return true
		}
		dir := p.where
		s := p.Stats()
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(s.Depth), dir)
		age := 0.0
		if !s.Oldest.IsZero() {
			age = now.Sub(s.Oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, dir)
		return true
	})
}

// provisionQueue opens (or joins) the handler's queue.
func (m *ServiceWebhook) provisionQueue(ctx caddy.Context) error {
	qc := m.Queue
	repl := caddy.NewReplacer()
	to := strings.TrimSuffix(repl.ReplaceKnown(qc.To, ""), "/")
	if u, err := url.Parse(to); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("service_webhook: queue: to %q is not the app's address, such as http://127.0.0.1:3000", qc.To)
	}
	m.queueTo = to
	if m.origin == nil {
		site := &siteOrigin{fix: "queued deliveries then carry no X-Forwarded-Host"}
		m.origin = func(r *http.Request) (string, error) { return site.of(r, m) }
	}
	app, err := servicegateApp(ctx)
	if err != nil {
		return fmt.Errorf("service_webhook: queue: %w", err)
	}
	store, left := queueStore(qc, app != nil)
	if store == "redis" && app == nil {
		return errors.New("service_webhook: queue: store redis needs the servicegate app's redis option (a global servicegate { redis <url> } block)")
	}
	if left != "" {
		m.logger.Warn("a disk webhook queue from before the servicegate redis option is not being delivered: deliveries still in it wait until a config with store disk delivers them (list them with GET /service/webhook/queue), then remove the file",
			zap.String("file", left))
	}
	reg := ctx.GetMetricsRegistry()
	names := make([]string, queue.NumOutcomes)
	for o := range queue.NumOutcomes {
		names[o] = o.String()
	}
	attempts := newOutcomeCounters[queue.Outcome](reg, webhookQueueAttempts, names)
	registerCollector(reg, prometheus.Collector(webhookQueueCollector))
	logger := caddy.Log().Named("http.handlers.service_webhook.queue")
	opts := queue.Options{
		Concurrency: qc.Concurrency,
		MaxAge:      time.Duration(qc.MaxAge),
		MaxAttempts: qc.MaxAttempts,
		Dedup:       time.Duration(qc.Dedup),
		OnOutcome:   func(o queue.Outcome) { attempts.inc(o) },
		OnDead: func(dm queue.Meta) {
			logger.Warn("webhook delivery set aside as a dead letter; replay it through the admin API once the app is fixed",
				zap.String("id", dm.ID), zap.String("organization", dm.Organization), zap.String("uri", dm.URI),
				zap.Int("attempts", dm.Attempts), zap.String("reason", dm.Dead))
		},
		OnError: func(err error) { logger.Error("webhook queue", zap.Error(err)) },
	}
	// The queue's own timeout, else the handler's, bounds each attempt.
	sender := &queue.HTTPSender{Timeout: time.Duration(cmp.Or(qc.Timeout, m.Timeout)), Spans: &webhookAttemptSpans}
	if appToken := m.appToken; appToken != nil {
		sender.Prepare = func(ctx context.Context, qm queue.Meta, h http.Header) { appToken(ctx, qm.Organization, h) }
	}
	open := m.openSharedQueue
	if store != "redis" {
		open = m.openDiskQueue
	}
	learnQueueTracer(ctx)
	return m.startQueue(ctx, store == "redis", open(app, sender, opts, logger))
}

// openSharedQueue returns what opens the queue of m's app in Redis, shared
// by every instance delivering to it, and sets the handler's pool key. The
// queue holds a reference to the app's Redis client until it is closed.
// As it opens, it moves the deliveries an earlier version kept under its
// Redis keys into the current ones, and logs how many.
func (m *ServiceWebhook) openSharedQueue(app *Servicegate, sender *queue.HTTPSender, opts queue.Options, logger *zap.Logger) func() (caddy.Destructor, error) {
	c := app.Client()
	m.queueKey = "redis\x00" + app.poolKey + "\x00" + m.queueTo
	return func() (caddy.Destructor, error) {
		v, _ := redisClients.LoadOrStore(app.poolKey, nil) // one more user of the client
		if _, ok := v.(redisClient); !ok {
			_, _ = redisClients.Delete(app.poolKey)
			return nil, errors.New("the servicegate app's Redis client is gone")
		}
		timeout := cmp.Or(sender.Timeout, queue.DefaultTimeout)
		moved := func(deliveries, dead int) {
			logger.Info("moved the webhook deliveries an earlier version kept under its Redis keys into the current ones",
				zap.String("to", m.queueTo), zap.Int("deliveries", deliveries), zap.Int("dead_letters", dead))
		}
		q, err := c.OpenQueue(sender, opts, cluster.QueueOptions{Name: m.queueTo, Lease: cluster.QueueLease(timeout), Moved: moved})
		if err != nil {
			_, _ = redisClients.Delete(app.poolKey)
			return nil, err
		}
		return pooledQueue{
			Deliveries: q,
			where:      q.Where(),
			release:    func() { _, _ = redisClients.Delete(app.poolKey) },
		}, nil
	}
}

// cleanupQueue lets go of the handler's queue; the last config to use it
// closes it.
func (m *ServiceWebhook) cleanupQueue() error {
	if m.queue == nil {
		return nil
	}
	m.queue = nil
	_, err := webhookQueues.Delete(m.queueKey)
	return err
}

// enqueue stores a verified delivery and answers the service: 202 once it
// is on disk, 503 (the service may send it again) when it could not be
// stored.
func (m *ServiceWebhook) enqueue(w http.ResponseWriter, r *http.Request, body []byte) error {
	ctx, span := spans.Start(r.Context(), "servicegate.webhook.enqueue")
	defer span.End()
	webhookAttemptSpans.Learn(ctx)
	origin, _ := m.origin(r) // none on a site without a host name
	d := &queue.Delivery{
		Meta: queue.Meta{
			Organization: organizationOf(r.Header), To: m.queueTo,
			Method: r.Method, URI: r.URL.RequestURI(),
			Traceparent: spans.Traceparent(ctx),
		},
		Header: forwardedHeader(r, origin),
		Body:   body,
	}
	err := m.openQueue()
	if err == nil {
		err = m.queue.Enqueue(d)
	}
	span.String("servicegate.webhook.delivery_id", d.ID)
	if err != nil && !errors.Is(err, queue.ErrDuplicate) {
		span.Fail("not stored")
	}
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		respond.JSON(w, http.StatusOK, []byte(`{"status":"duplicate"}`))
		return nil
	case err != nil:
		m.logger.Error("a verified webhook delivery could not be queued", zap.Error(err))
		w.Header().Set("Retry-After", "30")
		return refuse(w, r, http.StatusServiceUnavailable, "The delivery could not be stored just now. Send it again in a moment.")
	}
	out, _ := json.Marshal(struct {
		Status string `json:"status"`
		ID     string `json:"id"`
	}{"queued", d.ID})
	respond.JSON(w, http.StatusAccepted, out)
	return nil
}

// organizationOf names the organization of a verified delivery, for its
// order: X-Service-Domain, else X-Service-Id (package webhook has removed
// either header when the secrets that verified the delivery do not vouch
// for it).
func organizationOf(h http.Header) string {
	if d := h.Get(webhook.HeaderDomain); d != "" {
		return d
	}
	return h.Get(webhook.HeaderOrgID)
}

// forwardedHeader is what the app would get through reverse_proxy: the
// request's headers with X-Forwarded-For and -Proto, except that the Host
// and X-Forwarded-Host are the host of the site's origin, never the
// request's Host header as it came: the app may build links from them,
// and a queued delivery has no client to answer but the app. Without an
// origin (a site with no host name) they are left out, and the delivery
// reaches the app with the queue's address as its Host.
func forwardedHeader(r *http.Request, origin string) http.Header {
	h := r.Header.Clone()
	// As reverse_proxy does without trusted proxies: the client's address
	// replaces whatever the request claimed.
	h.Del("X-Forwarded-For")
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		h.Set("X-Forwarded-For", ip)
	}
	proto := siteorigin.Scheme(r)
	h.Del("X-Forwarded-Host")
	if u, err := url.Parse(origin); origin != "" && err == nil && u.Host != "" {
		proto = u.Scheme
		h.Set("X-Forwarded-Host", u.Host)
		h.Set("Host", u.Host)
	}
	h.Set("X-Forwarded-Proto", proto)
	return h
}
