package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/limits"
)

// The modes of the contract check.
const (
	contractEnforce = "enforce" // a breach replaces the answer with a JSON error
	contractReport  = "report"  // a breach is logged, the answer passes
)

// validateContract checks the contract options of l.
func (l *ServiceLimits) validateContract() error {
	switch l.Contract {
	case "", contract.CustomFileFormat, contract.FilePreExport:
	default:
		return fmt.Errorf("service_limits: contract must be %s or %s, got %q", contract.CustomFileFormat, contract.FilePreExport, l.Contract)
	}
	switch l.Mode {
	case "", contractEnforce, contractReport:
	default:
		return fmt.Errorf("service_limits: mode must be %s or %s, got %q", contractEnforce, contractReport, l.Mode)
	}
	return nil
}

// requireContract refuses mode, spill and inline without a contract.
func (l *ServiceLimits) requireContract() error {
	if l.Mode != "" && l.Contract == "" {
		return errors.New("service_limits: mode needs contract")
	}
	if l.Spill != nil && l.Contract == "" {
		return errors.New("service_limits: spill needs contract, which tells what an answer carries")
	}
	if l.Inline != nil && l.Contract == "" {
		return errors.New("service_limits: inline needs contract, which tells what a job carries")
	}
	return nil
}

// parseJob reads the job the service sent. A malformed job is answered
// with 400 and never reaches the app (done is true, err is refuse's); in
// mode report it is logged and goes on unchecked (job is nil).
func (l *ServiceLimits) parseJob(w http.ResponseWriter, r *http.Request, body *limits.Body) (job *contract.Job, done bool, err error) {
	var raw []byte
	if body != nil {
		raw = body.Bytes()
	}
	job, err = contract.ParseJobBytes(l.Contract, raw)
	if err == nil {
		return job, false, nil
	}
	// The message names fields only; what it quotes of the job is left
	// out of the log.
	l.logger.Warn("module job breaks the contract", zap.String("path", r.URL.Path), zap.String("contract", l.Contract), zap.String("mode", l.mode()), zap.String("error", redactQuoted(err.Error())))
	if l.mode() == contractReport {
		return nil, false, nil
	}
	l.counts.inc(outcomeBadJob)
	return nil, true, refuse(w, r, http.StatusBadRequest, err.Error())
}

// checkAnswer checks the app's answer to job, logs a breach for the app's
// developer, and returns the message that replaces the answer, "" when the
// answer goes on (it keeps the contract, or the mode is report).
func (l *ServiceLimits) checkAnswer(r *http.Request, job *contract.Job, answer io.Reader) (contract.Answer, string) {
	ans, err := job.CheckAnswer(answer)
	if err == nil {
		return ans, ""
	}
	var b *contract.Breach
	if !errors.As(err, &b) {
		b = &contract.Breach{Job: job.Type, Rule: "it could not be read"}
	}
	// No body reaches a log: the string is named by its position, never
	// by its identifier, and what the rule quotes from the answer (a
	// language, a plural form) is left out.
	l.logger.Warn("app answer breaks the module contract",
		zap.String("path", r.URL.Path),
		zap.String("job_type", job.Type),
		zap.Int("string", b.Index),
		zap.String("rule", redactQuoted(b.Rule)),
		zap.String("mode", l.mode()))
	if l.mode() == contractReport {
		return ans, ""
	}
	return ans, b.Error()
}

// redactQuoted replaces each quoted string in s (as %q writes them) with
// "…".
func redactQuoted(s string) string {
	if !strings.Contains(s, `"`) {
		return s
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++ // an escaped character, perhaps a quote
		case c == '"':
			if quoted {
				b.WriteString(`"…"`)
			}
			quoted = !quoted
		case !quoted:
			b.WriteByte(c)
		}
	}
	if quoted {
		b.WriteString(`"…`) // an open quote runs to the end
	}
	return b.String()
}

func (l *ServiceLimits) mode() string {
	if l.Mode == "" {
		return contractEnforce
	}
	return l.Mode
}
