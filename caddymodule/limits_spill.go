package caddymodule

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/spans"
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
// links of the others; else on disk, sweeping expired payloads.
func (l *ServiceLimits) provisionSpill(ctx caddy.Context) error {
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
		return fmt.Errorf("service_limits: %w", err)
	}
	if app != nil && s.Key == "" {
		return errors.New("service_limits: spill with the servicegate redis option needs spill_key, the same on every instance (e.g. spill_key {env.SERVICEGATE_SPILL_KEY}; in JSON spill.key): a link minted by one instance is checked by another, which a random key per process cannot do")
	}
	repl := caddy.NewReplacer()
	key := processSpillKey()
	if s.Key != "" {
		k, err := repl.ReplaceOrErr(s.Key, true, true)
		if err != nil {
			return errors.New("service_limits: spill key: a placeholder in it has no value")
		}
		if len(k) < 16 {
			return errors.New("service_limits: spill key must be at least 16 bytes")
		}
		key = []byte(k)
	}
	s.BaseURL = strings.TrimSuffix(repl.ReplaceKnown(s.BaseURL, ""), "/")
	if s.BaseURL == "" && l.origin == nil {
		site := &siteOrigin{fix: "set spill_base_url in service_limits"}
		site.warnHostless(ctx, l.logger, "handing an answer over max_response_size over by link")
		l.origin = func(r *http.Request) (string, error) { return site.of(r, l) }
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil { // answers are read to it either way
		return fmt.Errorf("service_limits: spill dir: %w", err)
	}
	if app != nil {
		l.store = app.Client().Spill(contract.Links{Key: key, TTL: time.Duration(s.TTL)})
		return nil
	}
	store := &contract.Store{Dir: s.Dir, Key: key, TTL: time.Duration(s.TTL)}
	l.store = store
	go sweepSpilled(store, ctx.Done(), l.logger)
	return nil
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

// sweepSpilled removes expired payloads until stop is closed: until the
// config that provisioned the handler is unloaded.
func sweepSpilled(store *contract.Store, stop <-chan struct{}, logger *zap.Logger) {
	every := min(store.TTL/2, time.Minute)
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if n := store.Sweep(); n > 0 {
				logger.Debug("expired payloads removed", zap.Int("count", n))
			}
		}
	}
}

// serveSpilled answers a download of a stored payload: once, while its
// signed URL is valid; any other request of the path gets 403, and 503 when
// the payloads kept in Redis cannot be reached.
func (l *ServiceLimits) serveSpilled(w http.ResponseWriter, r *http.Request) (err error) {
	_, span := spans.Start(r.Context(), "servicegate.spill.download")
	defer func() { endCheck(span, err) }()
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		return refuse(w, r, http.StatusMethodNotAllowed, "Payload links are downloaded with GET.")
	}
	name := strings.TrimPrefix(r.URL.Path, l.Spill.Path)
	f, err := l.store.Take(name, r.URL.Query())
	if err != nil && !errors.Is(err, contract.ErrLinkInvalid) {
		// The Redis client logs the failure, once in a while.
		l.counts.inc(outcomeSpillUnavailable)
		w.Header().Set("Retry-After", "5")
		return refuse(w, r, http.StatusServiceUnavailable, "The stored answer cannot be reached right now. Try the download again in a moment.")
	}
	if err != nil {
		l.counts.inc(outcomeSpillRefused)
		return refuse(w, r, http.StatusForbidden, "This link is invalid, was already used, or has expired. Run the job again for a new one.")
	}
	defer f.Close()
	l.counts.inc(outcomeSpillDownload)
	span.String("servicegate.spill.kind", strings.TrimPrefix(filepath.Ext(name), "."))
	span.Int("servicegate.spill.size", f.Size)
	h := w.Header()
	switch filepath.Ext(name) {
	case contract.KindStrings:
		h.Set("Content-Type", "application/x-ndjson")
	case contract.KindPreview:
		h.Set("Content-Type", "text/html; charset=utf-8")
	default:
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Content-Length", strconv.FormatInt(f.Size, 10))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f) // a failed copy means the client went away
	span.End()
	return nil
}

// spillAnswer stores the payloads of an answer over max_response_size and
// sends the answer that carries their URLs instead.
func (l *ServiceLimits) spillAnswer(w http.ResponseWriter, r *http.Request, sb *limits.SpillBuffer) (err error) {
	_, span := spans.Start(r.Context(), "servicegate.spill.store")
	defer func() { endCheck(span, err) }()
	span.Int("servicegate.spill.answer_size", sb.Size())
	base := l.Spill.BaseURL
	if base == "" {
		base, err = l.origin(r)
	}
	var stored []string
	put := func(kind string, write func(io.Writer) error) (string, error) {
		f, name, err := l.store.Create(kind)
		if err != nil {
			return "", err
		}
		stored = append(stored, name)
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		return base + l.Spill.Path + name + "?" + l.store.Link(name), nil
	}
	var out bytes.Buffer
	if err == nil {
		err = contract.SpillAnswer(sb.Reader(), &out, put)
	}
	if err == nil && int64(out.Len()) > l.MaxResponseSize {
		err = errors.New("the answer is still too large without its strings, content and preview")
	}
	if err != nil {
		for _, name := range stored {
			l.store.Remove(name)
		}
		l.counts.inc(outcomeResponseTooLarge)
		l.logger.Info("app answer over the size limit could not be handed over by URL", zap.String("path", r.URL.Path), zap.Int64("size", sb.Size()), zap.Error(err))
		return refuse(w, r, http.StatusBadGateway, fmt.Sprintf(
			"The app's answer is too large: it is %s and the service accepts at most %s. Try a smaller file; if it keeps happening, contact the app's developer.",
			limits.SizeName(sb.Size()), limits.LimitName(l.MaxResponseSize)))
	}
	l.counts.inc(outcomeSpilled)
	span.Int("servicegate.spill.payloads", int64(len(stored)))
	l.logger.Debug("app answer handed over by URL", zap.String("path", r.URL.Path), zap.Int64("size", sb.Size()), zap.Int("payloads", len(stored)))
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	for k, v := range sb.Header() {
		h[k] = v
	}
	h.Del("Content-Encoding")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(out.Len()))
	span.End()
	w.WriteHeader(sb.Status())
	_, _ = w.Write(out.Bytes())
	return nil
}
