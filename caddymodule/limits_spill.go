package caddymodule

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/modulecall"
)

// The defaults of spill.
const (
	defaultSpillPath    = "/servicegate/spill/"
	defaultSpillTTL     = 10 * time.Minute
	defaultSpillMaxSize = 64 << 20
)

// SpillOptions hands an app's answer that is larger than max_response_size
// to the service by URL: its strings (as new-line delimited JSON), file
// content or preview are stored, and the answer carries stringsUrl,
// contentUrl or previewUrl instead. The URLs are served by this handler,
// signed, expiring, and good for one download.
type SpillOptions struct {
	// The path, under the handler's route, of the stored payloads; the
	// route must match it. Default: /servicegate/spill/.
	Path string `json:"path,omitempty"`

	// The scheme and host (and any path prefix) of the payload URLs, e.g.
	// https://app.example.com. Default: under service_app its base_url,
	// else the site's own host name (a request's Host header only picks
	// among the site's names) with the scheme and port the request came in
	// on; on a site without a host name an answer over max_response_size
	// is then refused. Set it behind a proxy.
	BaseURL string `json:"base_url,omitempty"`

	// How long a payload URL stays valid. Default: 10m.
	TTL caddy.Duration `json:"ttl,omitempty"`

	// The directory of the stored payloads. Default: servicegate-spill
	// under the system's temporary directory.
	Dir string `json:"dir,omitempty"`

	// The largest answer the app may give, read to disk, when spilling;
	// max_response_size still bounds what is answered inline.
	// Default: 64 MiB.
	MaxSize int64 `json:"max_size,omitempty"`

	// The key that signs payload URLs (HMAC-SHA256); may be an
	// {env.*} or {file.*} placeholder. Default: a random key per process,
	// so URLs do not outlive the process. Required with the servicegate
	// redis option, the same on every instance.
	Key string `json:"key,omitempty"`
}

// processSpillKey signs payload URLs when no key is configured; it lives as
// long as the process, so URLs survive config reloads.
var processSpillKey = sync.OnceValue(func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
})

// provisionSpill fills in the spill defaults and opens the store: in Redis
// when the servicegate app is configured, so that every instance serves the
// links of the others; else on disk, where the handler sweeps expired
// payloads until Cleanup.
func (l *ServiceLimits) provisionSpill(ctx caddy.Context) (*modulecall.Spill, error) {
	s := l.Spill
	if s.Path == "" {
		s.Path = defaultSpillPath
	}
	if s.TTL == 0 {
		s.TTL = caddy.Duration(defaultSpillTTL)
	}
	if s.Dir == "" {
		s.Dir = filepath.Join(os.TempDir(), "servicegate-spill")
	}
	if s.MaxSize == 0 {
		s.MaxSize = defaultSpillMaxSize
	}
	app, err := servicegateApp(ctx)
	if err != nil {
		return nil, fmt.Errorf("service_limits: %w", err)
	}
	if app != nil && s.Key == "" {
		return nil, errors.New("service_limits: spill with the servicegate redis option needs spill_key, the same on every instance (e.g. spill_key {env.SERVICEGATE_SPILL_KEY}; in JSON spill.key): a link minted by one instance is checked by another, which a random key per process cannot do")
	}
	repl := caddy.NewReplacer()
	key := processSpillKey()
	if s.Key != "" {
		k, err := repl.ReplaceOrErr(s.Key, true, true)
		if err != nil {
			return nil, errors.New("service_limits: spill key: a placeholder in it has no value")
		}
		if len(k) < 16 {
			return nil, errors.New("service_limits: spill key must be at least 16 bytes")
		}
		key = []byte(k)
	}
	base, err := resolvedAddress("spill_base_url", s.BaseURL, baseURL)
	if err != nil {
		return nil, fmt.Errorf("service_limits: %w", err)
	}
	s.BaseURL = strings.TrimSuffix(base, "/")
	if s.BaseURL == "" && l.origin == nil {
		site := &siteOrigin{fix: "set spill_base_url in service_limits"}
		site.warnHostless(ctx, l.logger, "handing an answer over max_response_size over by link")
		l.origin = func(r *http.Request) (string, error) { return site.of(r, l) }
	}
	var store contract.Payloads = &contract.Store{Dir: s.Dir, Key: key, TTL: time.Duration(s.TTL)}
	if app != nil {
		store = app.Client().Spill(contract.Links{Key: key, TTL: time.Duration(s.TTL)})
	}
	return &modulecall.Spill{Path: s.Path, BaseURL: s.BaseURL, Origin: l.origin, Dir: s.Dir, MaxSize: s.MaxSize, Store: store}, nil
}

// validateSpill checks the spill options after provisioning.
func (l *ServiceLimits) validateSpill() error {
	s := l.Spill
	if s.Path != "" && (!strings.HasPrefix(s.Path, "/") || !strings.HasSuffix(s.Path, "/")) {
		return fmt.Errorf("service_limits: spill_path must start and end with /, got %q", s.Path)
	}
	if s.TTL < 0 || s.MaxSize < 0 {
		return errors.New("service_limits: spill_ttl and spill_max_size must be positive")
	}
	if s.MaxSize != 0 && s.MaxSize < l.responseLimit() {
		return fmt.Errorf("service_limits: spill_max_size (%s) is below max_response_size (%s)", limits.LimitName(s.MaxSize), limits.LimitName(l.responseLimit()))
	}
	return nil
}
