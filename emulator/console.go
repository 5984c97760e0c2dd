package emulator

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/servicegate/servicegate/respond"
	"github.com/servicegate/servicegate/siteorigin"
)

// The console's paths.
const (
	// ConsolePath is the console's page.
	ConsolePath = "/emulator/console"
	// APIPrefix starts every path of the console's JSON API.
	APIPrefix           = "/emulator/api/"
	consoleAssetsPrefix = "/emulator/console/"
	// DefaultDescriptorPath is where the console reads the app's
	// descriptor, relative to the app's address.
	DefaultDescriptorPath = "/manifest.json"
)

// ConsoleConfig configures the emulator's console: a page and a JSON API
// that show every call the emulator takes part in, with the gateway's
// verdict, and that drive the emulated service (installations,
// subscriptions, deliveries, file jobs, faults).
type ConsoleConfig struct {
	// Off turns the console off: no page, no API, no call log.
	Off bool
	// Keep is how many calls the log keeps, the oldest dropped first.
	// Default DefaultKeep, at most MaxKeep.
	Keep int
	// App is the app's base address as the service reaches it (the
	// gateway in front of it), where the console sends lifecycle calls,
	// deliveries and file jobs. Default: the origin of the first
	// redirect URI.
	App string
	// DescriptorPath is where the app's descriptor is read, relative to
	// App. Default DefaultDescriptorPath.
	DescriptorPath string
	// SiteHosts, when set, gives the host names of the site the
	// emulator serves: the console answers requests for them, and for
	// loopback names and addresses; any other Host is refused (421), so
	// that a page whose name was rebound to this machine cannot use it.
	SiteHosts func(r *http.Request) []string
	// Gateway, when set, is where a gateway in the same process records
	// its verdict on each call (see Verdicts); otherwise the verdict is
	// read from the answer.
	Gateway *Verdicts
	// ForgetSubscription, when set, makes a gateway in the same process
	// forget the subscription answers it cached for an organization
	// (named by each of keys: its domain and its id), so that a change the
	// console makes takes effect at the next request. It reports whether
	// the process has such a cache at all; without one the console says
	// that a gateway elsewhere keeps its answer until expires or a purge.
	ForgetSubscription func(keys ...string) (cached bool)
	// Transport sends the calls; default http.DefaultTransport.
	Transport http.RoundTripper
	// Conformance, when set, runs the conformance cases the console's
	// Conformance section asks for (POST /emulator/api/conformance).
	Conformance Conformance
}

// console is the emulator's console.
type console struct {
	s       *Server
	cfg     ConsoleConfig
	log     *callLog
	client  *http.Client
	gateway *Verdicts
	files   *fileStore
	// keepalive is how often an idle event stream gets a comment.
	keepalive time.Duration
	now       func() time.Time
}

func newConsole(s *Server, cfg ConsoleConfig) (*console, error) {
	switch {
	case cfg.Keep == 0:
		cfg.Keep = DefaultKeep
	case cfg.Keep < 0 || cfg.Keep > MaxKeep:
		return nil, fmt.Errorf("keep must be from 1 to %d, not %d", MaxKeep, cfg.Keep)
	}
	if cfg.App == "" {
		u, err := url.Parse(s.cfg.RedirectURIs[0])
		if err != nil {
			return nil, err
		}
		cfg.App = u.Scheme + "://" + u.Host
	}
	cfg.App = strings.TrimSuffix(cfg.App, "/")
	if u, err := url.Parse(cfg.App); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the app's address %q is not an http or https address", cfg.App)
	}
	if cfg.DescriptorPath == "" {
		cfg.DescriptorPath = DefaultDescriptorPath
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	c := &console{s: s, cfg: cfg, log: newCallLog(cfg.Keep), gateway: cfg.Gateway,
		files: newFileStore(), keepalive: 10 * time.Second, now: time.Now}
	c.client = &http.Client{Transport: &recorder{c: c, base: cfg.Transport}}
	return c, nil
}

//go:embed console
var consoleFiles embed.FS

// consolePage is the page, with nonceMark where each load's nonce goes.
var consolePage = func() string {
	b, err := consoleFiles.ReadFile("console/index.html")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

const nonceMark = "{{nonce}}"

// serve answers the console's page and API, for the site's own names and
// loopback only, and with every method but GET and HEAD from the same
// origin only.
func (c *console) serve(w http.ResponseWriter, r *http.Request) {
	if !c.ownHost(r) {
		writeJSON(w, http.StatusMisdirectedRequest, message("The emulator's console answers only for this machine (localhost) and the site's own name, not for "+respond.Quote(r.Host)+"."))
		return
	}
	if !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, message("The console's API takes this request only from the console's own page (same origin)."))
		return
	}
	switch p := r.URL.Path; {
	case p == ConsolePath:
		c.servePage(w, r)
	case strings.HasPrefix(p, consoleAssetsPrefix):
		c.serveAsset(w, r, strings.TrimPrefix(p, consoleAssetsPrefix))
	default:
		c.serveAPI(w, r)
	}
}

// ownHost reports whether r is for a loopback name or address, or one of
// the site's own names.
func (c *console) ownHost(r *http.Request) bool {
	return ownHost(r, c.cfg.SiteHosts)
}

func ownHost(r *http.Request, siteHosts func(*http.Request) []string) bool {
	h := hostOf(r.Host)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	if h == "" {
		return false
	}
	names, _ := r.Context().Value(siteHostsKey{}).([]string)
	if siteHosts != nil {
		names = append(names[:len(names):len(names)], siteHosts(r)...)
	}
	for _, name := range names {
		name = strings.ToLower(name)
		if name == h || strings.Contains(name, "*") && siteorigin.MatchHost(name, h) {
			return true
		}
	}
	return false
}

type siteHostsKey struct{}

type streamsEndKey struct{}

// WithStreamsEnd returns ctx whose event streams end when done is closed:
// a server that stops serving (a Caddy config replaced by another) ends
// them, and the pages reconnect to what serves now, missing nothing.
func WithStreamsEnd(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, streamsEndKey{}, done)
}

// WithSiteHosts returns ctx naming the host names of the site the
// emulator serves (as ConsoleConfig.SiteHosts does), for a server whose
// site is known per request.
func WithSiteHosts(ctx context.Context, hosts []string) context.Context {
	return context.WithValue(ctx, siteHostsKey{}, hosts)
}

// sameOrigin reports whether r may change something: a GET or HEAD; a
// request a browser marks same-origin (or user-initiated); a request
// whose Origin is the page's; or one with neither header (the CLI, curl).
func sameOrigin(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin, ok := r.Header["Origin"]
	if !ok {
		return true
	}
	return len(origin) == 1 && strings.EqualFold(origin[0], siteorigin.Scheme(r)+"://"+r.Host)
}

// guard applies the console's host and origin checks to a request of a
// developer's tool outside the console (the lifecycle path), and answers
// it when they fail.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	var hosts func(*http.Request) []string
	if s.console != nil {
		hosts = s.console.cfg.SiteHosts
	} else {
		hosts = s.cfg.Console.SiteHosts
	}
	if !ownHost(r, hosts) {
		writeJSON(w, http.StatusMisdirectedRequest, message("The emulator answers this path only for this machine (localhost) and the site's own name, not for "+respond.Quote(r.Host)+"."))
		return false
	}
	if !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, message("This path takes requests from tools and from the emulator's own pages only (same origin)."))
		return false
	}
	return true
}

// servePage writes the console's page with a nonce of its own for its
// script and style, and a Content-Security-Policy that allows nothing
// else.
func (c *console) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, message("The console's page takes GET."))
		return
	}
	var raw [18]byte
	_, _ = rand.Read(raw[:])
	nonce := base64.RawURLEncoding.EncodeToString(raw[:])
	body := strings.ReplaceAll(consolePage, nonceMark, nonce)
	h := w.Header()
	respond.SetPageHeaders(h)
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'self' 'nonce-"+nonce+"'; "+
		"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte(body))
	}
}

// consoleAssets are the files the page loads, and their types.
var consoleAssets = map[string]string{
	"console.js":  "text/javascript; charset=utf-8",
	"console.css": "text/css; charset=utf-8",
}

func (c *console) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	kind, ok := consoleAssets[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, message("The console has no file "+respond.Quote(name)+"."))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, message("The console's files take GET."))
		return
	}
	body, err := consoleFiles.ReadFile("console/" + name)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, message("The console's file could not be read."))
		return
	}
	h := w.Header()
	h.Set("Content-Type", kind)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// WriteIndex writes the page of the emulator's root: what it is, and
// where its console is.
func (s *Server) WriteIndex(w http.ResponseWriter, r *http.Request) {
	p := respond.Page{Title: "Service emulator", Note: emulatorNote}
	if s.console != nil && ownHost(r, s.console.cfg.SiteHosts) {
		p.Message = "This is the service emulator, a development stand-in for the service: its OAuth server, its subscription query, and the calls it makes to the app. Its console shows every call, with the gateway's verdict, and drives installations, deliveries, file jobs and faults."
		p.Link, p.LinkText = ConsolePath, "Open the console"
	} else {
		p.Message = "This is the service emulator, a development stand-in for the service. It answers /oauth/authorize, /oauth/token and /api/v2/applications/{id}/subscription."
	}
	respond.WritePage(w, http.StatusOK, p)
}
