package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/siteorigin"
)

// apiError is a refusal of the console's API: a status and a message for
// the person who sent the request.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func failf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// apiHandler answers one request of the API, or returns why not.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// serveAPI routes a request of the JSON API.
func (c *console) serveAPI(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, APIPrefix)
	parts := strings.Split(rest, "/")
	var h apiHandler
	var allow string
	switch {
	case rest == "organizations":
		h, allow = c.organizationsAPI, "GET, HEAD, POST"
	case len(parts) == 3 && parts[0] == "organizations":
		h, allow = c.organizationAction(parts[1], parts[2]), "POST"
	case rest == "calls":
		h, allow = c.listCalls, "GET, HEAD"
	case len(parts) == 2 && parts[0] == "calls":
		h, allow = c.callDetail(parts[1]), "GET, HEAD"
	case len(parts) == 3 && parts[0] == "calls":
		h, allow = c.callAction(parts[1], parts[2]), "POST"
	case rest == "deliveries":
		h, allow = c.postDelivery, "POST"
	case rest == "deliveries/sample":
		h, allow = c.deliverySample, "GET, HEAD"
	case rest == "app":
		h, allow = c.appInfo, "GET, HEAD"
	case rest == "files":
		h, allow = c.uploadFile, "POST"
	case len(parts) == 3 && parts[0] == "files" && parts[1] == "builds":
		h, allow = c.downloadBuild(parts[2]), "GET, HEAD"
	case len(parts) == 3 && parts[0] == "files":
		h, allow = c.fileJob(parts[1], parts[2]), "POST"
	case rest == "faults":
		h, allow = c.faultsAPI, "GET, HEAD, PUT"
	case rest == "events":
		h, allow = c.serveEvents, "GET"
	case rest == "send":
		h, allow = c.sendAPI, "POST"
	case rest == "conformance":
		h, allow = c.conformanceAPI, "POST"
	default:
		writeJSON(w, http.StatusNotFound, message("The console's API has no "+respond.Quote(r.URL.Path)+"; its paths are in the README."))
		return
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, message(r.URL.Path+" takes "+allow+"."))
		return
	}
	if err := h(w, r); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			writeJSON(w, ae.status, message(ae.msg))
			return
		}
		writeJSON(w, http.StatusBadGateway, message(err.Error()))
	}
}

// readRequest reads the JSON request of r into v (see decodeStrict).
func readRequest(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAPIBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return failf(http.StatusRequestEntityTooLarge, "The request is larger than %d MiB.", maxAPIBody>>20)
		}
		return failf(http.StatusBadRequest, "The request could not be read.")
	}
	if err := decodeStrict(data, v); err != nil {
		return failf(http.StatusBadRequest, "%s.", capitalize(err.Error()))
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// --- organizations

// orgItem is an organization as the API shows it.
type orgItem struct {
	Domain       string           `json:"domain"`
	ID           int64            `json:"id"`
	Subscription subscriptionItem `json:"subscription"`
	Installation installationItem `json:"installation"`
	// Secret is the installation's app secret, masked.
	Secret string `json:"secret"`
}

type subscriptionItem struct {
	State         string `json:"state"`
	Expires       string `json:"expires,omitempty"`
	SubscribeLink string `json:"subscribe_link,omitempty"`
}

type installationItem struct {
	State string `json:"state"`
	Since string `json:"since,omitempty"`
}

// The states of subscriptions and installations.
const (
	subscriptionPaid    = "paid"
	subscriptionUnpaid  = "unpaid"
	subscriptionMissing = "missing"
	stateInstalled      = "installed"
	stateNotInstalled   = "not_installed"
)

func (c *console) orgItem(org Organization) orgItem {
	item := orgItem{Domain: org.Domain, ID: org.ID}
	switch {
	case !org.ActiveUntil.IsZero():
		item.Subscription = subscriptionItem{State: subscriptionPaid, Expires: org.ActiveUntil.Format(ExpiresLayout)}
	case org.SubscribeLink != "":
		item.Subscription = subscriptionItem{State: subscriptionUnpaid, SubscribeLink: org.SubscribeLink}
	default:
		item.Subscription = subscriptionItem{State: subscriptionMissing}
	}
	item.Installation = installationItem{State: stateNotInstalled}
	if since, secret, ok := c.s.installation(org.Domain); ok {
		item.Installation = installationItem{State: stateInstalled, Since: apiTime(since)}
		item.Secret = mask(secret)
	}
	return item
}

// addOrganizationRequest adds an organization.
type addOrganizationRequest struct {
	Domain string `json:"domain"`
	// ID is the organization's id; default one more than the largest.
	ID int64 `json:"id"`
	// Subscription is paid, unpaid or missing; default missing.
	Subscription string `json:"subscription"`
}

func (c *console) organizationsAPI(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		orgs := c.s.Organizations()
		items := make([]orgItem, 0, len(orgs))
		for _, org := range orgs {
			items = append(items, c.orgItem(org))
		}
		writeJSON(w, http.StatusOK, items)
		return nil
	}
	var req addOrganizationRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	if err := checkDomain(req.Domain); err != nil {
		return failf(http.StatusBadRequest, "%s.", capitalize(err.Error()))
	}
	if req.ID < 0 {
		return failf(http.StatusBadRequest, "The id must be a positive integer.")
	}
	org := Organization{Domain: req.Domain, ID: req.ID}
	if org.ID == 0 {
		org.ID = c.s.nextOrganizationID()
	}
	switch req.Subscription {
	case subscriptionPaid:
		org.ActiveUntil = c.paidUntil()
	case subscriptionUnpaid:
		org.SubscribeLink = c.subscribeLink(r, Organization{})
	case subscriptionMissing, "":
	default:
		return failf(http.StatusBadRequest, "The subscription must be paid, unpaid or missing.")
	}
	if err := c.s.AddOrganization(org); err != nil {
		return failf(http.StatusConflict, "%s.", capitalize(strings.TrimPrefix(err.Error(), "emulator: ")))
	}
	writeJSON(w, http.StatusCreated, c.orgItem(org))
	return nil
}

// paidUntil is the end of a subscription marked paid: a year from now.
func (c *console) paidUntil() time.Time {
	return c.s.cfg.Now().UTC().Truncate(time.Second).AddDate(1, 0, 0)
}

// subscribeLink is an unpaid organization's checkout page: the one it
// had, else the emulator's.
func (c *console) subscribeLink(r *http.Request, org Organization) string {
	if org.SubscribeLink != "" {
		return org.SubscribeLink
	}
	return c.origin(r) + "/checkout/" + url.PathEscape(c.s.cfg.AppIdentifier)
}

// origin is the emulator's own address as r reached it (its Host is one
// the console answers for).
func (c *console) origin(r *http.Request) string {
	return siteorigin.Scheme(r) + "://" + r.Host
}

// actionAnswer is the answer of an organization's action: the
// organization after it, and the calls it made.
type actionAnswer struct {
	Organization orgItem    `json:"organization"`
	Call         *callItem  `json:"call"`
	Calls        []callItem `json:"calls"`
	// GatewayCache, for a change of the subscription, says whether the
	// gateway's cached answer was forgotten.
	GatewayCache *gatewayCache `json:"gateway_cache,omitempty"`
}

// The timeouts of the calls the console makes.
const (
	callTimeout = 30 * time.Second
	jobTimeout  = 2*time.Minute + 10*time.Second
)

func (c *console) organizationAction(domain, action string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		org, ok := c.s.organization(domain)
		if !ok {
			return failf(http.StatusNotFound, "There is no organization %s in the emulator.", respond.Quote(domain))
		}
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		var calls []Call
		var err error
		var cache *gatewayCache
		switch action {
		case "install":
			calls, err = c.install(ctx, r, domain, false)
		case "reinstall":
			calls, err = c.install(ctx, r, domain, true)
		case "uninstall":
			calls, err = c.uninstall(ctx, r, domain)
		case "paid":
			calls, cache, err = c.paid(ctx, org)
		case "unpaid":
			if err = c.s.SetSubscription(domain, time.Time{}, c.subscribeLink(r, org)); err == nil {
				cache = c.forgetSubscription(org)
			}
		case "missing":
			if err = c.s.SetSubscription(domain, time.Time{}, ""); err == nil {
				cache = c.forgetSubscription(org)
			}
		case "request":
			calls, err = c.asUser(ctx, w, r, org)
		case "secret":
			_, secret, ok := c.s.installation(domain)
			if !ok {
				return failf(http.StatusConflict, "The app is not installed for %s: it has no app secret.", domain)
			}
			writeJSON(w, http.StatusOK, map[string]string{"secret": secret})
			return nil
		default:
			return failf(http.StatusNotFound, "An organization's actions are install, uninstall, reinstall, paid, unpaid, missing, request and secret, not %s.", respond.Quote(action))
		}
		if err != nil {
			return err
		}
		org, _ = c.s.organization(domain)
		answer := actionAnswer{Organization: c.orgItem(org), Calls: []callItem{}, GatewayCache: cache}
		for _, call := range calls {
			if e := c.log.get(call.ID); e != nil {
				answer.Calls = append(answer.Calls, itemOf(e))
			}
		}
		if n := len(answer.Calls); n > 0 {
			answer.Call = &answer.Calls[n-1]
		}
		writeJSON(w, http.StatusOK, answer)
		return nil
	}
}

// install installs the app for the organization through the gateway, as
// the service does, uninstalling it first for a reinstall.
func (c *console) install(ctx context.Context, r *http.Request, domain string, again bool) ([]Call, error) {
	d, err := c.descriptor(ctx)
	if err != nil {
		return nil, err
	}
	if d.Events.Installed == "" {
		return nil, failf(http.StatusConflict, "The app's descriptor declares no events.installed: the service would not tell it of an installation.")
	}
	var calls []Call
	if _, _, installed := c.s.installation(domain); installed && again {
		if d.Events.Uninstall == "" {
			return nil, failf(http.StatusConflict, "The app's descriptor declares no events.uninstall: the service would not tell it of the uninstallation a reinstall starts with.")
		}
		call, err := c.s.UninstallApp(ctx, nil, c.cfg.App+d.Events.Uninstall, domain, c.origin(r))
		if err != nil {
			return nil, failf(http.StatusConflict, "%s.", capitalize(strings.TrimPrefix(err.Error(), "emulator: ")))
		}
		calls = append(calls, call)
	}
	call, err := c.s.InstallApp(ctx, nil, c.cfg.App+d.Events.Installed, domain, c.origin(r))
	if err != nil {
		return nil, failf(http.StatusNotFound, "%s.", capitalize(strings.TrimPrefix(err.Error(), "emulator: ")))
	}
	return append(calls, call), nil
}

func (c *console) uninstall(ctx context.Context, r *http.Request, domain string) ([]Call, error) {
	if _, _, installed := c.s.installation(domain); !installed {
		return nil, failf(http.StatusConflict, "The app is not installed for %s.", domain)
	}
	d, err := c.descriptor(ctx)
	if err != nil {
		return nil, err
	}
	if d.Events.Uninstall == "" {
		return nil, failf(http.StatusConflict, "The app's descriptor declares no events.uninstall: the service would not tell it of an uninstallation.")
	}
	call, err := c.s.UninstallApp(ctx, nil, c.cfg.App+d.Events.Uninstall, domain, c.origin(r))
	if err != nil {
		return nil, failf(http.StatusConflict, "%s.", capitalize(strings.TrimPrefix(err.Error(), "emulator: ")))
	}
	return []Call{call}, nil
}

// paid marks the subscription paid for a year, has the gateway of the
// emulator's process forget its cached answer, and sends
// subscription_paid when the app declares it.
func (c *console) paid(ctx context.Context, org Organization) ([]Call, *gatewayCache, error) {
	d, err := c.descriptor(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := c.s.SetSubscription(org.Domain, c.paidUntil(), ""); err != nil {
		return nil, nil, err
	}
	cache := c.forgetSubscription(org)
	if d.Events.SubscriptionPaid == "" {
		return nil, cache, nil
	}
	call, err := c.s.SubscriptionPaid(ctx, nil, c.cfg.App+d.Events.SubscriptionPaid, org.Domain)
	if err != nil {
		return nil, cache, err
	}
	return []Call{call}, cache, nil
}

// descriptor reads the app's descriptor through the gateway, as the
// service does.
func (c *console) descriptor(ctx context.Context) (*descriptor.Descriptor, error) {
	address := c.cfg.App + c.cfg.DescriptorPath
	l := &descriptor.Loader{Client: &http.Client{Timeout: 10 * time.Second, Transport: c.cfg.Transport}}
	loaded, err := l.Load(ctx, address)
	if err != nil {
		return nil, failf(http.StatusBadGateway, "The app's descriptor could not be read through the gateway at %s: %v", address, err)
	}
	return loaded.Descriptor, nil
}

// --- the app

// appAnswer is the app as the console knows it from its descriptor.
type appAnswer struct {
	URL         string         `json:"url"`
	Descriptor  string         `json:"descriptor"`
	Error       string         `json:"error,omitempty"`
	Webhooks    []moduleItem   `json:"webhooks"`
	FileFormats []moduleItem   `json:"file_formats"`
	PreExports  []moduleItem   `json:"pre_exports"`
	Events      map[string]any `json:"events"`
}

type moduleItem struct {
	Key         string   `json:"key"`
	URL         string   `json:"url"`
	Events      []string `json:"events,omitempty"`
	FileName    string   `json:"file_name_pattern,omitempty"`
	FileContent string   `json:"file_content_pattern,omitempty"`
}

func (c *console) appInfo(w http.ResponseWriter, r *http.Request) error {
	answer := appAnswer{URL: c.cfg.App, Descriptor: c.cfg.App + c.cfg.DescriptorPath,
		Webhooks: []moduleItem{}, FileFormats: []moduleItem{}, PreExports: []moduleItem{}, Events: map[string]any{}}
	d, err := c.descriptor(r.Context())
	if err != nil {
		answer.Error = err.Error()
		writeJSON(w, http.StatusOK, answer)
		return nil
	}
	for _, h := range d.Webhooks {
		answer.Webhooks = append(answer.Webhooks, moduleItem{Key: h.Key, URL: h.URL, Events: h.Events})
	}
	for _, f := range d.FileFormats {
		answer.FileFormats = append(answer.FileFormats, moduleItem{Key: f.Key, URL: f.URL,
			FileName: f.SignaturePatterns.FileName, FileContent: f.SignaturePatterns.FileContent})
	}
	for _, p := range d.PreExports {
		answer.PreExports = append(answer.PreExports, moduleItem{Key: p.Key, URL: p.URL,
			FileName: p.SignaturePatterns.FileName, FileContent: p.SignaturePatterns.FileContent})
	}
	for name, path := range map[string]string{EventInstalled: d.Events.Installed, EventUninstall: d.Events.Uninstall,
		EventSubscriptionPaid: d.Events.SubscriptionPaid} {
		if path != "" {
			answer.Events[name] = path
		}
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}

// --- faults

// faultJSON is a Fault in the API.
type faultJSON struct {
	Status int      `json:"status,omitempty"`
	Delay  duration `json:"delay,omitempty"`
	Outage bool     `json:"outage,omitempty"`
}

func (f faultJSON) fault() *Fault {
	return &Fault{Status: f.Status, Delay: time.Duration(f.Delay), Outage: f.Outage}
}

// faultsRequest changes faults: a member left out leaves its fault as it
// is, null clears it.
type faultsRequest struct {
	Token        optional[faultJSON] `json:"token"`
	Subscription optional[faultJSON] `json:"subscription"`
}

// faultOut is a Fault as the API answers it.
type faultOut struct {
	Status int    `json:"status,omitempty"`
	Delay  string `json:"delay,omitempty"`
	Outage bool   `json:"outage,omitempty"`
}

func faultsAnswer(f Faults) map[string]*faultOut {
	out := map[string]*faultOut{"token": nil, "subscription": nil}
	for name, one := range map[string]*Fault{"token": f.Token, "subscription": f.Subscription} {
		if one != nil {
			o := &faultOut{Status: one.Status, Outage: one.Outage}
			if one.Delay > 0 {
				o.Delay = one.Delay.String()
			}
			out[name] = o
		}
	}
	return out
}

func (c *console) faultsAPI(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPut {
		var req faultsRequest
		if err := readRequest(w, r, &req); err != nil {
			return err
		}
		f := c.s.Faults()
		for _, one := range []struct {
			req optional[faultJSON]
			dst **Fault
		}{{req.Token, &f.Token}, {req.Subscription, &f.Subscription}} {
			if !one.req.Set {
				continue
			}
			*one.dst = nil
			if one.req.Value != nil {
				*one.dst = one.req.Value.fault()
			}
		}
		if err := c.s.SetFaults(f); err != nil {
			return failf(http.StatusBadRequest, "%s.", capitalize(err.Error()))
		}
	}
	writeJSON(w, http.StatusOK, faultsAnswer(c.s.Faults()))
	return nil
}

// parseID reads a call id of a path.
func parseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0 && strconv.FormatInt(id, 10) == s
}
