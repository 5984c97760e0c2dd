package token

import (
	"context"
	"testing"
)

func BenchmarkVerify(b *testing.B) {
	for _, k := range testKinds(b) {
		b.Run(k.method.Alg(), func(b *testing.B) {
			v := NewVerifier(k.keys, Options{Issuer: "service-emulator", Audience: []string{"client-id"}, Now: fixedNow})
			tok := sign(b, k.method, k.sign, baseClaims())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCacheHit(b *testing.B) {
	k := testKinds(b)[0]
	tok := sign(b, k.method, k.sign, baseClaims())
	c := NewCache[*int](10000, nil)
	one := 1
	c.Put(tok, &one, fixedNow().AddDate(100, 0, 0), 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Get(tok, 1); !ok {
			b.Fatal("miss")
		}
	}
}

func BenchmarkFromAuthorization(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := FromAuthorization("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI3In0.sig"); !ok {
			b.Fatal("not bearer")
		}
	}
}
