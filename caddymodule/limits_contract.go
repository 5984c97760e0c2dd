package caddymodule

import (
	"errors"
	"fmt"

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

// mode is the mode of the contract check, enforce unless set.
func (l *ServiceLimits) mode() string {
	if l.Mode == "" {
		return contractEnforce
	}
	return l.Mode
}
