package caddymodule

import (
	"context"
	"encoding/json"

	"github.com/servicegate/servicegate/cli/conformance"
	"github.com/servicegate/servicegate/emulator"
)

// emulatorConformance runs the cases the console's Conformance section
// asks for, with the conformance run of caddy service-app conformance:
// the emulator and the run meet here, in the glue, so that neither
// package depends on the other's caller.
func emulatorConformance(ctx context.Context, run emulator.ConformanceRun, onCase func(json.RawMessage)) (json.RawMessage, error) {
	o := conformance.Options{
		App: run.App, Secret: run.Secret, Only: run.Only, Timeout: run.Timeout, Emulator: run.Emulator,
		Domain: run.Organization, OrganizationID: run.OrganizationID, Client: run.Client,
		OnCase: func(r conformance.Result) {
			if b, err := json.Marshal(r); err == nil {
				onCase(b)
			}
		},
	}
	for _, f := range run.Files {
		o.Sources = append(o.Sources, conformance.Source{Module: f.Module, Name: f.Name, Content: f.Content})
	}
	rep, err := conformance.Run(ctx, o)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rep)
}
