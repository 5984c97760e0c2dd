package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/modulecall"
)

// ServiceLimits holds the module endpoints of an app (custom file format:
// parse-file and build-file; file pre-export) to the limits the service
// sets on those calls, and answers every breach with a JSON error
// {"error":{"message":…}} that the service shows to its user: 413 for a
// request over max_request_size (never reaching the app), 502 for an
// answer over max_response_size (none of it reaching the client), 504 when
// no complete answer comes within timeout (the request to the app is
// cancelled: handlers after this one must stop when the request's context
// ends, as reverse_proxy does). With contract, a malformed job gets 400, an
// answer that breaks the module contract 502 naming the first broken
// string; with spill, answers over max_response_size reach the service
// with their payloads by signed URL (kept on disk, or in Redis with the
// servicegate redis option so that any instance serves the link); with
// inline, payloads the service sends by URL reach the app inline. The
// pipeline is modulecall.Handler's.
type ServiceLimits struct {
	// The largest request body the app accepts, in bytes. Default: 5 MiB
	// (5242880). In the Caddyfile, sizes are written as Caddy writes
	// them: 5MiB, 500KB, 1048576.
	MaxRequestSize int64 `json:"max_request_size,omitempty"`

	// The largest response body the app may give, in bytes. Default: 5 MiB.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`

	// How long the app may take to answer, from the moment the request
	// reaches this handler to the last byte of the app's response.
	// Default: 2m.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// The module whose contract the exchanges keep: "custom-file-format"
	// (parse-file and build-file jobs) or "file-pre-export". When set, a
	// job that breaks the contract gets 400 and never reaches the app, and
	// the app's answer is checked against its job (string records, plural
	// forms, statuses, customData, previewIds, content, pre-export's "same
	// strings, same uniqIds"); a breach is logged and, in mode enforce,
	// answered with 502 and a JSON message naming the first broken string.
	// The app's own {"error":{"message":…}} answer passes untouched.
	// Default: no check.
	Contract string `json:"contract,omitempty"`

	// What a breach of the contract does: "enforce" (the default) replaces
	// the answer with a JSON error; "report" only logs it, for the app's
	// developer, and lets the answer through.
	Mode string `json:"mode,omitempty"`

	// Hands answers over max_response_size to the service by URL instead
	// of refusing them. Needs contract. Default: off.
	Spill *SpillOptions `json:"spill,omitempty"`

	// Fetches payloads the service sends by URL and hands them to the app
	// inline. Needs contract. Default: off.
	Inline *InlineOptions `json:"inline,omitempty"`

	logger  *zap.Logger
	counts  *limitsCounters
	handler *modulecall.Handler
	// origin is the base of spill links when spill_base_url is unset:
	// service_app sets it to its own, else it is the site's.
	origin func(*http.Request) (string, error)
}

// CaddyModule returns the Caddy module information.
func (ServiceLimits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_limits",
		New: func() caddy.Module { return new(ServiceLimits) },
	}
}

// Provision fills in the defaults and registers the metrics.
func (l *ServiceLimits) Provision(ctx caddy.Context) error {
	wireForServiceApp(ctx, l)
	l.logger = ctx.Logger(l) // its own name, also when service_app provisions it itself
	l.MaxRequestSize = cmp.Or(l.MaxRequestSize, modulecall.DefaultMaxSize)
	l.MaxResponseSize = cmp.Or(l.MaxResponseSize, modulecall.DefaultMaxSize)
	l.Timeout = cmp.Or(l.Timeout, caddy.Duration(modulecall.DefaultTimeout))
	l.counts = registerLimitsMetrics(ctx.GetMetricsRegistry())
	cfg := modulecall.HandlerConfig{
		MaxRequestSize:  l.MaxRequestSize,
		MaxResponseSize: l.MaxResponseSize,
		Timeout:         time.Duration(l.Timeout),
		Contract:        l.Contract,
		Mode:            l.Mode,
		Refuse:          refuse,
		Fail:            func(status int, err error) error { return caddyhttp.Error(status, err) },
		Report:          l.counts.inc,
		Logger:          l.logger,
		AppStatus:       proxiedStatus,
	}
	var err error
	if l.Spill != nil {
		if cfg.Spill, err = l.provisionSpill(ctx); err != nil {
			return err
		}
	}
	if l.Inline != nil {
		cfg.Inliner = l.provisionInline()
	}
	if l.handler, err = modulecall.NewHandler(cfg); err != nil {
		return fmt.Errorf("service_limits: %w", err)
	}
	// The sweeping of expired payloads ends at Cleanup, or with the
	// config's context should no Cleanup come.
	context.AfterFunc(ctx, func() { _ = l.handler.Close() })
	return nil
}

// Validate refuses limits that would refuse everything.
func (l *ServiceLimits) Validate() error { return l.check(true) }

// checkSettings checks the settings given, and not that what needs a
// contract has one: service_app gives the limits of each file module the
// module's contract.
func (l *ServiceLimits) checkSettings() error { return l.check(false) }

// check is Validate, with or without requiring a contract where one is
// needed.
func (l *ServiceLimits) check(contractRequired bool) error {
	if l.MaxRequestSize < 0 {
		return fmt.Errorf("service_limits: max_request_size must be positive, got %d", l.MaxRequestSize)
	}
	if l.MaxResponseSize < 0 {
		return fmt.Errorf("service_limits: max_response_size must be positive, got %d", l.MaxResponseSize)
	}
	if l.Timeout < 0 {
		return fmt.Errorf("service_limits: timeout must be positive, got %s", time.Duration(l.Timeout))
	}
	if err := l.validateContract(); err != nil {
		return err
	}
	if contractRequired {
		if err := l.requireContract(); err != nil {
			return err
		}
	}
	if l.Spill != nil {
		if err := l.validateSpill(); err != nil {
			return err
		}
	}
	if l.Inline != nil && len(l.Inline.Hosts) == 0 {
		return errors.New("service_limits: inline needs inline_hosts, the hosts payloads may be fetched from")
	}
	return nil
}

// Cleanup stops sweeping expired payloads.
func (l *ServiceLimits) Cleanup() error {
	if l.handler != nil {
		return l.handler.Close()
	}
	return nil
}

// ServeHTTP hands the request to the module call pipeline, which serves
// the spill path and holds every other exchange to its limits.
func (l *ServiceLimits) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	r, _ = emulatorCall(r)
	return l.handler.Serve(w, r, next)
}

// proxiedStatus is the status reverse_proxy got from the app for r, as
// {http.reverse_proxy.status_code} holds it: a 101 it answered a plain
// request with is not passed on, and the answer has no status of its own.
func proxiedStatus(r *http.Request) int {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return 0
	}
	v, _ := repl.Get("http.reverse_proxy.status_code")
	status, _ := v.(int)
	return status
}

var (
	_ caddy.Provisioner           = (*ServiceLimits)(nil)
	_ caddy.Validator             = (*ServiceLimits)(nil)
	_ caddy.CleanerUpper          = (*ServiceLimits)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceLimits)(nil)
)
