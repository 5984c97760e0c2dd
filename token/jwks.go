package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/singleflight"

	"github.com/servicegate/servicegate/spans"
)

// Defaults of JWKSOptions.
const (
	DefaultJWKSRefresh     = 10 * time.Minute
	DefaultJWKSMinInterval = 30 * time.Second
	jwksFetchTimeout       = 10 * time.Second
	jwksMaxBody            = 1 << 20
)

// JWKSOptions tune a JWKS.
type JWKSOptions struct {
	// Client fetches the key set; nil means a client with a 10 s timeout.
	Client *http.Client
	// Refresh is how often Run fetches the set; 0 means DefaultJWKSRefresh.
	Refresh time.Duration
	// MinInterval is the least time between two fetches caused by tokens
	// naming an unknown kid, so that tokens with random kids cannot flood
	// the key server; 0 means DefaultJWKSMinInterval.
	MinInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnError, when set, hears about failed fetches (the last good set
	// stays in use). Its errors hold the URL, without user info and query,
	// and the cause; never a key.
	OnError func(error)
}

// JWKS is a JSON Web Key Set fetched from a URL and kept fresh: on a
// schedule (Run), and when a token names a kid the set lacks, at most once
// per MinInterval. When a fetch fails the last good set stays in use. Only
// public signature keys are used (RSA, EC P-256/384/521, OKP Ed25519);
// symmetric keys and keys whose "use" is not "sig" are ignored. It
// implements Keys and Rotating and is safe for concurrent use.
type JWKS struct {
	url string
	// where names the set in errors: url without user info and query,
	// either of which may carry a credential.
	where string
	opts  JWKSOptions

	set atomic.Pointer[keySet]

	// fetching runs one fetch at a time; callers arriving while one runs
	// share its outcome.
	fetching singleflight.Group
	// mu guards lastAttempt and the replacement of set.
	mu          sync.Mutex
	lastAttempt time.Time
	fetches     atomic.Int64
}

// NewJWKS returns a key set for url. It fetches nothing until Run,
// Refresh or the first token asks for a key.
func NewJWKS(url string, opts JWKSOptions) *JWKS {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: jwksFetchTimeout}
	}
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultJWKSRefresh
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultJWKSMinInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &JWKS{url: url, where: redactURL(url), opts: opts}
}

// withoutURL returns the cause of a url.Error, which repeats the address
// with its query.
func withoutURL(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL returns raw without its user info and query.
func redactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// Algorithms lists every asymmetric algorithm; each key of the set narrows
// it to those that fit the key (and its "alg", when the key names one).
func (s *JWKS) Algorithms() []string { return publicAlgs }

// Fetches reports how many fetches of the set have been attempted.
func (s *JWKS) Fetches() int64 { return s.fetches.Load() }

// Key returns the key of the set for kid that verifies alg. A kid the set
// lacks causes a fetch, unless one happened less than MinInterval ago.
// A token without kid is tried against every key that fits alg.
func (s *JWKS) Key(ctx context.Context, alg, kid string) (any, error) {
	if set := s.set.Load(); set != nil {
		if k, err := set.find(alg, kid); !errors.Is(err, ErrUnknownKey) {
			return k, err
		}
	}
	s.refreshLimited(ctx)
	set := s.set.Load()
	if set == nil {
		return nil, ErrKeysUnavailable
	}
	return set.find(alg, kid)
}

// Run fetches the set at once and then every Refresh until ctx is done.
func (s *JWKS) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Refresh)
	defer t.Stop()
	for {
		_ = s.refresh(ctx, true) // failures go to OnError
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Start runs Run in a goroutine of its own until ctx is done; the channel
// returned is closed once Run has returned.
func (s *JWKS) Start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	return done
}

// Refresh fetches the set now (or waits for a fetch under way) and, when
// it holds at least one usable key, replaces the set in use.
func (s *JWKS) Refresh(ctx context.Context) error {
	return s.refresh(ctx, true)
}

// refreshLimited fetches the set unless the last attempt was less than
// MinInterval ago, or waits for a fetch under way.
func (s *JWKS) refreshLimited(ctx context.Context) {
	_ = s.refresh(ctx, false)
}

// refresh runs one fetch at a time: a caller arriving while one runs waits
// for it and shares its outcome. Unless forced, it fetches nothing when the
// last attempt was less than MinInterval ago. A forced caller that joined
// a call which fetched nothing for that reason tries again.
func (s *JWKS) refresh(ctx context.Context, force bool) error {
	for {
		ch := s.fetching.DoChan("", func() (any, error) { return s.fetchIfDue(ctx, force) })
		select {
		case r := <-ch:
			if fetched, _ := r.Val.(bool); fetched || !force {
				return r.Err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fetchIfDue fetches the set, unless not forced and the last attempt was
// less than MinInterval ago; it reports whether it fetched. Only one runs
// at a time (s.fetching).
func (s *JWKS) fetchIfDue(ctx context.Context, force bool) (bool, error) {
	now := s.opts.Now()
	s.mu.Lock()
	if !force && !s.lastAttempt.IsZero() && now.Sub(s.lastAttempt) < s.opts.MinInterval {
		s.mu.Unlock()
		return false, nil
	}
	s.lastAttempt = now
	s.mu.Unlock()

	fetchCtx := ctx
	if !force {
		// A fetch for an unknown kid serves every request waiting on it,
		// so the one that started it going away does not cancel it; the
		// fetch timeout bounds it.
		fetchCtx = context.WithoutCancel(ctx)
	}
	err := s.fetch(fetchCtx)
	if err != nil && s.opts.OnError != nil && ctx.Err() == nil {
		s.opts.OnError(err)
	}
	return true, err
}

func (s *JWKS) fetch(ctx context.Context) (err error) {
	s.fetches.Add(1)
	// A fetch for a request's token shows in the request's trace; the
	// scheduled ones belong to no request.
	ctx, span := spans.Start(ctx, "servicegate.jwks.fetch")
	defer func() {
		if err != nil {
			span.Fail(err.Error()) // names the set without user info or query
		}
		span.End()
	}()
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", s.where, withoutURL(err))
	}
	req.Header.Set("Accept", "application/json")
	spans.Inject(ctx, req.Header)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", s.where, withoutURL(err))
	}
	defer resp.Body.Close()
	span.Int("http.response.status_code", int64(resp.StatusCode))
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, jwksMaxBody))
		return fmt.Errorf("JWKS %s: status %d", s.where, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBody+1))
	if err != nil {
		return fmt.Errorf("JWKS %s: reading: %w", s.where, err)
	}
	if len(body) > jwksMaxBody {
		return fmt.Errorf("JWKS %s: larger than %d bytes", s.where, jwksMaxBody)
	}
	set, err := parseKeySet(body)
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", s.where, err)
	}
	s.install(set)
	return nil
}

// install puts set in use. It keeps the generation of the set it replaces
// when it holds every key of that set unchanged (the same set fetched
// again, or keys only added), so that remembered tokens stay valid; any key
// withdrawn or changed starts a new generation.
func (s *JWKS) install(set *keySet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.set.Load()
	switch {
	case old == nil:
		set.gen = 1
	case set.holdsAllOf(old):
		set.gen = old.gen
	default:
		set.gen = old.gen + 1
	}
	s.set.Store(set)
}

// Generation is the generation of the set in use (0 before the first
// good fetch). It changes when a fetched set lacks or changes a key of the
// set before; see Rotating.
func (s *JWKS) Generation() uint64 {
	if set := s.set.Load(); set != nil {
		return set.gen
	}
	return 0
}

// keySet is one fetched set: keys by kid ("" for keys without one).
type keySet struct {
	byKid map[string][]jwk
	all   []jwk
	gen   uint64 // see JWKS.Generation
}

// holdsAllOf reports whether set has every key of old, with the same kid,
// key and algorithms.
func (set *keySet) holdsAllOf(old *keySet) bool {
	for _, o := range old.all {
		if !slices.ContainsFunc(set.byKid[o.kid], o.same) {
			return false
		}
	}
	return true
}

// same reports whether k and o are the same key for the same algorithms.
func (k jwk) same(o jwk) bool {
	eq, ok := k.key.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(o.key) && k.kid == o.kid && slices.Equal(k.algs, o.algs)
}

type jwk struct {
	kid  string
	key  crypto.PublicKey
	algs []string
}

func (set *keySet) find(alg, kid string) (any, error) {
	if kid == "" {
		var fit []jwt.VerificationKey
		for _, k := range set.all {
			if slices.Contains(k.algs, alg) {
				fit = append(fit, k.key)
			}
		}
		switch len(fit) {
		case 0:
			return nil, ErrUnknownKey
		case 1:
			return fit[0], nil
		}
		return jwt.VerificationKeySet{Keys: fit}, nil
	}
	keys, ok := set.byKid[kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	for _, k := range keys {
		if slices.Contains(k.algs, alg) {
			return k.key, nil
		}
	}
	// The kid is known and its key does not do alg: refusing here, not
	// refetching, stops a confusion attempt from costing a fetch.
	return nil, ErrAlgorithm
}

type rawJWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseKeySet reads a JWK Set document, keeping the usable keys. A set
// without any usable key is an error, so it never replaces a good one.
func parseKeySet(body []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not a JWK set: %w", err)
	}
	set := &keySet{byKid: make(map[string][]jwk)}
	for _, raw := range doc.Keys {
		var r rawJWK
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		k, ok := parseJWK(r)
		if !ok {
			continue
		}
		set.all = append(set.all, k)
		set.byKid[k.kid] = append(set.byKid[k.kid], k)
	}
	if len(set.all) == 0 {
		return nil, errors.New("no usable signature key in the set")
	}
	return set, nil
}

// parseJWK turns one JWK into a verification key, or reports it unusable.
func parseJWK(r rawJWK) (jwk, bool) {
	if r.Use != "" && r.Use != "sig" {
		return jwk{}, false
	}
	var pub crypto.PublicKey
	switch r.Kty {
	case "RSA":
		n, err1 := b64(r.N)
		e, err2 := b64(r.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return jwk{}, false
		}
		exp := 0
		for _, b := range e {
			exp = exp<<8 | int(b)
		}
		if exp < 3 || exp%2 == 0 {
			return jwk{}, false
		}
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	case "EC":
		var curve elliptic.Curve
		switch r.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return jwk{}, false
		}
		size := (curve.Params().BitSize + 7) / 8
		x, err1 := b64(r.X)
		y, err2 := b64(r.Y)
		if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
			return jwk{}, false
		}
		point := append(append([]byte{4}, x...), y...)
		k, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return jwk{}, false
		}
		pub = k
	case "OKP":
		x, err := b64(r.X)
		if r.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return jwk{}, false
		}
		pub = ed25519.PublicKey(x)
	default:
		return jwk{}, false
	}
	algs, err := algorithmsFor(pub)
	if err != nil {
		return jwk{}, false
	}
	if r.Alg != "" {
		if !slices.Contains(algs, r.Alg) {
			return jwk{}, false
		}
		algs = []string{r.Alg}
	}
	return jwk{kid: r.Kid, key: pub, algs: algs}, true
}

func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
