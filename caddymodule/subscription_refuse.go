package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/subscription"
	"go.uber.org/zap"
)

// serviceFailed applies on_error to a request whose subscription the
// service could not answer.
func (h *ServiceSubscription) serviceFailed(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, key subscription.Key, err error) error {
	if r.Context().Err() != nil {
		// The client went away while waiting; nobody reads an answer.
		return caddyhttp.Error(499, err)
	}
	switch h.onError {
	case onErrorAllow:
		return next.ServeHTTP(w, r)
	case onErrorStale:
		if _, ok := h.cache.Stale(key, h.staleGrace); ok {
			h.logger.Info("service unavailable: trusting the lapsed active subscription",
				zap.String("organization", key.Organization))
			return next.ServeHTTP(w, r)
		}
	}
	w.Header().Set("Retry-After", "30")
	return refuse(w, r, http.StatusServiceUnavailable, "The subscription of your organization cannot be checked right now. Try again in a moment.")
}

// refuseAnswer answers a request whose subscription is not active.
func (h *ServiceSubscription) refuseAnswer(w http.ResponseWriter, r *http.Request, a subscription.Answer) error {
	if ce := h.logger.Check(zap.DebugLevel, "subscription refused"); ce != nil {
		// The app identifier the query named: a wrong one reads as "no
		// subscription" for every organization.
		ce.Write(zap.String("app_identifier", h.app), zap.String("answer", a.Status.String()), zap.String("path", r.URL.Path))
	}
	switch a.Status {
	case subscription.Unpaid:
		writePaymentRequired(w, r, "Your organization has not subscribed to this app. Subscribe to continue.", a.SubscribeLink)
		return nil
	case subscription.Active:
		// An active answer whose expires date has passed.
		writePaymentRequired(w, r, "The subscription of your organization to this app has ended. Renew it to continue.", "")
		return nil
	case subscription.Unauthorized:
		w.Header().Set("WWW-Authenticate", h.badToken)
		return refuse(w, r, http.StatusUnauthorized, "The service did not accept your access token. Sign in again.")
	default:
		return refuse(w, r, http.StatusForbidden, "This app has no subscription for your organization. Ask an organization admin to add one.")
	}
}

// writePaymentRequired writes the 402 answer: always written here (not
// left to handle_errors) so that the link reaches the person. link is an
// absolute http(s) URL or empty.
func writePaymentRequired(w http.ResponseWriter, r *http.Request, message, link string) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.service.subscribe_link", link)
	}
	if link != "" {
		w.Header().Set("Location", link)
	}
	if !respond.WantsHTML(r.Header) {
		var b paymentRequiredBody
		b.Error.Message = message
		b.SubscribeLink = link
		out, _ := respond.MarshalJSON(b) // strings always marshal
		respond.JSON(w, http.StatusPaymentRequired, out)
		return
	}
	respond.WritePage(w, http.StatusPaymentRequired, respond.Page{
		Title:    "Subscription needed",
		Message:  message,
		Link:     link,
		LinkText: "Subscribe",
	})
}
