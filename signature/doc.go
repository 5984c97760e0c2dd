// Package signature verifies the HMAC-SHA256 signatures of the service's
// webhook deliveries. It has no Caddy import.
//
// The service signs each delivery with the app secret it gave the app at
// installation and sends the signature in the X-Service-Signature header.
// The signed bytes are the raw request body exactly as received. Parse
// accepts the signature in hex or base64 (see Parse); Verify and Verifier
// compare decoded bytes in constant time against every secret given, so a
// secret can be rotated by configuring the old and the new one together.
//
//	v, err := signature.NewVerifier(oldSecret, newSecret)
//	...
//	if err := v.Verify(body, r.Header.Get("X-Service-Signature")); err != nil {
//		// errors.Is(err, signature.ErrMissing / ErrMalformed / ErrMismatch)
//	}
package signature
