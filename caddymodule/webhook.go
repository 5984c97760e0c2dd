package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/signature"
)

// defaultWebhookMaxSize is the 5 MB limit of the service's app endpoints,
// read as 5 MiB.
const defaultWebhookMaxSize = 5 << 20

// defaultSecretsPoll is how often the secrets file is checked for changes.
const defaultSecretsPoll = 2 * time.Second

// The headers of a delivery, in canonical form so that they are looked up
// in the header map directly.
const (
	headerSignature = "X-Service-Signature"
	headerDomain    = "X-Service-Domain"
	headerOrgID     = "X-Service-Id"
	headerModuleKey = "X-Module-Key"
)

// ServiceWebhook verifies the service's webhook deliveries before the app
// sees them: the X-Service-Signature header must be the HMAC-SHA256 of the
// raw body under one of the app secrets. It reads the whole body (up to
// max_size), checks the signature, then the module key and the events,
// and passes the very same bytes and headers on. A refused delivery never
// reaches the app.
//
// Order of checks: size (413), signature (401), module key (403), body
// shape (400) and events (403). The signature comes before the
// allow-lists, so a caller without a secret learns nothing about them.
type ServiceWebhook struct {
	// Secrets are the app secrets the service signs deliveries with; a
	// delivery signed with any one of them passes, so a secret is rotated
	// by listing the new one next to the old one for a while. Each may be
	// an {env.*} or {file.*} placeholder, resolved when the config loads.
	// Used for organizations that are not in secrets_file.
	Secrets []string `json:"secrets,omitempty"`

	// SecretsFile is a JSON file of per-organization secrets:
	// {"<organization domain or id>": "secret" | ["secret1", "secret2"]}.
	// The organization is named by X-Service-Domain when the delivery has
	// it, else by X-Service-Id. An organization listed here is checked
	// against its own secrets only; one that is not falls back to Secrets.
	// The file is re-read when its modification time or size changes; a
	// file that fails to parse is logged and the last good one is kept.
	SecretsFile string `json:"secrets_file,omitempty"`

	// SecretsPoll is how often SecretsFile is checked for changes.
	// Default: 2s.
	SecretsPoll caddy.Duration `json:"secrets_poll,omitempty"`

	// ModuleKeys, when set, are the webhook module keys allowed in
	// X-Module-Key; a delivery with another key, none, or several is
	// refused with 403.
	ModuleKeys []string `json:"module_keys,omitempty"`

	// Events, when set, is the allow-list of event names: the body must
	// be JSON of the form {"events":[{"event":"…",…},…]} (else 400) and
	// every event must be listed here (else 403).
	Events []string `json:"events,omitempty"`

	// MaxSize is the largest body accepted, in bytes; a larger one is
	// refused with 413, from Content-Length before reading when there is
	// one. Default: 5 MiB (5242880).
	MaxSize int64 `json:"max_size,omitempty"`

	appWide  *signature.Verifier // nil without Secrets
	orgs     *secretsFile        // nil without SecretsFile
	events   map[string]struct{}
	outcomes webhookOutcomes
	logger   *zap.Logger
	stop     context.CancelFunc
	watching chan struct{} // closed when the watching goroutine ends
}

// CaddyModule returns the Caddy module information.
func (ServiceWebhook) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.service_webhook",
		New: func() caddy.Module { return new(ServiceWebhook) },
	}
}

// Provision resolves the secrets, loads the secrets file and starts
// watching it.
func (m *ServiceWebhook) Provision(ctx caddy.Context) error {
	m.logger = ctx.Logger()
	m.outcomes = newWebhookOutcomes(ctx.GetMetricsRegistry())
	if m.MaxSize == 0 {
		m.MaxSize = defaultWebhookMaxSize
	}
	repl := caddy.NewReplacer()
	if len(m.Secrets) > 0 {
		secrets := make([]string, len(m.Secrets))
		for i, s := range m.Secrets {
			if secrets[i] = repl.ReplaceKnown(s, ""); secrets[i] == "" {
				return fmt.Errorf("service_webhook: secret %d of %d is empty once placeholders are replaced (is its environment variable or file set?)", i+1, len(m.Secrets))
			}
		}
		v, err := signature.NewVerifier(secrets...)
		if err != nil {
			return fmt.Errorf("service_webhook: %w", err)
		}
		m.appWide = v
	}
	if len(m.Events) > 0 {
		m.events = make(map[string]struct{}, len(m.Events))
		for _, e := range m.Events {
			m.events[e] = struct{}{}
		}
	}
	if m.SecretsFile != "" {
		every := time.Duration(m.SecretsPoll)
		if every <= 0 {
			every = defaultSecretsPoll
		}
		m.orgs = &secretsFile{path: repl.ReplaceKnown(m.SecretsFile, ""), logger: m.logger}
		if err := m.orgs.load(); err != nil {
			return fmt.Errorf("service_webhook: %w", err)
		}
		watchCtx, cancel := context.WithCancel(ctx)
		m.stop = cancel
		m.watching = make(chan struct{})
		go func() {
			defer close(m.watching)
			m.orgs.watch(watchCtx, every)
		}()
	}
	return nil
}

// Validate checks that a delivery can pass at all.
func (m *ServiceWebhook) Validate() error {
	if len(m.Secrets) == 0 && m.SecretsFile == "" {
		return errors.New("service_webhook: needs at least one secret or a secrets_file")
	}
	if m.MaxSize < 0 {
		return errors.New("service_webhook: max_size must be positive")
	}
	if slices.Contains(m.ModuleKeys, "") {
		return errors.New("service_webhook: a module key is empty")
	}
	if slices.Contains(m.Events, "") {
		return errors.New("service_webhook: an event name is empty")
	}
	return nil
}

// Cleanup stops watching the secrets file.
func (m *ServiceWebhook) Cleanup() error {
	if m.stop != nil {
		m.stop()
		<-m.watching
	}
	return nil
}

// ServeHTTP checks a delivery and passes it on, or refuses it.
func (m *ServiceWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.ContentLength > m.MaxSize {
		return m.refuseTooLarge(w, r)
	}

	// The header is checked before the body is read: a delivery without
	// a usable signature is refused without reading it.
	var mac []byte
	switch sigs := r.Header[headerSignature]; len(sigs) {
	case 0:
		return m.refuse(w, r, outcomeMissingSignature, http.StatusUnauthorized, "the delivery is not signed: X-Service-Signature is missing")
	case 1:
		var err error
		if mac, err = signature.Parse(sigs[0]); err != nil {
			if errors.Is(err, signature.ErrMissing) {
				return m.refuse(w, r, outcomeMissingSignature, http.StatusUnauthorized, "the delivery is not signed: X-Service-Signature is empty")
			}
			return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "X-Service-Signature is not an HMAC-SHA256 in hex or base64")
		}
	default:
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "the delivery carries more than one X-Service-Signature")
	}
	verifier, ok := m.verifierFor(r.Header)
	if !ok {
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "the delivery names more than one organization")
	}

	body := newDeliveryBody(r.ContentLength)
	n, err := body.readFrom(r.Body, m.MaxSize)
	if err != nil {
		body.release()
		if errors.Is(err, errDeliveryTooLarge) {
			return m.refuseTooLarge(w, r)
		}
		m.logger.Debug("webhook delivery could not be read", zap.Error(err))
		return m.refuse(w, r, outcomeUnreadable, http.StatusBadRequest, "the delivery could not be read in full")
	}
	raw := body.bytes()

	if verifier == nil || verifier.VerifyMAC(raw, mac) != nil {
		body.release()
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "the signature of the delivery does not match")
	}
	if len(m.ModuleKeys) > 0 {
		keys := r.Header[headerModuleKey]
		if len(keys) != 1 || !slices.Contains(m.ModuleKeys, keys[0]) {
			body.release()
			return m.refuse(w, r, outcomeForbidden, http.StatusForbidden, "this endpoint does not accept deliveries for that webhook module (X-Module-Key)")
		}
	}
	if m.events != nil {
		status, msg := m.checkEvents(raw)
		if status != 0 {
			body.release()
			outcome := outcomeForbidden
			if status == http.StatusBadRequest {
				outcome = outcomeBadBody
			}
			return m.refuse(w, r, outcome, status, msg)
		}
	}

	m.outcomes.inc(outcomeAccepted)
	if n == 0 {
		body.release()
		r.Body = http.NoBody
	} else {
		r.Body = body
		defer body.served()
	}
	r.ContentLength = n
	r.TransferEncoding = nil
	return next.ServeHTTP(w, r)
}

// verifierFor returns the verifier for the organization a delivery names:
// by X-Service-Domain when present, else by X-Service-Id; the app-wide
// secrets when the organization is not in the secrets file. It reports
// false when either header is repeated, since then it is not clear which
// organization signed. The verifier is nil when no secret applies.
func (m *ServiceWebhook) verifierFor(h http.Header) (*signature.Verifier, bool) {
	domains, ids := h[headerDomain], h[headerOrgID]
	if len(domains) > 1 || len(ids) > 1 {
		return nil, false
	}
	if m.orgs != nil {
		org := ""
		if len(domains) == 1 && domains[0] != "" {
			org = domains[0]
		} else if len(ids) == 1 {
			org = ids[0]
		}
		if v := m.orgs.lookup(org); v != nil {
			return v, true
		}
	}
	return m.appWide, true
}

// deliveryEvents is the part of a delivery the events allow-list needs.
type deliveryEvents struct {
	Events []struct {
		Event *string `json:"event"`
	} `json:"events"`
}

// checkEvents checks the shape of the body and its events against the
// allow-list. It returns 0 when the delivery passes.
func (m *ServiceWebhook) checkEvents(raw []byte) (int, string) {
	const shape = `the delivery is not JSON with an "events" list of objects that each name their "event"`
	var d deliveryEvents
	if err := json.Unmarshal(raw, &d); err != nil || len(d.Events) == 0 {
		return http.StatusBadRequest, shape
	}
	for _, e := range d.Events {
		if e.Event == nil {
			return http.StatusBadRequest, shape
		}
	}
	for _, e := range d.Events {
		if _, ok := m.events[*e.Event]; !ok {
			return http.StatusForbidden, "the delivery holds an event this endpoint does not accept"
		}
	}
	return 0, ""
}

func (m *ServiceWebhook) refuseTooLarge(w http.ResponseWriter, r *http.Request) error {
	return m.refuse(w, r, outcomeTooLarge, http.StatusRequestEntityTooLarge,
		"the delivery is larger than the "+humanize.IBytes(uint64(m.MaxSize))+" this endpoint accepts")
}

// refuse counts and answers a refused delivery. Only the outcome and
// status are logged: never a header value or the body.
func (m *ServiceWebhook) refuse(w http.ResponseWriter, r *http.Request, outcome webhookOutcome, status int, message string) error {
	m.outcomes.inc(outcome)
	if ce := m.logger.Check(zap.DebugLevel, "webhook delivery refused"); ce != nil {
		ce.Write(zap.String("outcome", outcome.String()), zap.Int("status", status))
	}
	return refuse(w, r, status, message)
}

// errDeliveryTooLarge stops reading a body once it passes max_size.
var errDeliveryTooLarge = errors.New("delivery larger than max_size")

// deliveryBody holds one delivery in memory and hands it to the app as the
// request body. Its buffer comes from a pool and goes back only once both
// the handler chain has returned and the body has been closed (the proxy's
// transport may still be sending it after the response came back). A
// deliveryBody is never reused, so a late call on an old one cannot touch
// a newer delivery.
type deliveryBody struct {
	mu     sync.Mutex
	buf    *[]byte
	r      bytes.Reader
	closed bool
	done   bool
}

// bufferPool holds delivery buffers of at most maxPooledBuffer bytes; the
// rare larger ones are left to the garbage collector.
var bufferPool = sync.Pool{New: func() any { return new([]byte) }}

const (
	maxPooledBuffer = 1 << 20
	minBuffer       = 4 << 10
)

// newDeliveryBody returns a body with room for size bytes (plus one, to
// see the end without growing), or a pooled buffer when size is unknown.
func newDeliveryBody(size int64) *deliveryBody {
	b := &deliveryBody{buf: bufferPool.Get().(*[]byte)}
	if want := size + 1; size >= 0 && int64(cap(*b.buf)) < want {
		*b.buf = make([]byte, 0, max(want, minBuffer))
	}
	*b.buf = (*b.buf)[:0]
	return b
}

// readFrom reads all of src into the buffer, stopping with
// errDeliveryTooLarge after limit bytes.
func (b *deliveryBody) readFrom(src io.Reader, limit int64) (int64, error) {
	if src == nil {
		return 0, nil
	}
	buf := *b.buf
	defer func() { *b.buf = buf }()
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*int64(cap(buf)), minBuffer), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return 0, errDeliveryTooLarge
		}
		if err == io.EOF {
			b.r.Reset(buf)
			return int64(len(buf)), nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return 0, errDeliveryTooLarge
			}
			return 0, err
		}
	}
}

// bytes returns the delivery as read.
func (b *deliveryBody) bytes() []byte { return *b.buf }

// Read reads the delivery.
func (b *deliveryBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.Read(p)
}

// WriteTo writes the rest of the delivery to w without an extra buffer.
func (b *deliveryBody) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.r.WriteTo(w)
}

// Close ends reading; the buffer is pooled again if the handler is done.
func (b *deliveryBody) Close() error {
	b.mu.Lock()
	release := !b.closed && b.done
	b.closed = true
	if release {
		b.r.Reset(nil)
	}
	b.mu.Unlock()
	if release {
		b.release()
	}
	return nil
}

// served records that the handler chain returned; the buffer is pooled
// again if the body was closed.
func (b *deliveryBody) served() {
	b.mu.Lock()
	release := b.closed && !b.done
	b.done = true
	b.mu.Unlock()
	if release {
		b.release()
	}
}

// release returns the buffer to the pool. It is called once, when nothing
// can read the buffer any more.
func (b *deliveryBody) release() {
	buf := b.buf
	b.buf = nil
	if buf == nil || cap(*buf) > maxPooledBuffer {
		return
	}
	*buf = (*buf)[:0]
	bufferPool.Put(buf)
}

// secretsFile is the per-organization secrets file and its last good
// contents.
type secretsFile struct {
	path    string
	logger  *zap.Logger
	current atomic.Pointer[map[string]*signature.Verifier]

	// Only the watching goroutine touches these after load.
	modTime time.Time
	size    int64
	missing bool
}

// lookup returns the verifier of org, or nil when the file does not list it.
func (f *secretsFile) lookup(org string) *signature.Verifier {
	if org == "" {
		return nil
	}
	return (*f.current.Load())[org]
}

// load reads and parses the file, keeping its contents only when they
// parse.
func (f *secretsFile) load() error {
	info, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("secrets_file: %w", err)
	}
	f.modTime, f.size = info.ModTime(), info.Size()
	data, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("secrets_file: %w", err)
	}
	orgs, err := parseSecretsFile(data)
	if err != nil {
		return fmt.Errorf("secrets_file %s: %w", f.path, err)
	}
	f.current.Store(&orgs)
	return nil
}

// watch reloads the file whenever its modification time or size changes,
// until ctx ends.
func (f *secretsFile) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.reloadIfChanged()
		}
	}
}

func (f *secretsFile) reloadIfChanged() {
	info, err := os.Stat(f.path)
	if err != nil {
		if !f.missing {
			f.logger.Error("webhook secrets file unreadable; keeping the last good secrets", zap.Error(err))
			f.missing = true
		}
		return
	}
	f.missing = false
	if info.ModTime().Equal(f.modTime) && info.Size() == f.size {
		return
	}
	// load records the new time and size even when the contents do not
	// parse, so a broken file is logged once, not on every tick.
	if err := f.load(); err != nil {
		f.logger.Error("webhook secrets file not reloaded; keeping the last good secrets", zap.Error(err))
		return
	}
	f.logger.Info("webhook secrets file reloaded", zap.String("path", f.path), zap.Int("organizations", len(*f.current.Load())))
}

// parseSecretsFile parses {"<organization>": "secret" | ["s1", "s2"], …}.
// Its errors name organizations and positions, never a secret: the JSON
// decoder's own messages can quote the input, so they are not passed on.
func parseSecretsFile(data []byte) (map[string]*signature.Verifier, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("not valid JSON (at byte %d)", syn.Offset)
		}
		return nil, errors.New(`want a JSON object {"<organization>": "secret" or ["secret", …]}`)
	}
	if raw == nil {
		return nil, errors.New(`want a JSON object {"<organization>": "secret" or ["secret", …]}`)
	}
	orgs := make(map[string]*signature.Verifier, len(raw))
	for org, value := range raw {
		if org == "" {
			return nil, errors.New("an organization name is empty")
		}
		var secrets []string
		var one string
		if err := json.Unmarshal(value, &one); err == nil {
			secrets = []string{one}
		} else if err := json.Unmarshal(value, &secrets); err != nil || len(secrets) == 0 {
			return nil, fmt.Errorf("organization %q: want a secret or a non-empty list of secrets", org)
		}
		v, err := signature.NewVerifier(secrets...)
		if err != nil {
			return nil, fmt.Errorf("organization %q: %w", org, err)
		}
		orgs[org] = v
	}
	return orgs, nil
}

var (
	_ caddy.Provisioner           = (*ServiceWebhook)(nil)
	_ caddy.Validator             = (*ServiceWebhook)(nil)
	_ caddy.CleanerUpper          = (*ServiceWebhook)(nil)
	_ caddyhttp.MiddlewareHandler = (*ServiceWebhook)(nil)
	_ caddyfile.Unmarshaler       = (*ServiceWebhook)(nil)
)
