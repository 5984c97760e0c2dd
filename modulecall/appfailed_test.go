package modulecall

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/contract"
)

// parseFileJob is a parse-file job the contract accepts.
const parseFileJob = `{"jobType":"parse-file","organization":{"id":1},"project":{"id":2},"file":{"id":3,"name":"a.kv","content":"YQ=="},` +
	`"sourceLanguage":{"id":"en","pluralCategoryNames":["one","other"]},"targetLanguages":[{"id":"uk","pluralCategoryNames":["one","few","many","other"]}]}`

// TestAppFailureNamedByStatus: a job the app answers with a status other
// than 2xx and no error.message of its own is answered 502 naming the
// status, none of its body; an answer with error.message passes with its
// status; a 2xx that is not JSON is a contract breach; in mode report the
// failure passes as the app sent it.
func TestAppFailureNamedByStatus(t *testing.T) {
	tests := []struct {
		name, mode  string
		status      int
		body        string
		wantStatus  int
		wantMessage string // the refusal's message; "" when the app's answer passes
		wantOutcome Outcome
	}{
		{"500 with a traceback", "", 500, "Traceback: secret-of-the-app", 502, "The app failed to process the file: it answered 500.", AppFailed},
		{"404 as JSON without a message", "", 404, `{"detail":"not found"}`, 502, "The app failed to process the file: it answered 404.", AppFailed},
		{"503 with an empty error.message object", "", 503, `{"error":{}}`, 502, "The app failed to process the file: it answered 503.", AppFailed},
		{"422 with error.message", "", 422, `{"error":{"message":"No key = value lines."}}`, 422, "", OK},
		{"2xx not JSON", "", 200, "<html>", 502, "The app's answer to a parse-file job breaks the service's contract: it is not a JSON object. Contact the app's developer.", ContractViolation},
		{"500 in mode report", ModeReport, 500, "Traceback", 500, "", OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outcomes []Outcome
			h := newTestHandler(t, HandlerConfig{Contract: contract.CustomFileFormat, Mode: tt.mode, Report: func(o Outcome) { outcomes = append(outcomes, o) }})
			defer h.Close()
			app := handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(tt.status)
				_, err := io.WriteString(w, tt.body)
				return err
			})
			rec := httptest.NewRecorder()
			if err := h.Serve(rec, httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader(parseFileJob)), app); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.wantStatus || len(outcomes) != 1 || outcomes[0] != tt.wantOutcome {
				t.Fatalf("%d %q, outcomes %v; want %d and %v", rec.Code, rec.Body, outcomes, tt.wantStatus, tt.wantOutcome)
			}
			if tt.wantMessage == "" {
				if rec.Body.String() != tt.body {
					t.Errorf("the app's answer did not pass: %q", rec.Body)
				}
				return
			}
			var out struct{ Error struct{ Message string } }
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error.Message != tt.wantMessage {
				t.Errorf("%q, want the message %q", rec.Body, tt.wantMessage)
			}
		})
	}
}

// TestTimeoutNamesItsSource: the 504 names the service's 2 minutes only
// when that is the limit in force, else the module's own timeout.
func TestTimeoutNamesItsSource(t *testing.T) {
	if got := newTestHandler(t, HandlerConfig{}).timeoutSource(); got != "the most the service waits" {
		t.Errorf("default: %q", got)
	}
	if got := newTestHandler(t, HandlerConfig{Timeout: DefaultTimeout + 1}).timeoutSource(); got != "the `timeout` of this module" {
		t.Errorf("set: %q", got)
	}
}
