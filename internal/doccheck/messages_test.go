package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// messagesSection is the generated part of the errors reference.
var messagesSection = regexp.MustCompile(`(?s)(<!-- messages -->\n)(.*?)(<!-- end messages -->)`)

// TestErrorsReference fails when docs/reference/errors.md does not list
// every answer the source writes with a status and a message side by side
// (see Messages), so that a new message is a row of the reference.
// go test ./internal/doccheck -run TestErrorsReference -update rewrites
// the list.
func TestErrorsReference(t *testing.T) {
	ms, err := Messages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 60 {
		t.Fatalf("found %d messages in the source, want at least 60", len(ms))
	}
	page := filepath.Join(root, "docs", "reference", "errors.md")
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	m := messagesSection.FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatalf("%s has no <!-- messages --> section", page)
	}
	want := MessagesTable(ms) + "\n"
	if m[2] == want {
		return
	}
	if *update {
		out := strings.Replace(string(raw), m[0], m[1]+want+m[3], 1)
		if err := os.WriteFile(page, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, line := range strings.Split(want, "\n") {
		if strings.HasPrefix(line, "| 4") || strings.HasPrefix(line, "| 5") {
			if !strings.Contains(m[2], line) {
				t.Errorf("%s lacks the answer %s", page, line)
			}
		}
	}
	t.Errorf("%s does not list the messages of the source as they are; run go test ./internal/doccheck -run TestErrorsReference -update", page)
}

// TestMessagesFindsRefusals holds the scanner to refusals of the kinds
// the source has.
func TestMessagesFindsRefusals(t *testing.T) {
	ms, err := Messages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		status int
		text   string
	}{
		{401, "The signature of the delivery does not match its body."},
		{413, "The file is too large for this app: the request is … and the app accepts at most …. Try a smaller file, or split it into several files."},
		{409, "The gateway holds another organization's installation under this domain; it is not replaced. Uninstall that one first."},
	} {
		found := false
		for _, m := range ms {
			found = found || m.Status == want.status && m.Text == want.text
		}
		if !found {
			t.Errorf("Messages did not find %d %q", want.status, want.text)
		}
	}
}
