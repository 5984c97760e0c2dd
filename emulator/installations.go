package emulator

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// appGrantType is the grant an app uses to act for an organization that
// installed it.
const appGrantType = "service_app"

// appInstall is an installation of the app as the emulated service keeps
// it.
type appInstall struct {
	org    Organization
	secret string
	user   int64
	since  time.Time
}

// The lifecycle calls the service makes to an app, named as a
// descriptor's events name them.
const (
	EventInstalled        = "installed"
	EventUninstall        = "uninstall"
	EventSubscriptionPaid = "subscription_paid"
)

// InstallApp installs the app for the organization named by domain: a
// fresh random app secret, kept for the service_app grant and for signing
// the organization's deliveries, then the installed call to url (the app's
// installed event). baseURL is the service's address the call names. An
// installation the app does not acknowledge with 2xx is undone, as the
// service does; the Call says how the app answered.
func (s *Server) InstallApp(ctx context.Context, client *http.Client, url, domain, baseURL string) (Call, error) {
	org, ok := s.organization(domain)
	if !ok {
		return Call{}, errNoOrganization(domain)
	}
	in := &appInstall{org: org, secret: rand.Text(), user: s.cfg.UserID, since: s.cfg.Now().UTC()}
	s.mu.Lock()
	if s.installs == nil {
		s.installs = make(map[string]*appInstall)
	}
	s.installs[domain] = in
	s.mu.Unlock()
	body := s.lifecycleBody(in, baseURL)
	body["userId"] = in.user
	body["code"] = rand.Text()
	call := s.lifecycleCall(ctx, client, EventInstalled, url, domain, body)
	if !call.OK() {
		s.mu.Lock()
		if s.installs[domain] == in {
			delete(s.installs, domain)
		}
		s.mu.Unlock()
	}
	return call, nil
}

// UninstallApp removes the organization's installation, so its app
// secret gets no more tokens, and sends the uninstall call to url with
// that secret.
func (s *Server) UninstallApp(ctx context.Context, client *http.Client, url, domain, baseURL string) (Call, error) {
	s.mu.Lock()
	in := s.installs[domain]
	delete(s.installs, domain)
	s.revokeFamily("app:" + domain)
	if in != nil {
		if s.lastSecrets == nil {
			s.lastSecrets = make(map[string]string)
		}
		s.lastSecrets[domain] = in.secret
	}
	s.mu.Unlock()
	if in == nil {
		return Call{}, errNotInstalled(domain)
	}
	return s.lifecycleCall(ctx, client, EventUninstall, url, domain, s.lifecycleBody(in, baseURL)), nil
}

// SubscriptionPaid sends the subscription_paid call of the organization to
// url.
func (s *Server) SubscriptionPaid(ctx context.Context, client *http.Client, url, domain string) (Call, error) {
	org, ok := s.organization(domain)
	if !ok {
		return Call{}, errNoOrganization(domain)
	}
	return s.lifecycleCall(ctx, client, EventSubscriptionPaid, url, domain, map[string]any{
		"appId": s.cfg.AppIdentifier, "organizationId": org.ID, "domain": org.Domain,
	}), nil
}

// AppSecret returns the app secret of the organization's installation,
// which signs its webhook deliveries (Installation.AppSecret).
func (s *Server) AppSecret(domain string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.installs[domain]; in != nil {
		return in.secret, true
	}
	return "", false
}

func (s *Server) lifecycleBody(in *appInstall, baseURL string) map[string]any {
	return map[string]any{
		"appId": s.cfg.AppIdentifier, "appSecret": in.secret, "clientId": s.cfg.ClientID,
		"organizationId": in.org.ID, "domain": in.org.Domain, "baseUrl": baseURL,
	}
}

// signingSecret is the app secret that signs the organization's
// deliveries: its installation's, or else the last one it had (as a
// stale sender would sign); ok is false when it was never installed.
func (s *Server) signingSecret(domain string) (secret string, installed, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.installs[domain]; in != nil {
		return in.secret, true, true
	}
	secret, ok = s.lastSecrets[domain]
	return secret, false, ok
}

// installation is the organization's installation: since when, and its
// secret; ok is false when the app is not installed for it.
func (s *Server) installation(domain string) (since time.Time, secret string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.installs[domain]; in != nil {
		return in.since, in.secret, true
	}
	return time.Time{}, "", false
}

// lifecycleCall POSTs one lifecycle call of the organization and reads the
// app's answer. A nil client is the emulator's own, whose calls the
// console records.
func (s *Server) lifecycleCall(ctx context.Context, client *http.Client, event, url, domain string, body map[string]any) Call {
	call := Call{Kind: "lifecycle", Key: event, Job: event, URL: url}
	client = s.client(client)
	ctx = withCall(ctx, callMeta{kind: event, org: domain})
	raw, _ := json.Marshal(body) // strings and integers
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	if err != nil {
		call.Err = fmt.Errorf("%s call: %w", event, err)
		return call
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		call.Err = fmt.Errorf("%s call: %w", event, err)
		call.ID = recordedID(ctx)
		return call
	}
	call.Status = resp.StatusCode
	call.Body, _ = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	call.ID = recordedID(ctx)
	return call
}

// appGrant answers the service_app grant: an access token for the
// organization of an installation whose app secret the request carries,
// in the name of the user who installed it. The client is already
// authenticated.
func (s *Server) appGrant(req tokenRequest) (tokenResponse, *oauthError) {
	if req.AppID == "" || req.AppSecret == "" {
		return tokenResponse{}, invalidRequest("app_id and app_secret are required")
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *appInstall
	for _, in := range s.installs {
		if sameSecret(in.secret, req.AppSecret) {
			found = in
		}
	}
	switch {
	case found == nil || req.AppID != s.cfg.AppIdentifier:
		return tokenResponse{}, invalidGrant("no installation of this app has this app secret")
	case req.Domain != "" && req.Domain != found.org.Domain:
		return tokenResponse{}, invalidGrant("the installation with this app secret is another organization's")
	case req.UserID != "" && req.UserID != strconv.FormatInt(found.user, 10):
		return tokenResponse{}, invalidGrant("user_id is not the user who installed the app")
	}
	return s.issue(found.user, found.org, "app:"+found.org.Domain, now)
}

func errNotInstalled(domain string) error {
	return fmt.Errorf("emulator: the app is not installed for %q", domain)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sameSecret compares two secrets in constant time, whatever their lengths.
func sameSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
