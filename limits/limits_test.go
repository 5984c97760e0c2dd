package limits

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadBody(t *testing.T) {
	const max = 10
	boom := errors.New("connection reset")
	tests := []struct {
		name    string
		r       io.Reader
		want    string
		wantErr error
	}{
		{"empty", strings.NewReader(""), "", nil},
		{"under", strings.NewReader("123456789"), "123456789", nil},
		{"at", strings.NewReader("1234567890"), "1234567890", nil},
		{"over by one", strings.NewReader("12345678901"), "", ErrTooLarge},
		{"far over", strings.NewReader(strings.Repeat("x", 1<<20)), "", ErrTooLarge},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader("1234567890")), "1234567890", nil},
		{"at, last bytes with EOF", iotest.DataErrReader(strings.NewReader("1234567890")), "1234567890", nil},
		{"over by one, last bytes with EOF", iotest.DataErrReader(strings.NewReader("12345678901")), "", ErrTooLarge},
		{"read error", io.MultiReader(strings.NewReader("12"), iotest.ErrReader(boom)), "", boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := ReadBody(&buf, tt.r, max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if buf.Len() > max+1 {
				t.Fatalf("read %d bytes, more than the limit and one", buf.Len())
			}
			if tt.wantErr == nil && buf.String() != tt.want {
				t.Fatalf("read %q, want %q", buf.String(), tt.want)
			}
		})
	}
}

func TestSizeAndLimit(t *testing.T) {
	tests := []struct {
		n           int64
		size, limit string
	}{
		{0, "0 bytes", "0 bytes"},
		{1, "1 byte", "1 byte"},
		{900, "900 bytes", "900 bytes"},
		{1024, "1 KB", "1 KB"},
		{1025, "1.1 KB", "1 KB"},
		{100 << 10, "100 KB", "100 KB"},
		{5 << 20, "5 MB", "5 MB"},
		{5<<20 + 1, "5.1 MB", "5 MB"},
		{5000000, "4.8 MB", "4.7 MB"},
		{6_500_000, "6.2 MB", "6.1 MB"},
		{3 << 30, "3 GB", "3 GB"},
		{1<<63 - 1, "8589934592 GB", "8589934591.9 GB"},
		{-5, "0 bytes", "0 bytes"},
	}
	for _, tt := range tests {
		if got := SizeName(tt.n); got != tt.size {
			t.Errorf("Size(%d) = %q, want %q", tt.n, got, tt.size)
		}
		if got := LimitName(tt.n); got != tt.limit {
			t.Errorf("Limit(%d) = %q, want %q", tt.n, got, tt.limit)
		}
	}
}

// FuzzSizeOverLimit checks that a size over a limit never reads the same as
// the limit, which would leave the reader of "the request is 5 MB and the
// app accepts at most 5 MB" puzzled.
func FuzzSizeOverLimit(f *testing.F) {
	f.Add(int64(5<<20), int64(1))
	f.Add(int64(5000000), int64(1))
	f.Add(int64(1023), int64(1))
	f.Add(int64(1<<62), int64(1<<61))
	f.Fuzz(func(t *testing.T, limit, over int64) {
		if limit < 0 || over <= 0 || limit > 1<<62 || over > 1<<62 {
			t.Skip()
		}
		size := limit + over
		if SizeName(size) == LimitName(limit) {
			t.Fatalf("size %d and limit %d both read %q", size, limit, SizeName(size))
		}
	})
}

func TestDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{2 * time.Minute, "2 minutes"},
		{time.Minute, "1 minute"},
		{90 * time.Second, "90 seconds"},
		{time.Second, "1 second"},
		{300 * time.Millisecond, "300ms"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
		{time.Hour, "60 minutes"},
	}
	for _, tt := range tests {
		if got := DurationName(tt.d); got != tt.want {
			t.Errorf("Duration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func newBuffer(initial http.Header, max int64) *ResponseBuffer {
	rb := new(ResponseBuffer)
	rb.Reset(initial, max)
	return rb
}

func TestResponseBufferLimits(t *testing.T) {
	const max = 10
	tests := []struct {
		name         string
		declared     string // Content-Length header, "" for none
		writes       []string
		wantTooLarge bool
		wantBody     string
	}{
		{"no body", "", nil, false, ""},
		{"under", "", []string{"12345", "6789"}, false, "123456789"},
		{"at", "", []string{"12345", "67890"}, false, "1234567890"},
		{"over while writing", "", []string{"12345", "678901"}, true, ""},
		{"declared at", "10", []string{"1234567890"}, false, "1234567890"},
		{"declared over", "11", []string{"1"}, true, ""},
		{"declared over, nothing written", "11", nil, true, ""},
		{"declared under, sent over", "5", []string{"12345678901"}, true, ""},
		{"declared garbage", "ten", []string{"123"}, false, "123"},
		{"declared negative", "-1", []string{"123"}, false, "123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb := newBuffer(nil, max)
			if tt.declared != "" {
				rb.Header().Set("Content-Length", tt.declared)
			}
			rb.WriteHeader(http.StatusOK)
			var failed bool
			for _, w := range tt.writes {
				n, err := rb.Write([]byte(w))
				if err != nil {
					if !errors.Is(err, ErrTooLarge) || n != 0 {
						t.Fatalf("Write: %d, %v; want 0, ErrTooLarge", n, err)
					}
					failed = true
				}
			}
			if rb.TooLarge() != tt.wantTooLarge {
				t.Fatalf("TooLarge %v, want %v", rb.TooLarge(), tt.wantTooLarge)
			}
			if tt.wantTooLarge && len(tt.writes) > 0 && !failed {
				t.Fatal("no Write failed on a response over the limit")
			}
			if !tt.wantTooLarge && string(rb.Body()) != tt.wantBody {
				t.Fatalf("body %q, want %q", rb.Body(), tt.wantBody)
			}
		})
	}
}

func TestResponseBufferWriteTo(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		status   int
		declared bool
		body     string
		wantCL   string
	}{
		{"length added", http.MethodPost, 200, false, `{"data":{}}`, "11"},
		{"declared length kept", http.MethodPost, 201, true, `{"data":{}}`, "11"},
		{"empty body gets zero", http.MethodPost, 200, false, "", "0"},
		{"no length on 204", http.MethodPost, 204, false, "", ""},
		{"no length on HEAD", http.MethodHead, 200, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			real := httptest.NewRecorder()
			real.Header().Set("Server", "Caddy")
			real.Header().Set("X-Before", "kept unless removed")
			rb := newBuffer(real.Header(), 1<<10)
			rb.Header().Del("X-Before")
			rb.Header().Set("Content-Type", "application/json")
			if tt.declared {
				rb.Header().Set("Content-Length", strconv.Itoa(len(tt.body)))
			}
			rb.WriteHeader(tt.status)
			if _, err := io.WriteString(rb, tt.body); err != nil {
				t.Fatal(err)
			}
			rb.Flush() // nothing may leave before WriteTo
			if real.Code != 200 || real.Body.Len() != 0 || real.Flushed {
				t.Fatal("the buffer wrote to the real response before WriteTo")
			}
			if err := rb.WriteTo(real, tt.method == http.MethodHead); err != nil {
				t.Fatal(err)
			}
			res := real.Result()
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if got := res.Header.Get("Content-Length"); got != tt.wantCL {
				t.Fatalf("Content-Length %q, want %q", got, tt.wantCL)
			}
			if res.Header.Get("Server") != "Caddy" || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("header %v lost a field", res.Header)
			}
			if _, ok := res.Header["X-Before"]; ok {
				t.Fatal("a header removed behind the buffer came back")
			}
			if real.Body.String() != tt.body {
				t.Fatalf("body %q, want %q", real.Body.String(), tt.body)
			}
		})
	}
}

func TestResponseBufferIgnoresInformational(t *testing.T) {
	rb := newBuffer(nil, 10)
	rb.WriteHeader(http.StatusEarlyHints)
	rb.WriteHeader(http.StatusCreated)
	rb.WriteHeader(http.StatusTeapot) // a second final status is ignored, as net/http does
	if rb.Status() != http.StatusCreated {
		t.Fatalf("status %d, want 201", rb.Status())
	}
}

func TestResponseBufferWriteWithoutHeader(t *testing.T) {
	rb := newBuffer(nil, 10)
	if _, err := rb.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if rb.Status() != http.StatusOK {
		t.Fatalf("status %d, want an implicit 200", rb.Status())
	}
}

func TestResponseBufferResetForgets(t *testing.T) {
	rb := newBuffer(nil, 3)
	rb.Header().Set("X-Old", "1")
	rb.Header().Set("Content-Length", "9")
	rb.WriteHeader(http.StatusTeapot)
	rb.Reset(http.Header{"Server": {"Caddy"}}, 3)
	if rb.Status() != 0 || rb.TooLarge() || len(rb.Body()) != 0 || rb.DeclaredSize() != -1 {
		t.Fatal("Reset kept the previous response")
	}
	if rb.Header().Get("X-Old") != "" || rb.Header().Get("Server") != "Caddy" {
		t.Fatalf("header after Reset: %v", rb.Header())
	}
}

// FuzzResponseBuffer feeds the buffer what an app may send: any
// Content-Length value and any body. It must never keep more than the
// limit, and must keep a response within the limit byte for byte.
func FuzzResponseBuffer(f *testing.F) {
	f.Add("", []byte(`{"data":{"strings":[]}}`), int64(32))
	f.Add("5", []byte("12345"), int64(5))
	f.Add("6", []byte("123456"), int64(5))
	f.Add("99999999999999999999", []byte("1"), int64(5))
	f.Add("+3", []byte("123"), int64(5))
	f.Fuzz(func(t *testing.T, declared string, body []byte, max int64) {
		if max < 0 || max > 1<<20 {
			t.Skip()
		}
		rb := newBuffer(nil, max)
		if declared != "" {
			rb.Header().Set("Content-Length", declared)
		}
		rb.WriteHeader(http.StatusOK)
		half := len(body) / 2
		rb.Write(body[:half])
		rb.Write(body[half:])
		if int64(len(rb.Body())) > max {
			t.Fatalf("kept %d bytes over a limit of %d", len(rb.Body()), max)
		}
		if !rb.TooLarge() && !bytes.Equal(rb.Body(), body) {
			t.Fatalf("body changed: %q, want %q", rb.Body(), body)
		}
		if int64(len(body)) > max && !rb.TooLarge() {
			t.Fatalf("%d bytes over a limit of %d not marked too large", len(body), max)
		}
	})
}
