package token

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func FuzzFromAuthorization(f *testing.F) {
	for _, s := range []string{"Bearer abc.def.ghi", "bearer x", "BEARER   y  ", "Bearer", "Basic Zm9vOmJhcg==", "", "Bearerx", "Bearer \t", "\tBearer x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		tok, ok := FromAuthorization(value)
		if !ok {
			if tok != "" {
				t.Fatalf("token %q without the Bearer scheme", tok)
			}
			return
		}
		if !strings.EqualFold(value[:6], "bearer") {
			t.Fatalf("%q taken as Bearer", value)
		}
		if tok != strings.Trim(tok, " \t") {
			t.Fatalf("token %q keeps surrounding spaces", tok)
		}
		if !strings.Contains(value, tok) {
			t.Fatalf("token %q is not part of %q", tok, value)
		}
	})
}

var allReasons = []error{ErrTooLarge, ErrMalformed, ErrAlgorithm, ErrUnknownKey, ErrKeysUnavailable, ErrSignature,
	ErrNoExpiry, ErrExpired, ErrNotYetValid, ErrIssuedInFuture, ErrIssuer, ErrAudience, ErrClaims}

func FuzzVerify(f *testing.F) {
	secret := []byte("client-secret-of-the-app-0123456789")
	k := testKinds(f)[0]
	good := sign(f, k.method, k.sign, baseClaims())
	parts := strings.Split(good, ".")
	f.Add(good)
	f.Add(parts[0] + "." + parts[1] + ".")
	f.Add(parts[0] + ".." + parts[2])
	f.Add("..")
	f.Add("a.b.c")
	f.Add(encodeHeader(`{"alg":"none"}`) + "." + parts[1] + ".")
	f.Add(encodeHeader(`{"alg":"HS256","kid":1}`) + "." + parts[1] + "." + parts[2])
	f.Add(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":1e999}`)) + "." + parts[2])
	v := NewVerifier(HMAC(secret), Options{Issuer: "service-emulator", Audience: []string{"client-id"}, Now: fixedNow})
	f.Fuzz(func(t *testing.T, raw string) {
		claims, err := v.Verify(context.Background(), raw)
		if err != nil {
			known := false
			for _, r := range allReasons {
				known = known || err == r
			}
			if !known {
				t.Fatalf("error %v is not one of the package's reasons", err)
			}
			return
		}
		// Accepted: the signature must really be the HMAC of the signing
		// input, and exp must be there.
		i := strings.LastIndexByte(raw, '.')
		sig, decErr := base64.RawURLEncoding.DecodeString(raw[i+1:])
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(raw[:i]))
		if decErr != nil || !hmac.Equal(sig, mac.Sum(nil)) {
			t.Fatalf("accepted a token without a valid signature")
		}
		if claims.Expiry().IsZero() {
			t.Fatal("accepted a token without exp")
		}
	})
}
