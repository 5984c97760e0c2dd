package caddymodule

import (
	"errors"
	"fmt"

	"github.com/servicegate/servicegate/contract"
	"github.com/servicegate/servicegate/modulecall"
)

// validateContract checks the contract options of l.
func (l *ServiceLimits) validateContract() error {
	switch l.Contract {
	case "", contract.CustomFileFormat, contract.FilePreExport:
	default:
		return fmt.Errorf("service_limits: contract must be %s or %s, got %q", contract.CustomFileFormat, contract.FilePreExport, l.Contract)
	}
	switch l.Mode {
	case "", modulecall.ModeEnforce, modulecall.ModeReport:
	default:
		return fmt.Errorf("service_limits: mode must be %s or %s, got %q", modulecall.ModeEnforce, modulecall.ModeReport, l.Mode)
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
