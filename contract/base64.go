package contract

import "encoding/base64"

// base64Alphabet marks the bytes of the standard base64 alphabet.
var base64Alphabet = func() (t [256]byte) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = 1
	}
	return t
}()

// plainBase64 decides, where it can, whether raw (the contents of a JSON
// string, between its quotes) is base64 as base64.StdEncoding decodes it
// from a stream: decided is false when raw holds an escape or a byte the
// alphabet lacks before its last four, for the decoder to tell. Most
// contents are plain: their bytes are checked by table, 64 at a time
// without a branch, and only the last four bytes, where padding may be,
// are decoded.
func plainBase64(raw []byte) (valid, decided bool) {
	n := len(raw)
	if n == 0 || n%4 != 0 {
		return false, false
	}
	body := raw[:n-4]
	t := &base64Alphabet
	for len(body) >= 64 {
		// four chains of ANDs, so that the loads need not wait on one
		var a0, a1, a2, a3 byte = 1, 1, 1, 1
		for i := 0; i < 64; i += 4 {
			w := body[i : i+4 : i+4]
			a0 &= t[w[0]]
			a1 &= t[w[1]]
			a2 &= t[w[2]]
			a3 &= t[w[3]]
		}
		if a0&a1&a2&a3 == 0 {
			return false, false
		}
		body = body[64:]
	}
	for _, c := range body {
		if base64Alphabet[c] == 0 {
			return false, false
		}
	}
	last := raw[n-4:]
	for _, c := range last {
		if c == '\\' {
			return false, false
		}
	}
	var dst [3]byte
	_, err := base64.StdEncoding.Decode(dst[:], last)
	return err == nil, true
}
