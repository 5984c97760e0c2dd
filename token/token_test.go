package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testNow is the fixed clock of these tests.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return testNow }

// keyKind is one kind of signing key with everything a test needs.
type keyKind struct {
	name   string
	method jwt.SigningMethod
	sign   any              // private key (or HMAC secret)
	other  any              // another key of the same kind
	pub    crypto.PublicKey // nil for HMAC
	keys   Keys
}

var (
	kindsOnce sync.Once
	kinds     []keyKind
)

// testKinds generates one key of each kind (once per test binary: RSA
// generation is slow).
func testKinds(t testing.TB) []keyKind {
	kindsOnce.Do(func() {
		secret := []byte("client-secret-of-the-app-0123456789")
		rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
		rsaOther, _ := rsa.GenerateKey(rand.Reader, 2048)
		ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ecOther, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		edPub, edKey, _ := ed25519.GenerateKey(rand.Reader)
		_, edOther, _ := ed25519.GenerateKey(rand.Reader)
		rk, err1 := PublicKey(&rsaKey.PublicKey)
		ek, err2 := PublicKey(&ecKey.PublicKey)
		dk, err3 := PublicKey(edPub)
		if err := errors.Join(err1, err2, err3); err != nil {
			panic(err)
		}
		kinds = []keyKind{
			{"HMAC", jwt.SigningMethodHS256, secret, []byte("another-secret-entirely-0123456789"), nil, HMAC(secret)},
			{"RSA", jwt.SigningMethodRS256, rsaKey, rsaOther, &rsaKey.PublicKey, rk},
			{"ECDSA", jwt.SigningMethodES256, ecKey, ecOther, &ecKey.PublicKey, ek},
			{"Ed25519", jwt.SigningMethodEdDSA, edKey, edOther, edPub, dk},
		}
	})
	return kinds
}

func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":     "service-emulator",
		"sub":     "7",
		"aud":     "client-id",
		"domain":  "acme",
		"context": map[string]any{"organization_id": 1, "user_id": 7},
		"iat":     testNow.Add(-time.Minute).Unix(),
		"exp":     testNow.Add(time.Hour).Unix(),
		"jti":     "abc",
	}
}

func with(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func pemOf(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// foreignMethod returns a method of another family than k's.
func foreignMethod(k keyKind) (jwt.SigningMethod, any) {
	if k.name == "HMAC" {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		return jwt.SigningMethodES256, key
	}
	return jwt.SigningMethodHS512, []byte("some-secret-of-sufficient-length-000")
}

func TestVerifyMatrix(t *testing.T) {
	opts := Options{Issuer: "service-emulator", Audience: []string{"client-id"}, Leeway: 30 * time.Second, Now: fixedNow}
	for _, k := range testKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			v := NewVerifier(k.keys, opts)
			good := sign(t, k.method, k.sign, baseClaims())
			parts := strings.Split(good, ".")
			fm, fkey := foreignMethod(k)
			cases := []struct {
				name  string
				token string
				want  error
			}{
				{"valid", good, nil},
				{"expired", sign(t, k.method, k.sign, with(baseClaims(), "exp", testNow.Add(-time.Minute).Unix())), ErrExpired},
				{"expired within leeway", sign(t, k.method, k.sign, with(baseClaims(), "exp", testNow.Add(-10*time.Second).Unix())), nil},
				{"no exp", sign(t, k.method, k.sign, with(baseClaims(), "exp", nil)), ErrNoExpiry},
				{"exp not a number", sign(t, k.method, k.sign, with(baseClaims(), "exp", "tomorrow")), ErrClaims},
				{"nbf in the future", sign(t, k.method, k.sign, with(baseClaims(), "nbf", testNow.Add(time.Minute).Unix())), ErrNotYetValid},
				{"nbf within leeway", sign(t, k.method, k.sign, with(baseClaims(), "nbf", testNow.Add(20*time.Second).Unix())), nil},
				{"iat in the future", sign(t, k.method, k.sign, with(baseClaims(), "iat", testNow.Add(time.Minute).Unix())), ErrIssuedInFuture},
				{"wrong key", sign(t, k.method, k.other, baseClaims()), ErrSignature},
				{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","exp":9999999999}`)) + "." + parts[2], ErrSignature},
				{"wrong alg family", sign(t, fm, fkey, baseClaims()), ErrAlgorithm},
				{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, baseClaims()), ErrAlgorithm},
				{"unknown alg", encodeHeader(`{"alg":"HS999","typ":"JWT"}`) + "." + parts[1] + "." + parts[2], ErrAlgorithm},
				{"no alg", encodeHeader(`{"typ":"JWT"}`) + "." + parts[1] + "." + parts[2], ErrAlgorithm},
				{"wrong issuer", sign(t, k.method, k.sign, with(baseClaims(), "iss", "someone-else")), ErrIssuer},
				{"no issuer", sign(t, k.method, k.sign, with(baseClaims(), "iss", nil)), ErrIssuer},
				{"wrong audience", sign(t, k.method, k.sign, with(baseClaims(), "aud", "other-app")), ErrAudience},
				{"no audience", sign(t, k.method, k.sign, with(baseClaims(), "aud", nil)), ErrAudience},
				{"audience array", sign(t, k.method, k.sign, with(baseClaims(), "aud", []string{"x", "client-id"})), nil},
				{"audience array without ours", sign(t, k.method, k.sign, with(baseClaims(), "aud", []string{"x", "y"})), ErrAudience},
				{"two segments", parts[0] + "." + parts[1], ErrMalformed},
				{"four segments", good + ".x", ErrMalformed},
				{"empty", "", ErrMalformed},
				{"bad base64 header", "@@@." + parts[1] + "." + parts[2], ErrMalformed},
				{"bad base64 payload", parts[0] + ".%%%." + parts[2], ErrMalformed},
				{"bad base64 signature", parts[0] + "." + parts[1] + ".***", ErrMalformed},
				{"payload not JSON", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[2], ErrMalformed},
				{"huge", parts[0] + "." + strings.Repeat("A", MaxLength) + "." + parts[2], ErrTooLarge},
			}
			if k.pub != nil {
				// Algorithm confusion: HS256 keyed with the public key.
				cases = append(cases,
					struct {
						name  string
						token string
						want  error
					}{"HS256 keyed with the public key", sign(t, jwt.SigningMethodHS256, pemOf(t, k.pub), baseClaims()), ErrAlgorithm})
			}
			if k.name == "ECDSA" {
				other, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
				cases = append(cases, struct {
					name  string
					token string
					want  error
				}{"ES384 for a P-256 key", sign(t, jwt.SigningMethodES384, other, baseClaims()), ErrAlgorithm})
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					claims, err := v.Verify(context.Background(), c.token)
					if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
						t.Fatalf("Verify = %v, want %v", err, c.want)
					}
					if err != nil {
						if claims != nil {
							t.Fatalf("claims returned with error %v", err)
						}
						if c.token != "" && strings.Contains(err.Error(), c.token) {
							t.Fatal("error text holds the token")
						}
						return
					}
					if sub, _ := claims.String("sub"); sub != "7" {
						t.Fatalf("sub = %q", sub)
					}
				})
			}
		})
	}
}

func encodeHeader(h string) string { return base64.RawURLEncoding.EncodeToString([]byte(h)) }

func TestVerifyWithoutIssuerOrAudience(t *testing.T) {
	k := testKinds(t)[0]
	v := NewVerifier(k.keys, Options{Now: fixedNow})
	tok := sign(t, k.method, k.sign, with(baseClaims(), "iss", nil, "aud", nil))
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("Verify = %v, want nil when no issuer or audience is configured", err)
	}
	// Leeway 0: a token expired a second ago is refused.
	tok = sign(t, k.method, k.sign, with(baseClaims(), "exp", testNow.Add(-time.Second).Unix()))
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("Verify = %v, want ErrExpired", err)
	}
}

func TestVerifyHS384AndHS512(t *testing.T) {
	secret := []byte("client-secret-of-the-app-0123456789")
	v := NewVerifier(HMAC(secret), Options{Now: fixedNow})
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodHS384, jwt.SigningMethodHS512} {
		if _, err := v.Verify(context.Background(), sign(t, m, secret, baseClaims())); err != nil {
			t.Errorf("%s: %v", m.Alg(), err)
		}
	}
}

func TestVerifyRSAPSS(t *testing.T) {
	k := testKinds(t)[1]
	v := NewVerifier(k.keys, Options{Now: fixedNow})
	if _, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodPS256, k.sign, baseClaims())); err != nil {
		t.Fatal(err)
	}
}

func TestEmulatorTokenClaims(t *testing.T) {
	k := testKinds(t)[0]
	v := NewVerifier(k.keys, Options{Issuer: "service-emulator", Audience: []string{"client-id"}, Now: fixedNow})
	claims, err := v.Verify(context.Background(), sign(t, k.method, k.sign, with(baseClaims(), "ratio", 0.5, "big", 1e21, "float_int", 42.0)))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"sub":                     "7",
		"domain":                  "acme",
		"context.organization_id": "1",
		"context.user_id":         "7",
		"exp":                     "1772370000",
		"ratio":                   "0.5",
		"big":                     "1000000000000000000000",
		"float_int":               "42",
		"aud":                     "client-id",
	} {
		if got, ok := claims.String(path); !ok || got != want {
			t.Errorf("%s = %q, %v; want %q", path, got, ok, want)
		}
	}
	if _, ok := claims.String("context.missing"); ok {
		t.Error("missing path reported present")
	}
	if _, ok := claims.String("domain.deeper"); ok {
		t.Error("path through a string reported present")
	}
	if got := claims.Expiry(); !got.Equal(testNow.Add(time.Hour)) {
		t.Errorf("Expiry = %v", got)
	}
}

func TestRender(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"x", "x"},
		{jsonNumber("42"), "42"},
		{jsonNumber("42.0"), "42"},
		{jsonNumber("4.2e+01"), "42"},
		{jsonNumber("-3"), "-3"},
		{jsonNumber("1.25"), "1.25"},
		{jsonNumber("1e400"), "1e400"},
		{4.2e1, "42"},
		{true, "true"},
		{[]any{"a", jsonNumber("2"), false}, "a,2,false"},
		{map[string]any{"k": "v"}, `{"k":"v"}`},
	}
	for _, c := range cases {
		if got := Render(c.in); got != c.want {
			t.Errorf("Render(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParsePublicKeyPEM(t *testing.T) {
	for _, k := range testKinds(t)[1:] {
		pub, err := ParsePublicKeyPEM(append([]byte("leading text\n"), pemOf(t, k.pub)...))
		if err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		if _, err := PublicKey(pub); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
	}
	rsaKey := testKinds(t)[1].sign.(*rsa.PrivateKey)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)})
	if _, err := ParsePublicKeyPEM(pkcs1); err != nil {
		t.Fatalf("PKCS #1: %v", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	if _, err := ParsePublicKeyPEM(priv); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("private key: err = %v", err)
	}
	if _, err := ParsePublicKeyPEM([]byte("not pem")); err == nil {
		t.Fatal("no error for text without PEM")
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := PublicKey(&small.PublicKey); err == nil {
		t.Fatal("1024-bit RSA key accepted")
	}
}

func TestFromAuthorization(t *testing.T) {
	cases := []struct {
		in     string
		want   string
		bearer bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc  ", "abc", true},
		{"Bearer\tabc", "abc", true},
		{"Bearer", "", true},
		{"Bearer ", "", true},
		{"Bearerabc", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"", "", false},
		{"Bear", "", false},
	}
	for _, c := range cases {
		got, ok := FromAuthorization(c.in)
		if got != c.want || ok != c.bearer {
			t.Errorf("FromAuthorization(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.bearer)
		}
	}
}

func TestCache(t *testing.T) {
	now := testNow
	c := NewCache[int](3, func() time.Time { return now })
	c.Put("a", 1, now.Add(time.Minute), 1)
	c.Put("old", 9, now.Add(-time.Second), 1) // already expired: not stored
	if v, ok := c.Get("a", 1); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	if _, ok := c.Get("old", 1); ok {
		t.Fatal("expired entry stored")
	}
	now = now.Add(time.Minute)
	if _, ok := c.Get("a", 1); ok {
		t.Fatal("entry served at its deadline")
	}
	for i, k := range []string{"b", "c", "d", "e", "f"} {
		c.Put(k, i, now.Add(time.Hour), 1)
		if c.Len() > 3 {
			t.Fatalf("cache holds %d entries, bound 3", c.Len())
		}
	}
	if v, ok := c.Get("f", 1); !ok || v != 4 {
		t.Fatalf("latest entry missing: %v %v", v, ok)
	}
}

func TestCacheEvictsExpiredFirst(t *testing.T) {
	now := testNow
	c := NewCache[string](2, func() time.Time { return now })
	c.Put("short", "s", now.Add(time.Second), 1)
	c.Put("long", "l", now.Add(time.Hour), 1)
	now = now.Add(2 * time.Second)
	c.Put("new", "n", now.Add(time.Hour), 1)
	if _, ok := c.Get("long", 1); !ok {
		t.Fatal("a live entry was evicted while an expired one was there")
	}
}

func TestCacheFindsEntriesOnlyUnderTheirKeyGeneration(t *testing.T) {
	now := testNow
	c := NewCache[string](2, func() time.Time { return now })
	c.Put("tok", "v", now.Add(time.Hour), 1)
	if _, ok := c.Get("tok", 1); !ok {
		t.Fatal("entry not found under the generation that verified it")
	}
	if _, ok := c.Get("tok", 2); ok {
		t.Fatal("entry found under a later key generation")
	}
	// Full: an entry of an older generation makes room before a live one.
	c.Put("live", "l", now.Add(time.Hour), 2)
	c.Put("new", "n", now.Add(time.Hour), 2)
	if _, ok := c.Get("live", 2); !ok {
		t.Fatal("a live entry was evicted while one of an older generation was there")
	}
	c.Put("tok", "v2", now.Add(time.Hour), 2)
	if v, ok := c.Get("tok", 2); !ok || v != "v2" {
		t.Fatalf("re-verified entry: %q, %v", v, ok)
	}
}

func jsonNumber(s string) any { return json.Number(s) }
