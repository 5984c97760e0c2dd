package modulecall

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A breach is logged by its rule, the string's position and the job type:
// no identifier or other text of the answer reaches the log.
func TestContractBreachLogHoldsNoBodyText(t *testing.T) {
	job := `{"jobType":"parse-file","organization":{},"project":{},"file":{"content":""},"sourceLanguage":{},"targetLanguages":[{"id":"uk"}]}`
	tests := []struct {
		answer string
		index  int
		rule   string
	}{
		{`{"data":{"strings":[{"identifier":"ok","text":"A"},{"identifier":"secret-ident-42"}]}}`, 2, "has no text"},
		{`{"data":{"strings":[{"identifier":"secret-ident-42","text":"A","translations":{"Secret Launch Plan":{"text":"B"}}}]}}`, 1,
			`has a translation into "…", which is not a target language of the job`},
	}
	for _, tt := range tests {
		core, logs := observer.New(zapcore.DebugLevel)
		l := newTestHandler(t, HandlerConfig{Contract: "custom-file-format", Logger: zap.New(core)})
		rec := httptest.NewRecorder()
		err := l.Serve(rec, httptest.NewRequest(http.MethodPost, "/file-format", strings.NewReader(job)),
			handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				io.WriteString(w, tt.answer)
				return nil
			}))
		if err != nil || rec.Code != http.StatusBadGateway {
			t.Fatalf("%s: %v %d %s", tt.answer, err, rec.Code, rec.Body)
		}
		entries := logs.FilterMessage("app answer breaks the module contract").All()
		if len(entries) != 1 {
			t.Fatalf("%d breach lines logged, want 1", len(entries))
		}
		fields := entries[0].ContextMap()
		if fields["rule"] != tt.rule || fields["string"] != int64(tt.index) || fields["job_type"] != "parse-file" {
			t.Errorf("breach logged as %v, want rule %q, string %d, job_type parse-file", fields, tt.rule, tt.index)
		}
		var line strings.Builder
		for _, e := range logs.All() {
			line.WriteString(e.Message)
			for k, v := range e.ContextMap() {
				fmt.Fprintf(&line, " %s=%v", k, v)
			}
		}
		for _, secret := range []string{"secret-ident-42", "Secret Launch Plan", "Secret"} {
			if strings.Contains(line.String(), secret) {
				t.Errorf("the log holds %q from the answer: %s", secret, line.String())
			}
		}
	}
}
