package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestCLIReferenceIsGenerated fails when docs/reference/cli.md is not what
// the registered commands' flag definitions generate.
func TestCLIReferenceIsGenerated(t *testing.T) {
	want := CLIReference()
	got, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatalf("%v: write it with go run ./internal/gendocs", err)
	}
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range wantLines {
			if i >= len(gotLines) || gotLines[i] != wantLines[i] {
				have := "(the page ends)"
				if i < len(gotLines) {
					have = gotLines[i]
				}
				t.Fatalf("%s is not what the commands' flag definitions generate; run go run ./internal/gendocs from the repository's root.\nline %d: %s\nwant:    %s", page, i+1, have, wantLines[i])
			}
		}
		t.Fatalf("%s has lines after what the commands generate; run go run ./internal/gendocs from the repository's root", page)
	}
}

// TestCLIReferenceHasEveryCommand checks that the reference holds every
// servicegate command and subcommand, each flag of them in a table row.
func TestCLIReferenceHasEveryCommand(t *testing.T) {
	ref := string(CLIReference())
	for _, want := range []string{
		"## caddy service-token", "## caddy service-webhook", "## caddy service-app",
		"### caddy service-app check", "### caddy service-app send", "### caddy service-app install",
		"### caddy service-app deliver", "| `--tamper` |", "| `--secret-env` |",
		"Synopsis: `caddy service-app check <descriptor>`",
	} {
		if !strings.Contains(ref, want) {
			t.Errorf("the CLI reference lacks %q", want)
		}
	}
}
