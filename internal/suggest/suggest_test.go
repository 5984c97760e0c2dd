package suggest

import "testing"

func TestNearest(t *testing.T) {
	subs := []string{"installations", "webhook", "client_secret", "client_id", "key", "store", "to", "id", "secret", "secrets_file"}
	kinds := []string{"custom-file-format", "file-pre-export", "webhook"}
	for _, tt := range []struct {
		word     string
		known    []string
		maxEdits int
		want     string
	}{
		{"instalations", subs, 2, "installations"}, // a letter left out
		{"webhok", subs, 2, "webhook"},
		{"client_secrt", subs, 2, "client_secret"},
		{"clinet_id", subs, 2, "client_id"},         // two neighbours swapped: one edit
		{"Client_Secret", subs, 2, "client_secret"}, // case only
		{"KEY", subs, 2, "key"},
		{"kye", subs, 2, "key"},
		{"ky", subs, 2, "key"},
		{"colour", subs, 2, ""},        // nothing near
		{"do", subs, 2, ""},            // a two-letter name takes no edit: "to" is not offered
		{"To", subs, 2, "to"},          // but its case is
		{"secrets", subs, 2, "secret"}, // the nearer of secret and secrets_file
		{"installations", subs, 2, ""}, // known: nothing to suggest
		{"webhok", kinds, 1, "webhook"},
		{"custom-file-formats", kinds, 1, "custom-file-format"},
		{"file-pre-import", kinds, 1, ""}, // two edits: another kind of the service, not a slip
		{"file-post-export", kinds, 1, ""},
		{"project-menu", kinds, 1, ""},
	} {
		if got := Nearest(tt.word, tt.known, tt.maxEdits); got != tt.want {
			t.Errorf("Nearest(%q, %d) = %q, want %q", tt.word, tt.maxEdits, got, tt.want)
		}
	}
}

func TestNearestTie(t *testing.T) {
	// "cat" is one edit from both: no guess is better than a wrong one.
	if got := Nearest("cat", []string{"bat", "car"}, 2); got != "" {
		t.Errorf("Nearest of a tie = %q, want none", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"ab", "ba", 1}, {"abcd", "acbd", 1}, {"ca", "abc", 3}, {"héllo", "hello", 1},
	} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
