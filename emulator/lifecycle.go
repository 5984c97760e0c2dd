package emulator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/servicegate/servicegate/siteorigin"
)

// LifecyclePath is where a developer's tools ask the emulator to make a
// lifecycle call of the service, or to send a delivery signed with an
// installation's secret (see serveLifecycle).
const LifecyclePath = "/emulator/lifecycle"

// LifecycleRequest is a request to LifecyclePath.
type LifecycleRequest struct {
	// Event is installed, uninstall, subscription_paid, or delivery.
	Event string `json:"event"`
	// Organization is the organization's domain.
	Organization string `json:"organization"`
	// URL is where the call goes: the app's (the gateway's) lifecycle
	// path, or its webhook module's url for a delivery.
	URL string `json:"url"`
	// BaseURL is the service's address the calls name; default: the
	// emulator's own, from the request.
	BaseURL string `json:"base_url,omitempty"`
	// ModuleKey and Events make a delivery: one bulk delivery of the
	// events, with the module key.
	ModuleKey string   `json:"module_key,omitempty"`
	Events    []string `json:"events,omitempty"`
}

// LifecycleAnswer is the answer of LifecyclePath: how the app answered.
type LifecycleAnswer struct {
	Event  string `json:"event"`
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	Answer string `json:"answer,omitempty"`
	Error  string `json:"error,omitempty"`
}

// lifecycleTimeout bounds one call made for a developer's tool.
const lifecycleTimeout = 30 * time.Second

// serveLifecycle makes the call a developer's tool asks for. The app
// secret of an installation never leaves the emulator: a delivery is
// signed here.
func (s *Server) serveLifecycle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "POST a lifecycle request"})
		return
	}
	var req LifecycleRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "the body is not a lifecycle request"})
		return
	}
	if u, err := url.Parse(req.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "url must be an http or https address"})
		return
	}
	if req.BaseURL == "" {
		req.BaseURL = siteorigin.Scheme(r) + "://" + r.Host
	}
	ctx, cancel := context.WithTimeout(r.Context(), lifecycleTimeout)
	defer cancel()
	var call Call
	var err error
	switch req.Event {
	case EventInstalled:
		call, err = s.InstallApp(ctx, nil, req.URL, req.Organization, req.BaseURL)
	case EventUninstall:
		call, err = s.UninstallApp(ctx, nil, req.URL, req.Organization, req.BaseURL)
	case EventSubscriptionPaid:
		call, err = s.SubscriptionPaid(ctx, nil, req.URL, req.Organization)
	case "delivery":
		call, err = s.deliverFor(ctx, req)
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "event must be installed, uninstall, subscription_paid or delivery"})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": err.Error()})
		return
	}
	out := LifecycleAnswer{Event: req.Event, URL: req.URL, Status: call.Status, Answer: truncateAnswer(call.Body)}
	if call.Err != nil {
		out.Error = call.Err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// deliverFor sends one bulk delivery of req's events for an installed
// organization, signed with its installation's secret.
func (s *Server) deliverFor(ctx context.Context, req LifecycleRequest) (Call, error) {
	secret, ok := s.AppSecret(req.Organization)
	if !ok {
		return Call{}, errNotInstalled(req.Organization)
	}
	org := s.byDomain[req.Organization]
	events := make([]map[string]any, 0, len(req.Events))
	for _, e := range req.Events {
		events = append(events, map[string]any{"event": e})
	}
	body, _ := json.Marshal(map[string]any{"events": events})
	status, answer, err := SendDelivery(ctx, nil, req.URL, Delivery{Body: body, Secret: secret,
		OrganizationID: itoa(org.ID), Domain: org.Domain, ModuleKey: req.ModuleKey})
	return Call{Kind: "webhook", Key: req.ModuleKey, Job: "webhook", URL: req.URL, Status: status, Body: answer, Err: err}, nil
}

func truncateAnswer(b []byte) string {
	if len(b) > 1024 {
		return string(b[:1024]) + "…"
	}
	return string(b)
}
