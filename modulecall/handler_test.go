package modulecall

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/limits"
	"github.com/servicegate/servicegate/limits/limitstest"
)

// newTestHandler is a Handler of cfg that returns the error of a request
// without an answer with its status, as caddyhttp.Error does.
func newTestHandler(t testing.TB, cfg HandlerConfig) *Handler {
	t.Helper()
	cfg.Fail = func(status int, err error) error { return statusError{status, err} }
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// statusError is an error answered with a status, as caddyhttp.Error.
type statusError struct {
	status int
	err    error
}

func (e statusError) Error() string { return e.err.Error() }

// handlerFunc is a function used as a Next.
type handlerFunc func(http.ResponseWriter, *http.Request) error

func (f handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) error { return f(w, r) }

// The Handler keeps large answers in mappings while it checks them and
// gives them back once they are sent, dropped for a refusal, or cut off by
// a panic: the pooled answer buffers never keep one.
func TestAnswerMappingsGivenBack(t *testing.T) {
	const size = 3 << 20
	answer := bytes.Repeat([]byte("a"), size)
	limitstest.MappingsBack(t, 0) // what earlier tests left is given back first
	before := limits.MappingsInUse()
	l := newTestHandler(t, HandlerConfig{})
	tests := []struct {
		name   string
		status int
		next   func(w http.ResponseWriter) error
	}{
		{"sent", http.StatusOK, func(w http.ResponseWriter) error {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			_, err := w.Write(answer)
			return err
		}},
		{"sent, length unknown", http.StatusOK, func(w http.ResponseWriter) error {
			for p := answer; len(p) > 0; p = p[32<<10:] {
				if _, err := w.Write(p[:32<<10]); err != nil {
					return err
				}
			}
			return nil
		}},
		{"cut off", http.StatusBadGateway, func(w http.ResponseWriter) error {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			_, _ = w.Write(answer[:size/2])
			panic(http.ErrAbortHandler) // as reverse_proxy does
		}},
		{"failed", http.StatusBadGateway, func(w http.ResponseWriter) error {
			_, _ = w.Write(answer[:size/2])
			return statusError{http.StatusBadGateway, io.ErrUnexpectedEOF}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inHandler := int64(-1)
			next := handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				defer func() { inHandler = limits.MappingsInUse() }()
				return tt.next(w)
			})
			rec := httptest.NewRecorder()
			err := l.Serve(rec, httptest.NewRequest(http.MethodPost, "/file-format", bytes.NewReader([]byte("{}"))), next)
			status := rec.Code
			if err != nil {
				status = err.(statusError).status
			}
			if status != tt.status {
				t.Fatalf("status %d, want %d", status, tt.status)
			}
			if tt.status == http.StatusOK && !bytes.Equal(rec.Body.Bytes(), answer) {
				t.Fatalf("the client got %d bytes, want the %d the app sent", rec.Body.Len(), size)
			}
			if inHandler != before+1 {
				t.Errorf("%d mapped buffers while the app answered, want %d", inHandler, before+1)
			}
			if n := limits.MappingsInUse(); n != before {
				t.Errorf("%d mapped buffers in use after the answer, want %d", n, before)
			}
			rb := responseBuffers.Get().(*limits.ResponseBuffer)
			defer responseBuffers.Put(rb)
			if c := cap(rb.Body()); c > limits.MaxPooled {
				t.Errorf("a pooled answer buffer holds %d bytes", c)
			}
		})
	}
	// A panic other than http.ErrAbortHandler goes on; the answer's
	// mapping is given back on the way.
	func() {
		defer func() {
			if v := recover(); v != "app bug" {
				t.Errorf("recovered %v, want the app's panic", v)
			}
		}()
		_ = l.Serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/file-format", nil),
			handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				_, _ = w.Write(answer)
				panic("app bug")
			}))
	}()
	if n := limits.MappingsInUse(); n != before {
		t.Errorf("%d mapped buffers in use after a panic, want %d", n, before)
	}
}

// TestHandlerDefaults: a Handler of the zero config holds a Go app's
// handler to the service's limits, answers with respond.Error, and reports
// each outcome.
func TestHandlerDefaults(t *testing.T) {
	var outcomes []Outcome
	h, err := NewHandler(HandlerConfig{Report: func(o Outcome) { outcomes = append(outcomes, o) }})
	if err != nil {
		t.Fatal(err)
	}
	app := handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		_, err := io.Copy(w, r.Body)
		return err
	})
	rec := httptest.NewRecorder()
	if err := h.Serve(rec, httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader("{}")), app); err != nil || rec.Code != 200 || rec.Body.String() != "{}" {
		t.Errorf("within the limits: %v %d %q", err, rec.Code, rec.Body)
	}
	req := httptest.NewRequest(http.MethodPost, "/file-format", nil)
	req.ContentLength = DefaultMaxSize + 1
	rec = httptest.NewRecorder()
	if err := h.Serve(rec, req, app); err != nil || rec.Code != 413 || !strings.Contains(rec.Body.String(), `{"error":{"message":"The file is too large for this app: the request is 5.1 MB`) {
		t.Errorf("over the limit: %v %d %q", err, rec.Code, rec.Body)
	}
	if len(outcomes) != 2 || outcomes[0] != OK || outcomes[1] != RequestTooLarge {
		t.Errorf("outcomes %v", outcomes)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
}
