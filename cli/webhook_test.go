package cli

import (
	"encoding/json"
	"testing"
)

func TestTamperKeepsJSONValid(t *testing.T) {
	in := []byte(`{"events":[{"event":"project.translated","project":{"id":"1"},"targetLanguage":{"id":"uk"}}]}`)
	out := tamper(in)
	diff := 0
	for i := range in {
		if in[i] != out[i] {
			diff++
		}
	}
	if diff != 1 || !json.Valid(out) {
		t.Fatalf("tampered %s: %d bytes differ", out, diff)
	}
	if got := tamper([]byte("{}")); string(got) != "{|" {
		t.Fatalf("without letters: %q", got)
	}
}
