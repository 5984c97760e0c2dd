package caddymodule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/net/http/httpguts"

	"github.com/servicegate/servicegate/approute"
	"github.com/servicegate/servicegate/cluster"
	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/installations"
)

// appDefaultTokenHeader carries an organization's app token to the app.
const appDefaultTokenHeader = "X-Service-App-Token"

// appTokenTimeout bounds one request of the service_app grant.
const appTokenTimeout = 10 * time.Second

// AppInstallations is service_app's installations block: the gateway keeps
// each organization's installation of the app (its app secret, its app
// token), answers the service's lifecycle calls at the paths the
// descriptor's events name, verifies each organization's webhook
// deliveries with its own secret, and gives the app a fresh app token of
// the organization on the requests it forwards.
type AppInstallations struct {
	// Key seals what is stored (AES-256-GCM under a key derived from it
	// with HKDF-SHA256, each record bound to its organization). At least
	// 32 bytes; {env.*} and {file.*} placeholders are resolved at load.
	// Required.
	Key string `json:"key,omitempty"`

	// RetiredKeys are earlier keys: a record sealed under one still
	// opens, and is sealed again under Key at start and when read, so
	// that a key can be rotated without a reinstall. A retired key may go
	// once servicegate_installations_records{key="retired"} is 0 on
	// every instance. Each at least 32 bytes; placeholders as for Key.
	RetiredKeys []string `json:"retired_keys,omitempty"`

	// Store is where installations are kept: "disk", a file in Caddy's
	// data directory that survives restarts, or "redis", shared by every
	// instance through the servicegate app's Redis (a local copy answers
	// the hot paths; a change made on one instance drops it on every
	// instance). Default: redis with the servicegate option's redis,
	// else disk.
	Store string `json:"store,omitempty"`

	// Forward tells the app of each lifecycle call (the next handler),
	// without appSecret and code, as a request the gateway builds: a
	// POST to the descriptor's path with no query, the gateway's body,
	// and only Content-Type, Content-Length, the app token header and the
	// trace context (traceparent, tracestate) of the call's headers; the
	// call is committed only once the app answers a final 2xx (a 1xx or
	// no answer is the app's failure: 502). "off" answers the service
	// without the app. Default on.
	Forward string `json:"forward,omitempty"`

	// BudgetPerSource and BudgetOverall limit the lifecycle calls the
	// service does not vouch for: each one makes the gateway ask the
	// service (an app token, a subscription query) with the app's client
	// credentials, and a source address may make BudgetPerSource of them
	// a minute, all sources together BudgetOverall; then its calls are
	// answered 429 with Retry-After and the service is not asked. Calls
	// the service proves spend nothing. Default 10 and 100.
	BudgetPerSource int `json:"budget_per_source,omitempty"`

	// BudgetOverall is how many unproved lifecycle calls all sources
	// together may make a minute (see BudgetPerSource). Default 100.
	BudgetOverall int `json:"budget_overall,omitempty"`
	// BudgetExempt are the source addresses (CIDR prefixes, or single
	// addresses) whose lifecycle calls spend no budget and are never
	// answered 429: the service's published addresses, so that forged
	// calls from elsewhere cannot spend the overall budget its own
	// installs need. The source is Caddy's client IP.
	BudgetExempt []string `json:"budget_exempt,omitempty"`

	// TokenHeader is the request header that carries the organization's
	// app token to the app, on verified webhook deliveries and on
	// requests with a verified user token of an installed organization;
	// inbound copies are removed. "off" sends none. Default
	// X-Service-App-Token.
	TokenHeader string `json:"token_header,omitempty"`
}

// appInstallations is what a provisioned installations block holds.
type appInstallations struct {
	book    *installations.Book
	handler *installations.Handler
	header  string // "" when off
	where   string // the store, as the book is filed (see installations.Books)
	recount func() // records how many the store holds, for a disk store
	logger  *zap.Logger
}

// installationStores holds each open installations file, so that a config
// reload keeps using it (bbolt locks its file against a second opener).
var installationStores = caddy.NewUsagePool()

// pooledInstallationStore is an installations file in the pool.
type pooledInstallationStore struct{ *installations.BoltStore }

// Destruct closes the file when no config uses it any more.
func (p pooledInstallationStore) Destruct() error { return p.Close() }

// installationOutcomes counts lifecycle calls by outcome, and app token
// requests by result.
var (
	installationCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "servicegate", Subsystem: "installations", Name: "calls_total",
		Help: "Lifecycle calls of the service (installed, uninstall, subscription_paid) answered by service_app, by outcome.",
	}, []string{"outcome"})
	installationTokenRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "servicegate", Subsystem: "installations", Name: "token_renewals_total",
		Help: "App tokens renewed (the service_app grant asked again) for installed organizations, by result.",
	}, []string{"result"})
)

// eventsWithoutInstallations is the defect of a descriptor that declares
// lifecycle events while the gateway keeps no installations.
func eventsWithoutInstallations(desc *descriptor.Descriptor) string {
	if !desc.Events.Any() {
		return ""
	}
	return "the descriptor declares lifecycle events (events: installed, uninstall, subscription_paid), " +
		"which service_app answers only with an installations block: add `installations { key {env.SERVICEGATE_INSTALLATIONS_KEY} }` " +
		"(a key of at least 32 bytes seals what is stored)"
}

// provisionInstallations opens the installations of the app when the
// block is given: in the servicegate app's Redis, shared by every
// instance, or in a file of Caddy's data directory. It runs before the
// routes are loaded, which get the installations as their secret source
// (see wire).
func (a *ServiceApp) provisionInstallations(ctx caddy.Context, desc *descriptor.Descriptor) error {
	if a.Installations == nil {
		if msg := eventsWithoutInstallations(desc); msg != "" {
			return errors.New("service_app: " + msg)
		}
		return nil
	}
	cfg, client, err := a.installationsConfig(ctx, desc)
	if err != nil {
		return err
	}
	if store := a.Installations.Store; store == "redis" || (store == "" && client != nil) {
		// Shared by every instance: each drops its local copy of an
		// organization when another announces a change.
		shared := client.Installations(a.clientID)
		cfg.Book.Store = shared
		cfg.Book.Lock = func(ctx context.Context, org string) (func(), error) { return shared.Lock(ctx, org, 2*appTokenTimeout) }
		where := "redis " + client.Label() + " " + a.clientID // as the queue names its Redis: never a password
		if err := a.openInstallations(cfg, where); err != nil {
			return fmt.Errorf("service_app: installations: %w", err)
		}
		others, err := shared.Register(ctx, desc.Identifier)
		a.tellClientIDChanged(others, err)
		book := a.inst.book
		a.cleanups = append(a.cleanups, cleanupFunc(shared.OnChange(func(org string) { _ = book.Refresh(org) })))
		return nil
	}
	// One file per app (client id) in Caddy's storage, or data, directory.
	path := a.installationsFile(ctx)
	v, _, err := installationStores.LoadOrNew(path, func() (caddy.Destructor, error) {
		s, err := installations.OpenBolt(path)
		if err != nil {
			return nil, err
		}
		return pooledInstallationStore{s}, nil
	})
	if err != nil {
		return fmt.Errorf("service_app: installations: %w", err)
	}
	release := installationStoreRelease(path)
	cfg.Book.Store = v.(pooledInstallationStore).BoltStore
	if err := a.openInstallations(cfg, path); err != nil {
		_ = release.Cleanup()
		return fmt.Errorf("service_app: installations in %s: %w", path, err)
	}
	a.cleanups = append(a.cleanups, release)
	a.tellClientIDChanged(installations.RegisterFile(path, a.clientID, desc.Identifier, a.inst.book.Len()))
	inst := a.inst
	inst.recount = func() { _, _ = installations.RegisterFile(path, a.clientID, desc.Identifier, inst.book.Len()) }
	return nil
}

// tellClientIDChanged warns at load when the app's store is empty while
// other apps' stores beside it hold installations: client_id changed.
func (a *ServiceApp) tellClientIDChanged(others []string, err error) {
	switch {
	case err != nil:
		a.inst.logger.Warn("the apps of the installations stores could not be recorded", zap.Error(err))
	case len(others) > 0 && a.inst.book.Len() == 0 && a.inst.book.KeyStates()[installations.KeyNone] == 0:
		a.inst.logger.Warn(installations.ClientIDChanged(a.clientID, others))
	}
}

// installationsConfig checks the installations block and makes the
// configuration of its installations but the store; client is the
// servicegate app's Redis client, if it has one.
func (a *ServiceApp) installationsConfig(ctx caddy.Context, desc *descriptor.Descriptor) (cfg installations.Config, client *cluster.Client, err error) {
	ic := a.Installations
	if err := ic.validate(); err != nil {
		return cfg, nil, err
	}
	sg, err := servicegateApp(ctx)
	if err != nil {
		return cfg, nil, err
	}
	if sg != nil {
		client = sg.Client()
	}
	if ic.Store == "redis" && client == nil {
		return cfg, nil, errors.New("service_app: installations: store redis needs the servicegate app's redis option (a global servicegate { redis <url> } block)")
	}
	repl := caddy.NewReplacer()
	retired := make([][]byte, 0, len(ic.RetiredKeys))
	for _, k := range ic.RetiredKeys {
		retired = append(retired, []byte(repl.ReplaceKnown(k, "")))
	}
	if cfg.Book.Sealer, err = installations.NewSealer([]byte(repl.ReplaceKnown(ic.Key, "")), retired...); err != nil {
		return cfg, nil, fmt.Errorf("service_app: installations: %w (is its environment variable or file set?)", err)
	}
	if cfg.Service = strings.TrimSuffix(repl.ReplaceKnown(cmp.Or(a.AuthURL, a.Service), ""), "/"); cfg.Service == "" {
		return cfg, nil, errors.New("service_app: installations: service (or auth_url) is required: installations are proved by asking the service for an app token")
	}
	if cfg.ClientSecret = repl.ReplaceKnown(a.ClientSecret, ""); cfg.ClientSecret == "" {
		return cfg, nil, errors.New("service_app: installations: client_secret is required: the app asks for app tokens with it")
	}
	cfg.ClientID, cfg.TokenTimeout, cfg.Handler.Forward = a.clientID, appTokenTimeout, ic.Forward != "off"
	cfg.Handler.BaseURL = strings.TrimSuffix(repl.ReplaceKnown(cmp.Or(a.Service, a.AuthURL), ""), "/")
	if h := ic.TokenHeader; h != "off" {
		cfg.Handler.TokenHeader = http.CanonicalHeaderKey(cmp.Or(h, appDefaultTokenHeader))
	}
	cfg.Handler.Prove, cfg.Handler.Confirm, cfg.Handler.Source = a.proveAppToken, a.confirmPaid, clientIP
	exempt, _ := budgetExemptPrefixes(ic.BudgetExempt) // checked by validate
	cfg.Handler.Budget = installations.NewBudget(ic.BudgetPerSource, ic.BudgetOverall, 0, nil).Exempt(exempt...)
	cfg.Handler.Paths = [installations.NumKinds]string{installations.Installed: desc.Events.Installed,
		installations.Uninstall: desc.Events.Uninstall, installations.SubscriptionPaid: desc.Events.SubscriptionPaid}
	cfg.Handler.Purge, cfg.Handler.Refuse = forgetOrganization(ctx), refuse
	a.reportInstallations(ctx, &cfg)
	return cfg, client, nil
}

// openInstallations opens the installations of cfg, kept at where (as the
// book is filed in installationBooks).
func (a *ServiceApp) openInstallations(cfg installations.Config, where string) error {
	book, handler, err := installations.Open(cfg)
	if err != nil {
		return err
	}
	a.inst = &appInstallations{book: book, handler: handler, logger: a.logger.Named("installations"), where: where}
	if h := a.Installations.TokenHeader; h != "off" {
		a.inst.header = http.CanonicalHeaderKey(cmp.Or(h, appDefaultTokenHeader))
	}
	a.cleanups = append(a.cleanups, cleanupFunc(installationBooks.Keep(where, book)))
	return nil
}

// routeLifecycle routes a lifecycle route to the installations.
func (a *ServiceApp) routeLifecycle(router *approute.Router, rt *AppRoute) error {
	if a.inst == nil {
		return fmt.Errorf("service_app: route %s answers the lifecycle call %s, which needs an installations block", rt.Path, rt.Event)
	}
	h := a.inst.handler
	lifecycle := func(w http.ResponseWriter, r *http.Request, next approute.Next) error { return h.Serve(w, r, next) }
	// Every spelling of a lifecycle path that a lenient router takes for
	// it gets the lifecycle's checks, as module urls do.
	if other := router.Module(rt.Path, lifecycle); other != "" {
		return fmt.Errorf("service_app: the lifecycle path %s and %s are one path to the app (they differ only in case, slashes or a ;param)", rt.Path, other)
	}
	return nil
}

// installationStoreRelease lets go of the config's use of the file.
type installationStoreRelease string

// Cleanup implements caddy.CleanerUpper.
func (p installationStoreRelease) Cleanup() error {
	_, err := installationStores.Delete(string(p))
	return err
}

// cleanupFunc is a function as a caddy.CleanerUpper.
type cleanupFunc func()

// Cleanup implements caddy.CleanerUpper.
func (f cleanupFunc) Cleanup() error { f(); return nil }

func (ic *AppInstallations) validate() error {
	switch {
	case ic.Key == "":
		return errors.New("service_app: installations: key is required: at least 32 bytes that seal what is stored, such as {env.SERVICEGATE_INSTALLATIONS_KEY}")
	case ic.Store != "" && ic.Store != "disk" && ic.Store != "redis":
		return fmt.Errorf("service_app: installations: store %q is neither disk nor redis", ic.Store)
	case ic.Forward != "" && ic.Forward != "on" && ic.Forward != "off":
		return fmt.Errorf("service_app: installations: forward takes on or off, not %q", ic.Forward)
	case ic.BudgetPerSource < 0 || ic.BudgetOverall < 0:
		return errors.New("service_app: installations: unproved_budget takes positive numbers of calls a minute")
	case budgetExemptErr(ic.BudgetExempt) != nil:
		return fmt.Errorf("service_app: installations: %w", budgetExemptErr(ic.BudgetExempt))
	case ic.TokenHeader != "" && ic.TokenHeader != "off" && !httpguts.ValidHeaderFieldName(ic.TokenHeader):
		return fmt.Errorf("service_app: installations: token_header %q is not a header name", ic.TokenHeader)
	}
	return nil
}

// parseInstallations reads the installations block:
//
//	installations {
//		key <key>                  # required: seals what is stored (at least 32 bytes)
//		retired_keys <key>...      # earlier keys: their records open and are sealed again under key
//		store disk                 # default disk
//		forward on|off             # default on
//		token_header <name>|off    # default X-Service-App-Token
//		unproved_budget <per source> [<overall>] [exempt <cidr>...]  # a minute; default 10 100
//	}
func (a *ServiceApp) parseInstallations(d *caddyfile.Dispenser) error {
	start := d.Token()
	if a.Installations != nil {
		return d.Err("installations given twice")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	ic := new(AppInstallations)
	err := parseBlock(d, "installations", map[string]subdirective{
		"key":          once(installationsKeyArg(&ic.Key)),
		"store":        once(stringArg(&ic.Store)),
		"forward":      once(stringArg(&ic.Forward)),
		"token_header": once(stringArg(&ic.TokenHeader)),
		"retired_keys": once(func(d *caddyfile.Dispenser) error {
			ic.RetiredKeys = d.RemainingArgs()
			if len(ic.RetiredKeys) == 0 {
				return d.ArgErr()
			}
			return nil
		}),
		"unproved_budget": once(func(d *caddyfile.Dispenser) error {
			return unprovedBudget(d, ic)
		}),
	})
	if err != nil {
		return err
	}
	if err := ic.validate(); err != nil {
		return errAt(start, strings.TrimPrefix(err.Error(), "service_app: "))
	}
	a.Installations = ic
	return nil
}

// unprovedBudget reads `unproved_budget <per source> [<overall>]
// [exempt <cidr>...]`.
func unprovedBudget(d *caddyfile.Dispenser, ic *AppInstallations) error {
	args := d.RemainingArgs()
	numbers := args
	if i := slices.Index(args, "exempt"); i >= 0 {
		numbers, ic.BudgetExempt = args[:i], args[i+1:]
		if len(ic.BudgetExempt) == 0 {
			return d.Errf("unproved_budget's exempt takes the service's addresses (CIDR prefixes such as 192.0.2.0/24, or single addresses)")
		}
		if err := budgetExemptErr(ic.BudgetExempt); err != nil {
			return d.Err(err.Error())
		}
	}
	if len(numbers) < 1 || len(numbers) > 2 {
		return d.ArgErr()
	}
	for i, arg := range numbers {
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return d.Errf("unproved_budget takes positive numbers of calls a minute, not %q", arg)
		}
		*[]*int{&ic.BudgetPerSource, &ic.BudgetOverall}[i] = n
	}
	return nil
}

// budgetExemptPrefixes parses the exempt sources: CIDR prefixes, or
// single addresses (a prefix of their whole length).
func budgetExemptPrefixes(exempt []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(exempt))
	for _, v := range exempt {
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("unproved_budget exempt %q is neither a CIDR prefix (192.0.2.0/24, 2001:db8::/32) nor an IP address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// budgetExemptErr is the error of exempt sources that do not parse.
func budgetExemptErr(exempt []string) error {
	_, err := budgetExemptPrefixes(exempt)
	return err
}
