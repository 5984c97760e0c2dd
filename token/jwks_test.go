package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwkOf renders pub as a JWK with kid.
func jwkOf(t testing.TB, kid string, pub crypto.PublicKey) map[string]any {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		size := (len(b) - 1) / 2
		return map[string]any{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": enc(b[1 : 1+size]), "y": enc(b[1+size:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": enc(k)}
	}
	t.Fatalf("no JWK for %T", pub)
	return nil
}

// keyServer is an httptest JWKS endpoint whose answer tests can change.
type keyServer struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	body   []byte
	hits   atomic.Int64
}

func newKeyServer(t *testing.T) *keyServer {
	ks := &keyServer{status: http.StatusOK}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.hits.Add(1)
		ks.mu.Lock()
		status, body := ks.status, ks.body
		ks.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) serve(t *testing.T, status int, keys ...map[string]any) {
	body, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	ks.mu.Lock()
	ks.status, ks.body = status, body
	ks.mu.Unlock()
}

func (ks *keyServer) serveRaw(status int, body string) {
	ks.mu.Lock()
	ks.status, ks.body = status, []byte(body)
	ks.mu.Unlock()
}

func signKid(t testing.TB, m jwt.SigningMethod, key any, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, baseClaims())
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clock is a settable clock shared by the JWKS and the verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestJWKSRotationUnknownKidAndFailures(t *testing.T) {
	kk := testKinds(t)
	rsaK, ecK, edK := kk[1], kk[2], kk[3]
	ks := newKeyServer(t)
	ks.serve(t, http.StatusOK, jwkOf(t, "k1", rsaK.pub), jwkOf(t, "k2", ecK.pub), jwkOf(t, "k3", edK.pub),
		map[string]any{"kty": "oct", "kid": "sym", "k": "c2VjcmV0"}) // ignored: symmetric
	clk := &clock{t: testNow}
	var errs atomic.Int64
	set := NewJWKS(ks.URL, JWKSOptions{Now: clk.now, MinInterval: 30 * time.Second, OnError: func(error) { errs.Add(1) }})
	v := NewVerifier(set, Options{Now: clk.now})
	ctx := context.Background()

	verify := func(tok string, want error) {
		t.Helper()
		if _, err := v.Verify(ctx, tok); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("Verify = %v, want %v", err, want)
		}
	}
	verify(signKid(t, rsaK.method, rsaK.sign, "k1"), nil)
	verify(signKid(t, ecK.method, ecK.sign, "k2"), nil)
	verify(signKid(t, edK.method, edK.sign, "k3"), nil)
	verify(signKid(t, jwt.SigningMethodPS384, rsaK.sign, "k1"), nil)
	if n := ks.hits.Load(); n != 1 {
		t.Fatalf("%d fetches for known keys, want 1", n)
	}

	// Confusion and misuse are refused without a fetch.
	verify(signKid(t, jwt.SigningMethodHS256, pemOf(t, rsaK.pub), "k1"), ErrAlgorithm)
	verify(signKid(t, jwt.SigningMethodHS256, []byte("c2VjcmV0"), "sym"), ErrAlgorithm)
	other := testKinds(t)[2].other
	verify(signKid(t, jwt.SigningMethodES256, other, "k1"), ErrAlgorithm) // k1 is RSA
	verify(signKid(t, rsaK.method, rsaK.other, "k1"), ErrSignature)
	if n := ks.hits.Load(); n != 1 {
		t.Fatalf("%d fetches after refused tokens, want 1", n)
	}

	// Rotation: a new kid appears; after MinInterval the unknown kid
	// causes one fetch and verifies.
	newKey := testKinds(t)[1].other.(*rsa.PrivateKey)
	ks.serve(t, http.StatusOK, jwkOf(t, "k1", rsaK.pub), jwkOf(t, "k4", &newKey.PublicKey))
	clk.add(31 * time.Second)
	verify(signKid(t, jwt.SigningMethodRS256, newKey, "k4"), nil)
	if n := ks.hits.Load(); n != 2 {
		t.Fatalf("%d fetches after rotation, want 2", n)
	}
	verify(signKid(t, ecK.method, ecK.sign, "k2"), ErrUnknownKey) // rotated out, within MinInterval

	// A flood of random kids makes no fetch within MinInterval ...
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := v.Verify(ctx, signKid(t, rsaK.method, rsaK.sign, fmt.Sprintf("random-%d", i)))
			if !errors.Is(err, ErrUnknownKey) {
				t.Errorf("random kid: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := ks.hits.Load(); n != 2 {
		t.Fatalf("%d fetches after a flood within MinInterval, want 2", n)
	}
	// ... and exactly one once MinInterval has passed.
	clk.add(31 * time.Second)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = v.Verify(ctx, signKid(t, rsaK.method, rsaK.sign, fmt.Sprintf("again-%d", i)))
		}()
	}
	wg.Wait()
	if n := ks.hits.Load(); n != 3 {
		t.Fatalf("%d fetches after a flood past MinInterval, want 3", n)
	}

	// Failing refreshes keep the last good set.
	for _, bad := range []struct {
		status int
		body   string
	}{
		{http.StatusInternalServerError, `{"keys":[]}`},
		{http.StatusOK, `not json`},
		{http.StatusOK, `{"keys":[]}`},
		{http.StatusOK, `{"keys":[{"kty":"RSA","kid":"k9","n":"AQAB","e":"AQAB"}]}`}, // too short to use
	} {
		ks.serveRaw(bad.status, bad.body)
		if err := set.Refresh(ctx); err == nil {
			t.Fatalf("Refresh accepted status %d body %q", bad.status, bad.body)
		}
		verify(signKid(t, jwt.SigningMethodRS256, newKey, "k4"), nil)
	}
	clk.add(31 * time.Second)
	before := errs.Load()
	verify(signKid(t, rsaK.method, rsaK.sign, "k-unknown"), ErrUnknownKey)
	if errs.Load() != before+1 {
		t.Fatal("a failed fetch was not reported to OnError")
	}
	verify(signKid(t, rsaK.method, rsaK.sign, "k1"), nil)
}

func TestJWKSWithoutKid(t *testing.T) {
	kk := testKinds(t)
	ks := newKeyServer(t)
	ks.serve(t, http.StatusOK, jwkOf(t, "", kk[1].pub), jwkOf(t, "", &kk[1].other.(*rsa.PrivateKey).PublicKey))
	v := NewVerifier(NewJWKS(ks.URL, JWKSOptions{}), Options{Now: fixedNow})
	for _, key := range []any{kk[1].sign, kk[1].other} {
		if _, err := v.Verify(context.Background(), signKid(t, jwt.SigningMethodRS256, key, "")); err != nil {
			t.Fatalf("token without kid: %v", err)
		}
	}
	if _, err := v.Verify(context.Background(), signKid(t, jwt.SigningMethodES256, kk[2].sign, "")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("ES256 token without a fitting key: %v", err)
	}
}

func TestJWKSUnavailable(t *testing.T) {
	ks := newKeyServer(t)
	ks.serveRaw(http.StatusServiceUnavailable, "")
	k := testKinds(t)[1]
	v := NewVerifier(NewJWKS(ks.URL, JWKSOptions{}), Options{Now: fixedNow})
	if _, err := v.Verify(context.Background(), signKid(t, k.method, k.sign, "k1")); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("Verify = %v, want ErrKeysUnavailable", err)
	}
}

func TestJWKSErrorsHoldNoCredentialOfTheURL(t *testing.T) {
	ks := newKeyServer(t)
	ks.serveRaw(http.StatusServiceUnavailable, "")
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{ks.URL, closed.URL} {
		u := strings.Replace(base, "http://", "http://user:pw-secret@", 1) + "/keys?key=q-secret"
		var got []error
		set := NewJWKS(u, JWKSOptions{OnError: func(err error) { got = append(got, err) }})
		if err := set.Refresh(context.Background()); err == nil {
			t.Fatalf("%s: no error", base)
		}
		if len(got) != 1 {
			t.Fatalf("%s: OnError heard %d errors, want 1", base, len(got))
		}
		msg := got[0].Error()
		if strings.Contains(msg, "pw-secret") || strings.Contains(msg, "q-secret") || !strings.Contains(msg, "/keys") {
			t.Errorf("error %q: want the address without its user info and query", msg)
		}
	}
}

func TestJWKSRunStopsWithContext(t *testing.T) {
	ks := newKeyServer(t)
	ks.serve(t, http.StatusOK, jwkOf(t, "k1", testKinds(t)[1].pub))
	set := NewJWKS(ks.URL, JWKSOptions{Refresh: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { set.Run(ctx); close(done) }()
	for set.set.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if set.Fetches() != 1 {
		t.Fatalf("%d fetches, want 1 (the one at start)", set.Fetches())
	}
}

func TestJWKAlgAndUse(t *testing.T) {
	pub := testKinds(t)[1].pub
	withAlg := jwkOf(t, "a", pub)
	withAlg["alg"] = "PS256"
	enc := jwkOf(t, "e", pub)
	enc["use"] = "enc"
	badAlg := jwkOf(t, "b", pub)
	badAlg["alg"] = "ES256"
	body, _ := json.Marshal(map[string]any{"keys": []any{withAlg, enc, badAlg}})
	set, err := parseKeySet(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.all) != 1 {
		t.Fatalf("%d usable keys, want 1", len(set.all))
	}
	if _, err := set.find("RS256", "a"); !errors.Is(err, ErrAlgorithm) {
		t.Fatalf("RS256 with a PS256 key: %v", err)
	}
	if _, err := set.find("PS256", "a"); err != nil {
		t.Fatal(err)
	}
}

func TestJWKSRequestsWaitForTheFetchUnderWay(t *testing.T) {
	k := testKinds(t)[1]
	body, _ := json.Marshal(map[string]any{"keys": []any{jwkOf(t, "k1", k.pub)}})
	started, release := make(chan struct{}), make(chan struct{})
	var hits atomic.Int64
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			close(started)
			<-release
		}
		_, _ = w.Write(body)
	}))
	defer ks.Close()
	set := NewJWKS(ks.URL, JWKSOptions{Refresh: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go set.Run(ctx)
	<-started // the first fetch is under way
	v := NewVerifier(set, Options{Now: fixedNow})
	errc := make(chan error, 5)
	for range 5 {
		go func() {
			_, err := v.Verify(context.Background(), signKid(t, k.method, k.sign, "k1"))
			errc <- err
		}()
	}
	// Give the requests time to reach the wait; the assertions hold
	// whichever comes first, so this is no timing test.
	time.Sleep(50 * time.Millisecond)
	close(release)
	for range 5 {
		if err := <-errc; err != nil {
			t.Fatalf("a request during the first fetch: %v", err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestJWKSGenerationChangesWhenAKeyIsWithdrawnOrChanged(t *testing.T) {
	kk := testKinds(t)
	rsaK, ecK := kk[1], kk[2]
	otherRSA := &rsaK.other.(*rsa.PrivateKey).PublicKey
	ks := newKeyServer(t)
	set := NewJWKS(ks.URL, JWKSOptions{})
	v := NewVerifier(set, Options{Now: fixedNow})
	ctx := context.Background()
	if g := v.Generation(); g != 0 {
		t.Fatalf("generation %d before any fetch, want 0", g)
	}
	steps := []struct {
		name string
		keys []map[string]any
		same bool // the generation stays as it was
	}{
		{"first set", []map[string]any{jwkOf(t, "k1", rsaK.pub)}, false},
		{"the same set again", []map[string]any{jwkOf(t, "k1", rsaK.pub)}, true},
		{"a key added", []map[string]any{jwkOf(t, "k1", rsaK.pub), jwkOf(t, "k2", ecK.pub)}, true},
		{"a key withdrawn", []map[string]any{jwkOf(t, "k2", ecK.pub)}, false},
		{"a kid given another key", []map[string]any{jwkOf(t, "k2", otherRSA)}, false},
		{"a key narrowed to one algorithm", []map[string]any{func() map[string]any {
			j := jwkOf(t, "k2", otherRSA)
			j["alg"] = "PS256"
			return j
		}()}, false},
	}
	prev := v.Generation()
	for _, st := range steps {
		ks.serve(t, http.StatusOK, st.keys...)
		if err := set.Refresh(ctx); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		g := v.Generation()
		if (g == prev) != st.same {
			t.Fatalf("%s: generation %d after %d; want it kept: %v", st.name, g, prev, st.same)
		}
		prev = g
	}
	// A failed fetch keeps the set, and so its generation.
	ks.serveRaw(http.StatusInternalServerError, "")
	if err := set.Refresh(ctx); err == nil {
		t.Fatal("Refresh accepted status 500")
	}
	if g := v.Generation(); g != prev {
		t.Fatalf("generation %d after a failed fetch, want %d", g, prev)
	}
	if g := NewVerifier(rsaK.keys, Options{}).Generation(); g != 0 {
		t.Fatalf("a fixed key has generation %d, want 0", g)
	}
}

func TestJWKSRefreshFetchesEvenWhileAKidFetchIsRateLimited(t *testing.T) {
	k := testKinds(t)[1]
	ks := newKeyServer(t)
	ks.serve(t, http.StatusOK, jwkOf(t, "k1", k.pub))
	clk := &clock{t: testNow}
	set := NewJWKS(ks.URL, JWKSOptions{Now: clk.now, MinInterval: time.Minute})
	v := NewVerifier(set, Options{Now: clk.now})
	ctx := context.Background()
	if _, err := v.Verify(ctx, signKid(t, k.method, k.sign, "k1")); err != nil {
		t.Fatal(err)
	}
	// Within MinInterval an unknown kid fetches nothing; Refresh always does.
	if _, err := v.Verify(ctx, signKid(t, k.method, k.sign, "k2")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown kid: %v", err)
	}
	if n := ks.hits.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	for range 3 {
		if err := set.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := ks.hits.Load(); n != 4 {
		t.Fatalf("%d fetches after 3 Refresh calls, want 4", n)
	}
}
