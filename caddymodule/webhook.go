package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/queue"
	"github.com/servicegate/servicegate/signature"
	"github.com/servicegate/servicegate/webhook"
)

// defaultSecretsPoll is how often the secrets file is checked for changes.
const defaultSecretsPoll = 2 * time.Second

// ServiceWebhook verifies the service's webhook deliveries before the app
// sees them: the X-Service-Signature header must be the HMAC-SHA256 of the
// raw body under one of the app secrets. It reads the whole body (up to
// max_size, within read_timeout), checks the signature, then the
// organization headers, the module key and the events, and passes the very
// same bytes and headers on (less an organization header the signature
// does not vouch for). A refused delivery never reaches the app. The
// pipeline is webhook.Handler's.
//
// Order of checks: size (413), body arrival (408), signature (401),
// organization headers and module key (403), body shape (400) and events
// (403). The signature comes before the allow-lists, so a caller without a
// secret learns nothing about them.
type ServiceWebhook struct {
	// Secrets are the app secrets the service signs deliveries with; a
	// delivery signed with any one of them passes, so a secret is rotated
	// by listing the new one next to the old one for a while. Each may be
	// an {env.*} or {file.*} placeholder, resolved when the config loads.
	// Used for organizations that are not in secrets_file.
	Secrets []string `json:"secrets,omitempty"`

	// SecretsFile is a JSON file of per-organization secrets:
	// {"<organization domain or id>": "secret" | ["secret1", "secret2"]}.
	// The organization is named by X-Service-Domain when the delivery has
	// it, else by X-Service-Id. An organization listed here is checked
	// against its own secrets only; one that is not falls back to Secrets.
	// When the file lists both headers of a delivery under different
	// secrets, the delivery is refused (403); an organization header that
	// the verifying secrets do not belong to is removed before the app
	// sees it. The file is re-read when its modification time or size
	// changes; a file that fails to parse is logged and the last good one
	// is kept.
	SecretsFile string `json:"secrets_file,omitempty"`

	// SecretsPoll is how often SecretsFile is checked for changes.
	// Default: 2s.
	SecretsPoll caddy.Duration `json:"secrets_poll,omitempty"`

	// ModuleKeys, when set, are the webhook module keys allowed in
	// X-Module-Key; a delivery with another key, none, or several is
	// refused with 403.
	ModuleKeys []string `json:"module_keys,omitempty"`

	// Events, when set, is the allow-list of event names: the body must
	// be JSON of the form {"events":[{"event":"…",…},…]} (else 400) and
	// every event must be listed here (else 403). Keys that differ from
	// "events" and "event" only by case are refused (400): JSON libraries
	// that match keys without regard to case would read them.
	Events []string `json:"events,omitempty"`

	// MaxSize is the largest body accepted, in bytes; a larger one is
	// refused with 413, from Content-Length before reading when there is
	// one. Default: 5 MiB (5242880).
	MaxSize int64 `json:"max_size,omitempty"`

	// ReadTimeout is how long the whole body of a delivery may take to
	// arrive, counted from when the handler starts reading it; a body
	// that has not arrived in time is refused with 408, so a client that
	// trickles bytes cannot hold the handler. Default: 10s.
	ReadTimeout caddy.Duration `json:"read_timeout,omitempty"`

	// Timeout is how long the app may take to acknowledge a verified
	// delivery, its answer included. Past it the request to the app is
	// cancelled and the service is answered 504 (it sends the delivery
	// again); with Queue, it bounds each attempt instead (unless the
	// queue's own timeout is set), and an attempt past it fails and is
	// retried. Default: 30s, the queue's attempt timeout: the interface
	// names no limit for webhooks, and an app that hangs must hold neither
	// the service's connection nor a queue worker for long.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Queue, when set, stores each verified delivery and answers the
	// service itself, then delivers it to the app with retries; no
	// reverse_proxy is needed after the handler. See WebhookQueue.
	Queue *WebhookQueue `json:"queue,omitempty"`

	check    webhook.Checker
	handler  *webhook.Handler
	outcomes webhookOutcomes
	logger   *zap.Logger
	stop     context.CancelFunc
	watching chan struct{}    // closed when the watching goroutine ends
	queue    queue.Deliveries // nil without Queue, and until openQueue
	// openQueue opens the queue once: at the config's start, or at the
	// first delivery before it (see StoresStart).
	openQueue func() error
	queueKey  string
	queueTo   string
	queueAt   string // where the queue keeps its deliveries, as its metrics name it
	// origin is the site's public origin, the Host of queued deliveries:
	// service_app sets it to its own, else it is the site's.
	origin func(*http.Request) (string, error)
	// installations, set by service_app, holds the secrets of the
	// organizations that installed the app.
	installations webhook.Installations
	// appToken, set by service_app, gives a queued delivery of an
	// installed organization its app token when it is sent.
	appToken func(ctx context.Context, organization string, h http.Header)
}

// CaddyModule returns the Caddy module information.
func (ServiceWebhook) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_webhook",
		New: func() caddy.Module { return new(ServiceWebhook) },
	}
}

// Provision resolves the secrets, loads the secrets file and starts
// watching it.
func (m *ServiceWebhook) Provision(ctx caddy.Context) error {
	wireForServiceApp(ctx, m)
	m.logger = ctx.Logger(m) // its own name, also when service_app provisions it itself
	m.outcomes = newWebhookOutcomes(ctx.GetMetricsRegistry())
	m.MaxSize = cmp.Or(m.MaxSize, limits.DefaultMaxSize)
	m.ReadTimeout = cmp.Or(m.ReadTimeout, caddy.Duration(webhook.DefaultReadTimeout))
	m.Timeout = cmp.Or(m.Timeout, caddy.Duration(webhook.DefaultTimeout))
	repl := caddy.NewReplacer()
	if len(m.Secrets) > 0 {
		secrets := make([]string, len(m.Secrets))
		for i, s := range m.Secrets {
			var err error
			if secrets[i], err = resolveSecret(fmt.Sprintf("service_webhook: secret %d of %d", i+1, len(m.Secrets)), s); err != nil {
				return err
			}
		}
		v, err := signature.NewVerifier(secrets...)
		if err != nil {
			return fmt.Errorf("service_webhook: %w", err)
		}
		m.check.AppWide = v
	}
	m.check.ModuleKeys = m.ModuleKeys
	m.check.Installations = m.installations
	if len(m.Events) > 0 {
		m.check.Events = webhook.NewEvents(m.Events...)
	}
	if m.SecretsFile != "" {
		every := time.Duration(m.SecretsPoll)
		if every <= 0 {
			every = defaultSecretsPoll
		}
		f, err := webhook.OpenSecretsFile(repl.ReplaceKnown(m.SecretsFile, ""), m.logger)
		if err != nil {
			return fmt.Errorf("service_webhook: %w", err)
		}
		m.check.File = f
		watchCtx, cancel := context.WithCancel(ctx)
		m.stop = cancel
		m.watching = make(chan struct{})
		go func() {
			defer close(m.watching)
			f.Watch(watchCtx, every)
		}()
	}
	if m.Queue != nil {
		if err := m.provisionQueue(ctx); err != nil {
			return err
		}
	}
	return m.newHandler()
}

// newHandler makes the pipeline of the provisioned settings, logging to
// m.logger and handing verified deliveries to the queue when there is one.
func (m *ServiceWebhook) newHandler() (err error) {
	cfg := webhook.HandlerConfig{Checker: &m.check, MaxSize: m.MaxSize, ReadTimeout: time.Duration(m.ReadTimeout),
		Timeout: time.Duration(m.Timeout), Refuse: refuse, Report: m.outcomes.inc, Logger: m.logger}
	if m.openQueue != nil {
		cfg.Enqueue = m.enqueue
	}
	if m.handler, err = webhook.NewHandler(cfg); err != nil {
		return fmt.Errorf("service_webhook: %w", err)
	}
	return nil
}

// Validate checks that a delivery can pass at all.
func (m *ServiceWebhook) Validate() error {
	if len(m.Secrets) == 0 && m.SecretsFile == "" && m.installations == nil {
		return errors.New("service_webhook: needs at least one secret or a secrets_file")
	}
	return m.checkSettings()
}

// checkSettings checks the settings given, and not that a secret is:
// service_app supplies its app secrets to its webhook blocks.
func (m *ServiceWebhook) checkSettings() error {
	if m.MaxSize < 0 {
		return errors.New("service_webhook: max_size must be positive")
	}
	if m.ReadTimeout < 0 {
		return errors.New("service_webhook: read_timeout must be positive")
	}
	if m.Timeout < 0 {
		return errors.New("service_webhook: timeout must be positive")
	}
	if slices.Contains(m.ModuleKeys, "") {
		return errors.New("service_webhook: a module key is empty")
	}
	if slices.Contains(m.Events, "") {
		return errors.New("service_webhook: an event name is empty")
	}
	if q := m.Queue; q != nil {
		switch {
		case q.Store != "" && q.Store != "disk" && q.Store != "redis":
			return fmt.Errorf("service_webhook: queue: store %q is neither disk nor redis", q.Store)
		case q.Store == "redis" && q.Dir != "":
			return errors.New("service_webhook: queue: dir is where the disk store keeps its file; with store redis, leave it out")
		}
	}
	return nil
}

// Cleanup stops watching the secrets file and lets go of the queue.
func (m *ServiceWebhook) Cleanup() error {
	if m.stop != nil {
		m.stop()
		<-m.watching
	}
	return m.cleanupQueue()
}

// ServeHTTP hands the delivery to webhook.Handler, which passes it on (to
// the queue when there is one) or refuses it.
func (m *ServiceWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, _ = emulatorCall(r)
	return m.handler.Serve(w, r, next)
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*ServiceWebhook)(nil)
	_ caddy.Validator             = (*ServiceWebhook)(nil)
	_ caddy.CleanerUpper          = (*ServiceWebhook)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceWebhook)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceWebhook)(nil)
)
