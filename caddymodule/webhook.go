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
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/servicegate/servicegate/limits"
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
	tooLarge string        // the 413 message, made once
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
	m.tooLarge = "The delivery is larger than the " + limits.Limit(m.MaxSize) + " this endpoint accepts."
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
		return m.refuse(w, r, outcomeMissingSignature, http.StatusUnauthorized, "The delivery is not signed: its X-Service-Signature header is missing.")
	case 1:
		var err error
		if mac, err = signature.Parse(sigs[0]); err != nil {
			if errors.Is(err, signature.ErrMissing) {
				return m.refuse(w, r, outcomeMissingSignature, http.StatusUnauthorized, "The delivery is not signed: its X-Service-Signature header is empty.")
			}
			return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "The X-Service-Signature of the delivery is not an HMAC-SHA256 in hex or base64.")
		}
	default:
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "The delivery carries more than one X-Service-Signature header.")
	}
	verifier, ok := m.verifierFor(r.Header)
	if !ok {
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, "The delivery names more than one organization (X-Service-Domain or X-Service-Id repeated).")
	}
	if verifier == nil {
		// No secret applies to this organization: nothing the body holds
		// could pass, so it is not read.
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, messageSignatureMismatch)
	}

	body := newDeliveryBody(r.ContentLength)
	n, err := body.readFrom(r.Body, m.MaxSize)
	if err != nil {
		body.release()
		if errors.Is(err, errDeliveryTooLarge) {
			return m.refuseTooLarge(w, r)
		}
		m.logger.Debug("webhook delivery could not be read", zap.Error(err))
		return m.refuse(w, r, outcomeUnreadable, http.StatusBadRequest, "The delivery could not be read in full. Send it again.")
	}
	raw := body.bytes()

	if verifier.VerifyMAC(raw, mac) != nil {
		body.release()
		return m.refuse(w, r, outcomeBadSignature, http.StatusUnauthorized, messageSignatureMismatch)
	}
	if len(m.ModuleKeys) > 0 {
		keys := r.Header[headerModuleKey]
		if len(keys) != 1 || !slices.Contains(m.ModuleKeys, keys[0]) {
			body.release()
			return m.refuse(w, r, outcomeForbidden, http.StatusForbidden, "This endpoint does not accept deliveries for that webhook module (X-Module-Key).")
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

// checkEvents checks the shape of the body and its events against the
// allow-list. It returns 0 when the delivery passes.
func (m *ServiceWebhook) checkEvents(raw []byte) (int, string) {
	allowed, err := scanEvents(raw, func(name []byte) bool {
		_, ok := m.events[string(name)]
		return ok
	})
	switch {
	case err != nil:
		return http.StatusBadRequest, `The delivery is not JSON with an "events" list of objects that each name their "event".`
	case !allowed:
		return http.StatusForbidden, "The delivery holds an event this endpoint does not accept."
	}
	return 0, ""
}

func (m *ServiceWebhook) refuseTooLarge(w http.ResponseWriter, r *http.Request) error {
	return m.refuse(w, r, outcomeTooLarge, http.StatusRequestEntityTooLarge, m.tooLarge)
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

// messageSignatureMismatch answers a delivery that no secret verifies.
const messageSignatureMismatch = "The signature of the delivery does not match its body."

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
	// declared is the Content-Length plus one, -1 when unknown.
	declared int64
}

// bufferPool holds delivery buffers of at most maxPooledBuffer bytes; the
// rare larger ones are left to the garbage collector.
var bufferPool = sync.Pool{New: func() any { return new([]byte) }}

const (
	maxPooledBuffer  = 1 << 20
	minBuffer        = 4 << 10
	maxUpfrontBuffer = 1 << 20
)

// newDeliveryBody returns a body with room for size bytes (plus one, to
// see the end without growing), or a pooled buffer when size is unknown.
// A declared size is trusted only up to maxUpfrontBuffer before any byte
// arrives: a client that announces 5 MiB and sends nothing holds no more
// than that. Once the client has filled that much, the buffer grows to the
// declared size in one step.
func newDeliveryBody(size int64) *deliveryBody {
	b := &deliveryBody{buf: bufferPool.Get().(*[]byte), declared: -1}
	if size >= 0 {
		b.declared = size + 1
		if want := min(size+1, maxUpfrontBuffer); int64(cap(*b.buf)) < want {
			*b.buf = make([]byte, 0, max(want, minBuffer))
		}
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
			size := max(2*int64(cap(buf)), minBuffer, b.declared)
			grown := make([]byte, len(buf), min(size, limit+1))
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

// The events check reads the delivery with a small scanner instead of
// encoding/json: it validates the whole body as JSON in one pass and
// yields the event names without allocating, which keeps the allow-list
// cheap on every delivery. Keys match exactly ("events", "event"), as the
// app behind will read them; a repeated "events" or "event" key is refused
// because the app's JSON library might read the other one.

// Reasons a body fails the events check.
var (
	errNotJSON      = errors.New("not JSON")
	errShape        = errors.New(`not {"events":[{"event":"…"},…]}`)
	errDuplicateKey = errors.New(`a repeated "events" or "event" key`)
	errTooDeep      = errors.New("nested too deeply")
)

// maxDeliveryDepth bounds the nesting the scanner follows, and with it
// the stack a hostile body can make it use.
const maxDeliveryDepth = 512

// scanEvents checks that body is JSON of the form
// {"events":[{"event":"<name>",…},…],…} with at least one event (else an
// error), and calls allow with each name until it returns false, which
// makes the result false. A name or key holding escapes is decoded, the
// only case that allocates; the body is checked to its end either way.
func scanEvents(body []byte, allow func(name []byte) bool) (allowed bool, err error) {
	s := jsonScanner{b: body}
	s.space()
	if !s.consume('{') {
		if s.value(0) != nil {
			return false, errNotJSON
		}
		return false, errShape
	}
	seen, count, stopped := false, 0, false
	err = s.members(0, func(key []byte) error {
		if string(key) != "events" {
			return s.value(1)
		}
		if seen {
			return errDuplicateKey
		}
		seen = true
		if !s.consume('[') {
			if err := s.value(1); err != nil {
				return err
			}
			return errShape
		}
		return s.elements(1, func() error {
			if !s.consume('{') {
				if err := s.value(2); err != nil {
					return err
				}
				return errShape
			}
			var name []byte
			hasName := false
			err := s.members(2, func(key []byte) error {
				if string(key) != "event" {
					return s.value(3)
				}
				if hasName {
					return errDuplicateKey
				}
				hasName = true
				if s.peek() != '"' {
					if err := s.value(3); err != nil {
						return err
					}
					return errShape
				}
				var err error
				name, err = s.string()
				return err
			})
			if err != nil {
				return err
			}
			if !hasName {
				return errShape
			}
			count++
			if !stopped && !allow(name) {
				stopped = true
			}
			return nil
		})
	})
	if err == nil {
		s.space()
		if s.i != len(s.b) {
			err = errNotJSON
		}
	}
	switch {
	case err != nil:
		return false, err
	case !seen || count == 0:
		return false, errShape
	case stopped:
		return false, nil
	}
	return true, nil
}

// jsonScanner walks JSON text (RFC 8259), checking it as it goes.
type jsonScanner struct {
	b []byte
	i int
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// consume skips space and c, reporting whether c was there.
func (s *jsonScanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// members reads the members of an object whose '{' was consumed, calling
// member with each key positioned before the value, which member must
// read.
func (s *jsonScanner) members(depth int, member func(key []byte) error) error {
	if depth > maxDeliveryDepth {
		return errTooDeep
	}
	if s.consume('}') {
		return nil
	}
	for {
		if s.peek() != '"' {
			return errNotJSON
		}
		key, err := s.string()
		if err != nil {
			return err
		}
		if !s.consume(':') {
			return errNotJSON
		}
		if err := member(key); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return nil
		}
		return errNotJSON
	}
}

// elements reads the elements of an array whose '[' was consumed, calling
// element positioned before each one, which element must read.
func (s *jsonScanner) elements(depth int, element func() error) error {
	if depth > maxDeliveryDepth {
		return errTooDeep
	}
	if s.consume(']') {
		return nil
	}
	for {
		if err := element(); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		if s.consume(']') {
			return nil
		}
		return errNotJSON
	}
}

// value reads any JSON value.
func (s *jsonScanner) value(depth int) error {
	switch c := s.peek(); {
	case c == '{':
		s.i++
		return s.members(depth+1, func([]byte) error { return s.value(depth + 1) })
	case c == '[':
		s.i++
		return s.elements(depth+1, func() error { return s.value(depth + 1) })
	case c == '"':
		_, err := s.string()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return errNotJSON
}

func (s *jsonScanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return errNotJSON
	}
	s.i += len(word)
	return nil
}

func (s *jsonScanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *jsonScanner) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return errNotJSON
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return errNotJSON
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return errNotJSON
		}
	}
	return nil
}

// string reads a string at s.i (an opening quote) and returns its
// contents: a slice of the body when it is plain UTF-8 without escapes,
// else decoded.
func (s *jsonScanner) string() ([]byte, error) {
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			if raw := s.b[start+1 : s.i-1]; !escaped && utf8.Valid(raw) {
				return raw, nil
			}
			// Escapes, or invalid UTF-8, which encoding/json and most
			// apps read as U+FFFD: decode as they do.
			var out string
			if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
				return nil, errNotJSON
			}
			return []byte(out), nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return nil, errNotJSON
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return nil, errNotJSON
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if hexValue(h) < 0 {
						return nil, errNotJSON
					}
				}
				s.i += 5
			default:
				return nil, errNotJSON
			}
		case c < 0x20:
			return nil, errNotJSON
		default:
			s.i++
		}
	}
	return nil, errNotJSON
}

func hexValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
