package cli

import (
	"bytes"
	"testing"
)

// TestSendToAppRefusesUnknownOnly: Only is events, jobs or empty; any
// other value is refused before anything is read or sent.
func TestSendToAppRefusesUnknownOnly(t *testing.T) {
	var out bytes.Buffer
	ok, err := SendToApp(SendOptions{Descriptor: "/nonexistent/manifest.json", App: "http://127.0.0.1:1", Only: "both"}, &out)
	if ok || err == nil || err.Error() != `--only takes events or jobs, not "both"` || out.Len() != 0 {
		t.Fatalf("ok %v, err %v, out %q", ok, err, out.String())
	}
}
