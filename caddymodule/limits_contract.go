package caddymodule

import (
	"errors"
	"fmt"
	"strings"

	"github.com/servicegate/servicegate/contract"
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
