package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

// mac is an independent signer: the standard library only.
func mac(secret string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return h.Sum(nil)
}

var (
	testBody   = []byte(`{"events":[{"event":"project.translated","project":{"id":"7"}}]}`)
	testSecret = "app-secret-1"
	// testMAC has '+' and '/' in standard base64, so the two alphabets differ.
	testMAC = macWithBothAlphabetChars()
)

// macWithBothAlphabetChars finds a body whose MAC's standard base64 holds
// both '+' and '/', so that every alphabet case is exercised.
func macWithBothAlphabetChars() []byte {
	for i := 0; ; i++ {
		m := mac(testSecret, append(testBody, strings.Repeat(" ", i)...))
		s := base64.StdEncoding.EncodeToString(m)
		if strings.Contains(s, "+") && strings.Contains(s, "/") {
			testBody = append(testBody, strings.Repeat(" ", i)...)
			return m
		}
	}
}

func TestParse(t *testing.T) {
	hexLower := hex.EncodeToString(testMAC)
	std := base64.StdEncoding.EncodeToString(testMAC)
	url := base64.URLEncoding.EncodeToString(testMAC)
	stdRaw := base64.RawStdEncoding.EncodeToString(testMAC)
	urlRaw := base64.RawURLEncoding.EncodeToString(testMAC)
	// A non-canonical encoding: same bytes, non-zero unused trailing bits.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", stdRaw[42])
	nonCanonical := stdRaw[:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last|1])

	tests := []struct {
		name   string
		header string
		err    error // nil: must decode to testMAC
	}{
		{"hex lower", hexLower, nil},
		{"hex upper", strings.ToUpper(hexLower), nil},
		{"hex mixed case", mixCase(hexLower), nil},
		{"hex with prefix", "sha256=" + hexLower, nil},
		{"hex with upper-case prefix", "SHA256=" + hexLower, nil},
		{"hex with spaces around", " \tsha256=" + hexLower + " ", nil},
		{"base64 std padded", std, nil},
		{"base64 std unpadded", stdRaw, nil},
		{"base64 url padded", url, nil},
		{"base64 url unpadded", urlRaw, nil},
		{"base64 std with prefix", "sha256=" + std, nil},
		{"base64 url unpadded with prefix", "sha256=" + urlRaw, nil},

		{"empty", "", ErrMissing},
		{"blank", "  \t ", ErrMissing},
		{"prefix only", "sha256=", ErrMalformed},
		{"prefix twice", "sha256=sha256=" + hexLower, ErrMalformed},
		{"hex truncated", hexLower[:63], ErrMalformed},
		{"hex one byte short", hexLower[:62], ErrMalformed},
		{"hex too long", hexLower + "00", ErrMalformed},
		{"hex junk digit", hexLower[:10] + "g" + hexLower[11:], ErrMalformed},
		{"hex inner space", hexLower[:10] + " " + hexLower[11:], ErrMalformed},
		{"sha1 length hex", hexLower[:40], ErrMalformed},
		{"sha512 length hex", hexLower + hexLower, ErrMalformed},
		{"base64 truncated", stdRaw[:42], ErrMalformed},
		{"base64 double padding", stdRaw + "==", ErrMalformed},
		{"base64 44 without padding", stdRaw + "A", ErrMalformed},
		{"base64 mixed alphabets", strings.Replace(std, "+", "-", 1), ErrMalformed},
		{"base64 junk", "!" + stdRaw[1:], ErrMalformed},
		{"base64 padding inside", stdRaw[:20] + "=" + stdRaw[21:], ErrMalformed},
		{"base64 non-canonical", nonCanonical, ErrMalformed},
		{"other algorithm prefix", "sha1=" + hexLower, ErrMalformed},
		{"two signatures", hexLower + "," + hexLower, ErrMalformed},
		{"non-ASCII", strings.Repeat("é", 32), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.header)
			if tt.err == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if !bytes.Equal(got, testMAC) {
					t.Fatalf("Parse = %x, want %x", got, testMAC)
				}
				return
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("Parse error %v, want %v", err, tt.err)
			}
			if got != nil {
				t.Fatalf("Parse returned bytes with an error")
			}
			if h := strings.TrimSpace(tt.header); h != "" && strings.Contains(err.Error(), h) {
				t.Fatalf("error %q repeats the header", err)
			}
		})
	}
	if nonCanonical == stdRaw {
		t.Fatal("test setup: non-canonical encoding equals the canonical one")
	}
}

func mixCase(s string) string {
	b := []byte(s)
	for i := range b {
		if i%2 == 0 {
			b[i] = byte(strings.ToUpper(string(b[i]))[0])
		}
	}
	return string(b)
}

func TestVerify(t *testing.T) {
	good := hex.EncodeToString(testMAC)
	other := hex.EncodeToString(mac("another-secret", testBody))
	tampered := append([]byte(nil), testBody...)
	tampered[len(tampered)-1] ^= 1

	tests := []struct {
		name    string
		body    []byte
		header  string
		secrets []string
		err     error
	}{
		{"one secret", testBody, good, []string{testSecret}, nil},
		{"rotation: old first", testBody, good, []string{testSecret, "new-secret"}, nil},
		{"rotation: new first", testBody, good, []string{"new-secret", testSecret}, nil},
		{"base64 url", testBody, base64.RawURLEncoding.EncodeToString(testMAC), []string{testSecret}, nil},
		{"empty body", nil, hex.EncodeToString(mac(testSecret, nil)), []string{testSecret}, nil},
		{"signed with another secret", testBody, other, []string{testSecret}, ErrMismatch},
		{"tampered body", tampered, good, []string{testSecret}, ErrMismatch},
		{"body with an extra byte", append(append([]byte(nil), testBody...), '\n'), good, []string{testSecret}, ErrMismatch},
		{"no secret matches", testBody, good, []string{"a", "b", "c"}, ErrMismatch},
		{"secret that differs in case", testBody, good, []string{strings.ToUpper(testSecret)}, ErrMismatch},
		{"missing", testBody, "", []string{testSecret}, ErrMissing},
		{"malformed", testBody, good[:20], []string{testSecret}, ErrMalformed},
		{"no secrets", testBody, good, nil, ErrNoSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.body, tt.header, tt.secrets...)
			if !errors.Is(err, tt.err) && !(tt.err == nil && err == nil) {
				t.Fatalf("Verify: %v, want %v", err, tt.err)
			}
			if len(tt.secrets) == 0 {
				return
			}
			v, err := NewVerifier(tt.secrets...)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 { // the second round runs on pooled hash state
				if err := v.Verify(tt.body, tt.header); !errors.Is(err, tt.err) && !(tt.err == nil && err == nil) {
					t.Fatalf("Verifier.Verify round %d: %v, want %v", i, err, tt.err)
				}
			}
		})
	}
}

func TestNewVerifierRefusesEmptySecrets(t *testing.T) {
	if _, err := NewVerifier(); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("NewVerifier(): %v, want ErrNoSecret", err)
	}
	if _, err := NewVerifier("ok", ""); err == nil || !strings.Contains(err.Error(), "secret 2 of 2 is empty") {
		t.Fatalf("NewVerifier with an empty secret: %v", err)
	}
	if err := Verify(testBody, hex.EncodeToString(mac("", testBody)), ""); err == nil {
		t.Fatal("Verify accepted a signature under the empty secret")
	}
}

func TestVerifyMACLength(t *testing.T) {
	v, _ := NewVerifier(testSecret)
	if err := v.VerifyMAC(testBody, testMAC[:31]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("VerifyMAC with 31 bytes: %v", err)
	}
	if err := v.VerifyMAC(testBody, testMAC); err != nil {
		t.Fatalf("VerifyMAC: %v", err)
	}
}

func TestSignRoundTrip(t *testing.T) {
	got := Sign(testSecret, testBody)
	if got != hex.EncodeToString(testMAC) {
		t.Fatalf("Sign = %s, want %x", got, testMAC)
	}
	if err := Verify(testBody, got, testSecret); err != nil {
		t.Fatal(err)
	}
}

func TestVerifierAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	v, _ := NewVerifier("old", testSecret)
	header := "sha256=" + base64.StdEncoding.EncodeToString(testMAC)
	allocs := testing.AllocsPerRun(100, func() {
		if err := v.Verify(testBody, header); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Verifier.Verify allocates %v times per call", allocs)
	}
}

// FuzzParse checks the hand-written decoders against the standard
// library's: whatever Parse accepts decodes to the same bytes there, and
// Parse never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		hex.EncodeToString(testMAC),
		"sha256=" + strings.ToUpper(hex.EncodeToString(testMAC)),
		base64.StdEncoding.EncodeToString(testMAC),
		base64.RawURLEncoding.EncodeToString(testMAC),
		"sha256=" + base64.URLEncoding.EncodeToString(testMAC),
		"", "sha256=", "=", strings.Repeat("=", 44), strings.Repeat("g", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		got, err := Parse(header)
		if err != nil {
			if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v is neither missing nor malformed", err)
			}
			return
		}
		if len(got) != sha256.Size {
			t.Fatalf("Parse returned %d bytes", len(got))
		}
		s := strings.Trim(header, " \t")
		if len(s) >= 7 && strings.EqualFold(s[:7], "sha256=") {
			s = s[7:]
		}
		var want []byte
		var werr error
		switch {
		case len(s) == 64:
			want, werr = hex.DecodeString(s)
		case strings.ContainsAny(s, "-_"):
			want, werr = base64.RawURLEncoding.Strict().DecodeString(strings.TrimSuffix(s, "="))
		default:
			want, werr = base64.RawStdEncoding.Strict().DecodeString(strings.TrimSuffix(s, "="))
		}
		if werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("Parse(%q) = %x; standard library: %x, %v", header, got, want, werr)
		}
	})
}

// FuzzVerify checks that a signature made under one key never passes under
// another, whatever the header, and that the true signature always passes.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(testBody), "k1", "k2", hex.EncodeToString(testMAC))
	f.Add([]byte{}, "a", "b", "")
	f.Add([]byte("x"), "secret", "secret\x00", "sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, body []byte, signer, verifier, header string) {
		if verifier == "" || signer == "" {
			return
		}
		v, err := NewVerifier(verifier)
		if err != nil {
			t.Fatal(err)
		}
		signed := mac(signer, body)
		err = v.Verify(body, hex.EncodeToString(signed))
		if sameHMACKey(signer, verifier) {
			if err != nil {
				t.Fatalf("signature under the verifier's own key refused: %v", err)
			}
		} else if err == nil {
			t.Fatal("signature under another key accepted")
		}
		// An arbitrary header passes only if it is the true signature.
		if v.Verify(body, header) == nil {
			got, _ := Parse(header)
			if !hmac.Equal(got, mac(verifier, body)) {
				t.Fatal("accepted a header that is not the verifier's signature")
			}
		}
	})
}

// sameHMACKey reports whether HMAC treats a and b as the same key: keys
// are zero-padded to the block size, and longer keys are hashed first.
func sameHMACKey(a, b string) bool {
	norm := func(k string) string {
		if len(k) > sha256.BlockSize {
			s := sha256.Sum256([]byte(k))
			k = string(s[:])
		}
		return strings.TrimRight(k, "\x00")
	}
	return norm(a) == norm(b)
}

func BenchmarkParse(b *testing.B) {
	header := "sha256=" + base64.StdEncoding.EncodeToString(testMAC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(header); err != nil {
			b.Fatal(err)
		}
	}
}

// The 5 MiB pair: Verify with one secret against SHA-256 alone on the same
// bytes. Their ns/op ratio is the cost of verification over hashing.
var bigBody = bytes.Repeat([]byte(`{"event":"project.translated"},`), 5<<20/31)

func BenchmarkVerify5MiB(b *testing.B) {
	v, _ := NewVerifier(testSecret)
	header := hex.EncodeToString(mac(testSecret, bigBody))
	b.SetBytes(int64(len(bigBody)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(bigBody, header); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSHA256Alone5MiB(b *testing.B) {
	b.SetBytes(int64(len(bigBody)))
	b.ReportAllocs()
	for b.Loop() {
		_ = sha256.Sum256(bigBody)
	}
}

func BenchmarkVerify1KiB(b *testing.B) {
	body := bigBody[:1024]
	v, _ := NewVerifier(testSecret)
	header := hex.EncodeToString(mac(testSecret, body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(body, header); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStreamAgreesWithVerifyMAC: the MACs fed while a body arrives, in
// pieces of any size, give the verdict VerifyMAC gives over the whole body.
func TestStreamAgreesWithVerifyMAC(t *testing.T) {
	v, err := NewVerifier("old-secret", "new-secret")
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte(`{"events":[{"event":"project.translated"}]}`), 500)
	for _, c := range []struct {
		name   string
		secret string
		want   error
	}{{"first secret", "old-secret", nil}, {"second secret", "new-secret", nil}, {"no secret", "other", ErrMismatch}} {
		mac, _ := Parse(Sign(c.secret, body))
		for _, piece := range []int{1, 7, 4096, len(body)} {
			s := v.Stream()
			got, err := io.ReadAll(s.Reader(&pieces{body, piece}))
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("%s: reading through the stream changed the body: %v", c.name, err)
			}
			if err := s.Verify(mac); !errors.Is(err, c.want) || (c.want == nil) != (v.VerifyMAC(body, mac) == nil) {
				t.Errorf("%s, pieces of %d: Verify = %v, want %v", c.name, piece, err, c.want)
			}
			s.Release()
		}
	}
}

func TestStreamAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes pools allocate")
	}
	v, _ := NewVerifier("s")
	body := []byte(`{"events":[]}`)
	mac, _ := Parse(Sign("s", body))
	allocs := testing.AllocsPerRun(100, func() {
		s := v.Stream()
		s.Write(body)
		if s.Verify(mac) != nil {
			t.Fatal("mismatch")
		}
		s.Release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per stream", allocs)
	}
}

// pieces reads its bytes n at a time, as a body arrives from the network.
type pieces struct {
	b []byte
	n int
}

func (p *pieces) Read(dst []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(dst[:min(len(dst), p.n)], p.b)
	p.b = p.b[n:]
	return n, nil
}
