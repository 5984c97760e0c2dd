package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/servicegate/servicegate/subscription"
	"github.com/servicegate/servicegate/token"
	"go.uber.org/zap"
)

// query sends one subscription query, counting and timing it. It runs once
// for all the requests waiting on the same key.
func (h *ServiceSubscription) query(ctx context.Context, base, org, token string) (subscription.Answer, error) {
	start := time.Now()
	a, err := h.client.Query(ctx, base, h.app, token)
	subscriptionQueryDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		subscriptionQueriesBy.inc(queryError)
		h.logger.Error("subscription query failed",
			zap.String("organization", org),
			zap.Bool("keyed_by_token", org == ""),
			zap.String("app_identifier", h.app),
			zap.Error(err))
		return a, err
	}
	subscriptionQueriesBy.inc(subscriptionQueryOf(a.Status))
	h.logger.Debug("subscription answer",
		zap.String("organization", org),
		zap.Bool("keyed_by_token", org == ""),
		zap.String("app_identifier", h.app),
		zap.Stringer("answer", a.Status),
		zap.Time("expires", a.Expires),
		zap.String("message", a.Message))
	return a, nil
}

// expandBase expands the request placeholders of base_url and validates the
// result. Each value must be a non-empty run of host-name characters, so a
// value can neither move the query to another host nor into the path.
func (h *ServiceSubscription) expandBase(r *http.Request) (string, error) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return "", errors.New("no replacer in the request context")
	}
	base, err := repl.ReplaceFunc(h.base, func(variable string, val any) (any, error) {
		s := caddy.ToString(val)
		if !hostLabelSafe(s) {
			return nil, fmt.Errorf("placeholder {%s} is empty or holds characters a host name cannot", variable)
		}
		return s, nil
	})
	if err != nil {
		return "", err
	}
	if err := subscription.ValidateBaseURL(base); err != nil {
		return "", err
	}
	return base, nil
}

// hostLabelSafe reports whether s is non-empty and made of letters, digits, '.',
// '-' and '_'.
func hostLabelSafe(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// subscriptionBearerToken returns the token of an Authorization header value
// of the Bearer scheme, or "": the token service_auth would read. Without
// service_auth in front, the token goes to the service unverified, so a
// value that is not even of bearer token syntax is not sent at all.
func subscriptionBearerToken(header string) string {
	tok, _ := token.FromAuthorization(header)
	if !token.IsB64Token(tok) {
		return ""
	}
	return tok
}
