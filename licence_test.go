package servicegate

import (
	"os"
	"strings"
	"testing"
)

// TestLicence checks that the LICENSE file holds the Apache License 2.0
// in full and that the README names it, so that a user can tell whether
// they may use servicegate.
func TestLicence(t *testing.T) {
	text, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Apache License\n                           Version 2.0, January 2004",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
		"9. Accepting Warranty or Additional Liability.",
		"END OF TERMS AND CONDITIONS",
	} {
		if !strings.Contains(string(text), want) {
			t.Errorf("LICENSE lacks %q: it is not the full Apache License 2.0", want)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "[Apache License 2.0](LICENSE)") {
		t.Error("README.md does not name the licence with a link to LICENSE")
	}
}
