package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
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
	// Body, when set, is the delivery's body instead.
	Body *string `json:"body,omitempty"`
	// Tamper tampers with the delivery: unsigned, wrong_secret,
	// other_org, or body (one byte changed after signing).
	Tamper string `json:"tamper,omitempty"`
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
		if err := checkTamper(req.Tamper); err != nil {
			writeJSON(w, http.StatusBadRequest, message(err.Error()))
			return
		}
		call, err = s.deliverFor(ctx, req)
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "event must be installed, uninstall, subscription_paid or delivery"})
		return
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeJSON(w, ae.status, message(ae.msg))
		return
	case err != nil:
		writeJSON(w, http.StatusNotFound, message(err.Error()))
		return
	}
	out := LifecycleAnswer{Event: req.Event, URL: req.URL, Status: call.Status, Answer: truncateAnswer(call.Body)}
	if call.Err != nil {
		out.Error = call.Err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// deliverFor sends one bulk delivery of req's events (or req's body) for
// an organization, signed with its app secret (see Server.sign).
func (s *Server) deliverFor(ctx context.Context, req LifecycleRequest) (Call, error) {
	org, ok := s.organization(req.Organization)
	if !ok {
		return Call{}, errNoOrganization(req.Organization)
	}
	body := sampleDelivery(req.Events)
	if req.Body != nil {
		body = []byte(*req.Body)
	}
	header := deliveryHeader(org, req.ModuleKey)
	if err := s.sign(header, org.Domain, body, req.Tamper); err != nil {
		return Call{}, err
	}
	if req.Tamper == tamperBody {
		body = TamperBody(body)
	}
	ctx = withCall(ctx, callMeta{kind: kindDelivery, org: org.Domain, module: req.ModuleKey, tamper: req.Tamper})
	call := Call{Kind: "webhook", Key: req.ModuleKey, Job: "webhook", URL: req.URL}
	call.Status, call.Body, call.Err = postCall(ctx, s.client(nil), req.URL, header, body)
	call.ID = recordedID(ctx)
	return call, nil
}

// postCall POSTs body with header to url and reads up to 1 MiB of the
// answer.
func postCall(ctx context.Context, client *http.Client, url string, header http.Header, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, answer, err
}

// sign sets the X-Service-Signature of a delivery of the organization, as
// tamper says: signed with its app secret (that of its installation, or
// the last one it had), with a wrong one, with another organization's, or
// not at all.
func (s *Server) sign(header http.Header, org string, body []byte, tamper string) error {
	var secret string
	switch tamper {
	case tamperUnsigned:
		header.Del("X-Service-Signature")
		return nil
	case tamperWrongSecret:
		secret = rand.Text()
	case tamperOtherOrg:
		for _, other := range s.Organizations() {
			if theirs, _, ok := s.signingSecret(other.Domain); ok && other.Domain != org {
				secret = theirs
				break
			}
		}
		if secret == "" {
			return failf(http.StatusConflict, "No other organization has an app secret to sign with: install the app for another organization first.")
		}
	default:
		mine, _, ok := s.signingSecret(org)
		if !ok {
			return failf(http.StatusConflict, "The app was never installed for %s, so the service has no app secret to sign its deliveries with: install it first.", org)
		}
		secret = mine
	}
	header.Set("X-Service-Signature", SignDelivery(body, secret))
	return nil
}

func truncateAnswer(b []byte) string {
	if len(b) > 1024 {
		return string(b[:1024]) + "…"
	}
	return string(b)
}
