package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/installations"
	"github.com/servicegate/servicegate/subscription"
	"github.com/servicegate/servicegate/token"
)

// What service_app's lifecycle calls are proved with, and what they
// report: the service's tokens verified as the guard verifies them, its
// subscription query asked with the gateway's own credentials, the
// metrics and log lines of each call.

// lifecycleProof is what service_app proves lifecycle calls with, known
// once the guard's handlers are loaded (see routeRest): the verifier of
// the service's tokens, and the subscription query.
type lifecycleProof struct {
	verifier *token.Verifier
	client   *subscription.Client
	base     string // may hold {http.service.organization}
	app      string
}

// proveAppToken verifies an app token the service issued, as the guard's
// service_auth verifies a user's token (the same keys, issuer and
// audience), and names the organization of its claims.
func (a *ServiceApp) proveAppToken(ctx context.Context, raw string) (installations.Org, error) {
	p := a.proof
	if p == nil || p.verifier == nil {
		return installations.Org{}, errors.New("the routes are not loaded")
	}
	claims, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return installations.Org{}, err
	}
	return installations.OrgOf(claims), nil
}

// confirmPaid asks the service's subscription query, with the
// organization's app token, whether its subscription is paid.
func (a *ServiceApp) confirmPaid(ctx context.Context, in *installations.Installation, appToken string) (installations.Confirmation, error) {
	p := a.proof
	if p == nil {
		return installations.Confirmation{}, errors.New("the routes are not loaded")
	}
	repl := caddy.NewReplacer()
	repl.Set(organizationVarName, cmp.Or(in.Domain, in.OrganizationID))
	qctx, cancel := context.WithTimeout(ctx, appTokenTimeout)
	defer cancel()
	ans, err := p.client.Query(qctx, repl.ReplaceAll(p.base, ""), p.app, appToken)
	if err != nil {
		return installations.Confirmation{}, err
	}
	return installations.Confirmation{Paid: ans.Status == subscription.Active && ans.ActiveAt(time.Now()), Expires: ans.Expires}, nil
}

// proveWith keeps what the guard g proves lifecycle calls with.
func (a *ServiceApp) proveWith(g *AppRoute) error {
	if a.inst == nil {
		return nil
	}
	p := &lifecycleProof{verifier: g.Auth.verifier, app: cmp.Or(caddy.NewReplacer().ReplaceKnown(a.AppIdentifier, ""), a.desc.Identifier)}
	if s := g.Subscription; s != nil {
		p.client, p.base, p.app = s.client, s.base, s.app
	} else {
		var err error
		if p.client, err = subscription.NewClient(""); err != nil {
			return err
		}
		// Its transport is its own: a reload does not leave it connected.
		a.cleanups = append(a.cleanups, cleanupFunc(p.client.CloseIdleConnections))
		p.base = strings.TrimSuffix(caddy.NewReplacer().ReplaceKnown(a.Service, ""), "/")
	}
	a.proof = p
	return nil
}

// clientIP is the address a request comes from, as Caddy's trusted_proxies
// settle it.
func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return r.RemoteAddr
}

// reportInstallations counts and logs what the installations do.
func (a *ServiceApp) reportInstallations(ctx caddy.Context, cfg *installations.Config) {
	reg := ctx.GetMetricsRegistry()
	calls := registerCollector(reg, installationCalls)
	renewals := registerCollector(reg, installationTokenRenewals)
	issued, failed := renewals.WithLabelValues("issued"), renewals.WithLabelValues("failed")
	registerCollector(reg, installationsHeld)
	registerCollector(reg, installationRecords)
	unreadable := registerCollector(reg, installationsUnreadable)
	logger := a.logger.Named("installations")
	cfg.Book.Renewed = func(org string, err error) {
		if err != nil {
			failed.Inc()
			logger.Warn("an app token could not be had", zap.String("organization", org), zap.Error(err))
			return
		}
		issued.Inc()
	}
	cfg.Book.Unreadable = func(org string, err error) {
		unreadable.Inc()
		logger.Error("an installation record does not open and is skipped: its organization's deliveries are answered 503 until it is installed again or the record is repaired (was it sealed under a key no longer in key or retired_keys, or copied from another app's store?)",
			zap.String("organization", org), zap.String("app", a.clientID), zap.Error(err))
	}
	cfg.Book.Resealed = func(resealed, failed int) {
		if failed > 0 {
			logger.Warn("installation records under a retired key could not all be sealed again; they are tried again at the next start or read",
				zap.Int("resealed", resealed), zap.Int("failed", failed))
			return
		}
		logger.Info("installation records under a retired key were sealed again under the current key", zap.Int("resealed", resealed))
	}
	cfg.Handler.Report = func(o installations.Outcome, org string, err error) {
		if inst := a.inst; inst != nil && inst.recount != nil && (o == installations.Stored || o == installations.Uninstalled) {
			inst.recount() // what a later load with another client_id reads
		}
		calls.WithLabelValues(o.String()).Inc()
		fields := []zap.Field{zap.String("outcome", o.String()), zap.String("organization", org)}
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		logger.Info("lifecycle call", fields...)
	}
}

// forgetOrganization forgets the cached subscription answers of an
// organization, by id and by domain, in this process and, with the
// servicegate option, on every instance.
func forgetOrganization(ctx caddy.Context) func(id, domain string) {
	sg, _ := servicegateApp(ctx)
	return func(id, domain string) {
		for _, org := range []string{id, domain} {
			if org == "" {
				continue
			}
			forgetLocalSubscriptions(org)
			if sg != nil && sg.Subscriptions() != nil {
				_, _ = sg.Subscriptions().Forget(ctx, org)
			}
		}
	}
}
