package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

// TestCheckDescriptorNamesNearMiss: a module kind a letter off one
// servicegate routes is printed as a likely defect, with the kind it is
// likely meant to be, and the check fails; another kind of the service is
// listed as routed behind the token, and passes.
func TestCheckDescriptorNamesNearMiss(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	slip := write("slip.json", `{"identifier":"app","modules":{"webhok":[{"key":"hook","url":"/webhooks"}]}}`)
	var out bytes.Buffer
	ok, err := CheckDescriptor(slip, &out)
	want := slip + `: 1 likely defect; app "app", 0 file format, 0 pre-export and 0 webhook modules, 1 other (webhok)
  likely defect: modules.webhok is not a module kind servicegate routes; did you mean "webhook"?`
	if ok || err != nil || !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "webhok             hook                 /webhooks  (token, like every other path)") {
		t.Errorf("ok %v, err %v\n%s\nwant it to start\n%s", ok, err, out.String(), want)
	}
	other := write("other.json", `{"identifier":"app","modules":{"file-pre-import":[{"key":"i","url":"/pre-import"}]}}`)
	out.Reset()
	ok, err = CheckDescriptor(other, &out)
	if !ok || err != nil || !strings.HasPrefix(out.String(), other+": no defects;") || strings.Contains(out.String(), "likely") {
		t.Errorf("another kind of the service: ok %v, err %v\n%s", ok, err, out.String())
	}
}
