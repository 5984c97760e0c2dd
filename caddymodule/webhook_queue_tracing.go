package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/tracing"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/spans"
)

// webhookAttemptSpans makes the attempts of every queue spans in the traces
// of the deliveries, with the tracer provider of Caddy's tracing directive,
// which it learns from the config's tracing handler when a queue is
// provisioned (learnQueueTracer), and from the deliveries received.
var webhookAttemptSpans spans.Later

// learnQueueTracer shows webhookAttemptSpans the tracer provider of the
// config's tracing directive, before the queue opens: a delivery stored
// before a restart is attempted at once, before any delivery could show
// it. Caddy keeps one provider while any config traces, so any tracing
// handler of the config will do: one already provisioned (in a route
// before the handler's, in its site or in a site before it), or else one
// not provisioned yet, loaded here from its JSON. That is the case in
// every site shape where the tracing handler shares the route of the
// handler being provisioned: Caddy provisions a route's handlers before
// it sets any of them, and merges the unmatched directives of a site (a
// site block with both directly inside, no route) into one route.
func learnQueueTracer(ctx caddy.Context) {
	tr := provisionedTracing(ctx)
	if tr == nil {
		raw := tracingRawIn(ctx)
		if raw == nil {
			return
		}
		v, err := ctx.LoadModuleByID("http.handlers.tracing", raw) // raw without its "handler" key
		if err != nil {
			ctx.Logger().Warn("the tracing directive could not be loaded for the webhook queue: attempts of deliveries stored before this start are traced once a delivery comes in", zap.Error(err))
			return
		}
		tr = v.(*tracing.Tracing)
	}
	webhookAttemptSpans.LearnThrough(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
		_ = tr.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			next.ServeHTTP(w, r)
			return nil
		}))
	})
}

// provisionedTracing is a provisioned tracing handler among the modules
// being provisioned (the http app, subroutes, service_app) and what they
// hold.
func provisionedTracing(ctx caddy.Context) *tracing.Tracing {
	for _, m := range ctx.Modules() {
		if tr := tracingIn(m); tr != nil {
			return tr
		}
	}
	return nil
}

// tracingIn finds a provisioned tracing handler in m, the http app or a
// subroute being provisioned: in the routes whose handlers are set.
func tracingIn(m any) *tracing.Tracing {
	var routes []caddyhttp.RouteList
	switch m := m.(type) {
	case *tracing.Tracing:
		return m
	case *caddyhttp.App:
		for _, srv := range m.Servers {
			routes = append(routes, srv.Routes)
		}
	case *caddyhttp.Subroute:
		routes = append(routes, m.Routes)
	}
	for _, rl := range routes {
		for _, rt := range rl {
			for _, h := range rt.Handlers {
				if tr := tracingIn(h); tr != nil {
					return tr
				}
			}
		}
	}
	return nil
}

// tracingRawIn finds the JSON of a tracing handler not provisioned yet in
// the routes of the modules being provisioned: the handlers of a route
// keep their JSON until the whole route is provisioned.
func tracingRawIn(ctx caddy.Context) json.RawMessage {
	for _, m := range ctx.Modules() {
		var routes []caddyhttp.RouteList
		switch m := m.(type) {
		case *caddyhttp.App:
			for _, srv := range m.Servers {
				routes = append(routes, srv.Routes)
			}
		case *caddyhttp.Subroute:
			routes = append(routes, m.Routes)
		}
		for _, rl := range routes {
			for _, rt := range rl {
				if raw := tracingRaw(rt.HandlersRaw, 0); raw != nil {
					return raw
				}
			}
		}
	}
	return nil
}

// maxSubrouteDepth bounds how deep tracingRaw looks into subroutes.
const maxSubrouteDepth = 16

// tracingRaw is the config of the first tracing handler among handlers,
// or in the subroutes among them: its JSON without the "handler" key that
// names the module.
func tracingRaw(handlers []json.RawMessage, depth int) json.RawMessage {
	if depth > maxSubrouteDepth {
		return nil
	}
	for _, raw := range handlers {
		var h struct {
			Handler string `json:"handler"`
			Routes  []struct {
				Handle []json.RawMessage `json:"handle"`
			} `json:"routes"`
		}
		if json.Unmarshal(raw, &h) != nil {
			continue
		}
		switch h.Handler {
		case "tracing":
			var fields map[string]json.RawMessage
			if json.Unmarshal(raw, &fields) != nil {
				return nil
			}
			delete(fields, "handler")
			config, _ := json.Marshal(fields)
			return config
		case "subroute":
			for _, rt := range h.Routes {
				if found := tracingRaw(rt.Handle, depth+1); found != nil {
					return found
				}
			}
		}
	}
	return nil
}
