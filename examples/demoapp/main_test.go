package main

import (
	"testing"

	"github.com/servicegate/servicegate/descriptor"
)

// TestManifestHasNoDefects: the descriptor the demo app serves is one
// service_app accepts, with the modules the walk-through calls.
func TestManifestHasNoDefects(t *testing.T) {
	d, err := descriptor.Parse("examples/demoapp/manifest.json", manifest)
	if err != nil {
		t.Fatal(err)
	}
	if d.Identifier != "demo-app" || len(d.FileFormats) != 4 || len(d.PreExports) != 1 || len(d.Webhooks) != 1 {
		t.Errorf("modules: %d file formats, %d pre-exports, %d webhooks", len(d.FileFormats), len(d.PreExports), len(d.Webhooks))
	}
}
