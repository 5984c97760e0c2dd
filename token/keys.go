package token

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
)

// Keys supplies the keys that verify tokens.
type Keys interface {
	// Algorithms is the allow-list of JWS "alg" values these keys verify.
	// A token whose header names any other algorithm is refused before
	// a key is looked up.
	Algorithms() []string
	// Key returns the verification key for a token's alg and kid header
	// values, or an error: ErrAlgorithm when alg does not fit the key,
	// ErrUnknownKey, ErrKeysUnavailable.
	Key(ctx context.Context, alg, kid string) (any, error)
}

// Rotating is implemented by Keys whose keys change while in use, such as
// a JWKS. Generation changes whenever a key may have been withdrawn or
// replaced (keys only added leave it as it was), so that a token verified
// under an older generation is verified again before it is trusted.
type Rotating interface {
	Keys
	Generation() uint64
}

// minRSABits is the smallest RSA modulus accepted: shorter keys are
// breakable and no current issuer uses them.
const minRSABits = 2048

var (
	hmacAlgs  = []string{"HS256", "HS384", "HS512"}
	rsaAlgs   = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	p256Algs  = []string{"ES256"}
	p384Algs  = []string{"ES384"}
	p521Algs  = []string{"ES512"}
	eddsaAlgs = []string{"EdDSA"}
	// publicAlgs is every algorithm a public key may verify.
	publicAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

type hmacKeys struct{ secret []byte }

// HMAC returns Keys for tokens signed with HS256, HS384 or HS512 using
// secret, such as the app's client secret.
func HMAC(secret []byte) Keys {
	return hmacKeys{secret: append([]byte(nil), secret...)}
}

func (k hmacKeys) Algorithms() []string { return hmacAlgs }

func (k hmacKeys) Key(_ context.Context, alg, _ string) (any, error) {
	if !slices.Contains(hmacAlgs, alg) {
		return nil, ErrAlgorithm
	}
	return k.secret, nil
}

type publicKey struct {
	key  crypto.PublicKey
	algs []string
}

// PublicKey returns Keys for tokens signed with the private half of pub:
// an *rsa.PublicKey (RS256/384/512, PS256/384/512; at least 2048 bits),
// an *ecdsa.PublicKey (ES256, ES384 or ES512, as its curve dictates) or an
// ed25519.PublicKey (EdDSA).
func PublicKey(pub crypto.PublicKey) (Keys, error) {
	algs, err := algorithmsFor(pub)
	if err != nil {
		return nil, err
	}
	return publicKey{key: pub, algs: algs}, nil
}

func (k publicKey) Algorithms() []string { return k.algs }

func (k publicKey) Key(_ context.Context, alg, _ string) (any, error) {
	if !slices.Contains(k.algs, alg) {
		return nil, ErrAlgorithm
	}
	return k.key, nil
}

// algorithmsFor lists the algorithms pub can verify.
func algorithmsFor(pub crypto.PublicKey) ([]string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N == nil || k.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key shorter than %d bits", minRSABits)
		}
		return rsaAlgs, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return p256Algs, nil
		case elliptic.P384():
			return p384Algs, nil
		case elliptic.P521():
			return p521Algs, nil
		}
		return nil, errors.New("ECDSA key on an unsupported curve (want P-256, P-384 or P-521)")
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, errors.New("Ed25519 key of the wrong size")
		}
		return eddsaAlgs, nil
	}
	return nil, fmt.Errorf("unsupported public key type %T", pub)
}

// ParsePublicKeyPEM reads the first public key in PEM data: a "PUBLIC KEY"
// block (PKIX: RSA, ECDSA or Ed25519), an "RSA PUBLIC KEY" block (PKCS #1)
// or a "CERTIFICATE" whose key is used.
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM public key or certificate found")
		}
		switch block.Type {
		case "PUBLIC KEY":
			pub, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing PEM public key: %w", err)
			}
			return pub, nil
		case "RSA PUBLIC KEY":
			pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing PEM RSA public key: %w", err)
			}
			return pub, nil
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parsing PEM certificate: %w", err)
			}
			return cert.PublicKey, nil
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			// Refuse rather than skip: a private key in the gateway's
			// config is a mistake worth pointing out.
			return nil, errors.New("PEM holds a private key; give the public key only")
		}
	}
}
