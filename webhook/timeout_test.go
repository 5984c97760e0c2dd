package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/servicegate/servicegate/signature"
)

// TestHandlerTimeout: an app that has not begun to acknowledge a
// delivery within Timeout is given up on (its request's context ends) and
// the service gets 504 naming the limit; an app that began its answer in
// time is left to finish it.
func TestHandlerTimeout(t *testing.T) {
	v, err := signature.NewVerifier("app-wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		began      bool
		wantStatus int
		wantMsg    string
	}{
		{"silent", false, http.StatusGatewayTimeout, "The app did not acknowledge the delivery within 1ms, the `timeout` of this webhook module. Send it again later."},
		{"began in time", true, http.StatusAccepted, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHandler(HandlerConfig{Checker: &Checker{AppWide: v}, Timeout: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			next := nextFunc(func(w http.ResponseWriter, r *http.Request) error {
				if tt.began {
					w.WriteHeader(http.StatusAccepted)
				}
				<-r.Context().Done() // the app hangs until the handler gives it up
				return r.Context().Err()
			})
			req := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(delivery))
			req.Header.Set(HeaderSignature, hmacHex("app-wide", delivery))
			rec := httptest.NewRecorder()
			err = h.Serve(rec, req, next)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%d %q (%v), want %d", rec.Code, rec.Body, err, tt.wantStatus)
			}
			if tt.wantMsg == "" {
				return
			}
			var out struct{ Error struct{ Message string } }
			if err != nil || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.Error.Message != tt.wantMsg {
				t.Errorf("%q (%v), want the message %q", rec.Body, err, tt.wantMsg)
			}
		})
	}
	if h, _ := NewHandler(HandlerConfig{Checker: &Checker{AppWide: v}}); h.timeoutSource() != "servicegate's default for webhook deliveries" {
		t.Errorf("default: %q", h.timeoutSource())
	}
}
