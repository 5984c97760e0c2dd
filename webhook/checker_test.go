package webhook

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/servicegate/servicegate/signature"
)

func newChecker(t *testing.T) *Checker {
	t.Helper()
	file := filepath.Join(t.TempDir(), "secrets.json")
	writeFile(t, file, `{"a.example":"secret-a","1":"secret-a","b.example":"secret-b","2":"secret-b","c.example":"secret-c"}`)
	f, err := OpenSecretsFile(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	appWide, err := signature.NewVerifier("app-wide")
	if err != nil {
		t.Fatal(err)
	}
	return &Checker{AppWide: appWide, File: f}
}

// TestCheckerOrganizationHeaders covers issue 13 #4: the organization
// headers that reach the app are those the signature vouches for.
func TestCheckerOrganizationHeaders(t *testing.T) {
	c := newChecker(t)
	const gone = "-"
	tests := []struct {
		name, domain, id, secret string
		status                   int    // 0: passes
		appDomain, appID         string // what is left; gone: removed
	}{
		{"same organization", "a.example", "1", "secret-a", 0, "a.example", "1"},
		{"A's secret, A's domain, B's id", "a.example", "2", "secret-a", http.StatusForbidden, "", ""},
		{"B's secret, A's domain, B's id", "a.example", "2", "secret-b", http.StatusUnauthorized, "", ""},
		{"A's secret, B's id alone", "", "2", "secret-a", http.StatusUnauthorized, "", ""},
		{"C's domain, an id the file does not list", "c.example", "3", "secret-c", 0, "c.example", gone},
		{"C's domain, B's id", "c.example", "2", "secret-c", http.StatusForbidden, "", ""},
		{"an unlisted domain, B's id, app-wide secret", "d.example", "2", "app-wide", 0, "d.example", gone},
		{"an unlisted domain and id, app-wide secret", "d.example", "3", "app-wide", 0, "d.example", "3"},
		{"B's id alone", "", "2", "secret-b", 0, "", "2"},
		{"empty domain, B's id", "", "2", "secret-b", 0, "", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, refusal := checkDelivery(c, tt.secret, tt.domain, tt.id)
			switch {
			case tt.status == 0 && refusal != nil:
				t.Fatalf("refused %d: %s", refusal.Status, refusal.Message)
			case tt.status != 0 && (refusal == nil || refusal.Status != tt.status):
				t.Fatalf("got %+v, want status %d", refusal, tt.status)
			case tt.status != 0:
				return
			}
			for header, want := range map[string]string{HeaderDomain: tt.appDomain, HeaderOrgID: tt.appID} {
				got, present := h[header]
				if want == gone || want == "" {
					if present {
						t.Errorf("%s %q reaches the app", header, got)
					}
				} else if len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want %q", header, got, want)
				}
			}
		})
	}
}

// checkDelivery runs c's header and body checks on the test delivery
// signed with secret, from the organization of domain and id (each header
// left out when empty), and returns the headers as the checks left them.
func checkDelivery(c *Checker, secret, domain, id string) (http.Header, *Refusal) {
	h := http.Header{HeaderSignature: {hmacHex(secret, delivery)}}
	if domain != "" {
		h.Set(HeaderDomain, domain)
	}
	if id != "" {
		h.Set(HeaderOrgID, id)
	}
	d, refusal := c.CheckHeaders(h)
	if refusal == nil {
		refusal = c.CheckBody(&d, h, delivery)
	}
	return h, refusal
}

func TestCheckerRefusals(t *testing.T) {
	appWide, _ := signature.NewVerifier("app-wide")
	c := &Checker{AppWide: appWide, ModuleKeys: []string{"events-hook"}, Events: NewEvents("project.translated", "project.approved")}
	sig := hmacHex("app-wide", delivery)
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		status int
		reason Reason
	}{
		{"passes", http.Header{HeaderSignature: {sig}, HeaderModuleKey: {"events-hook"}}, delivery, 0, 0},
		{"no signature", http.Header{}, delivery, 401, ReasonMissingSignature},
		{"empty signature", http.Header{HeaderSignature: {" "}}, delivery, 401, ReasonMissingSignature},
		{"malformed", http.Header{HeaderSignature: {"abc"}}, delivery, 401, ReasonBadSignature},
		{"two signatures", http.Header{HeaderSignature: {sig, sig}}, delivery, 401, ReasonBadSignature},
		{"two domains", http.Header{HeaderSignature: {sig}, HeaderDomain: {"a", "b"}}, delivery, 401, ReasonBadSignature},
		{"mismatch", http.Header{HeaderSignature: {hmacHex("guess", delivery)}, HeaderModuleKey: {"events-hook"}}, delivery, 401, ReasonBadSignature},
		{"module key", http.Header{HeaderSignature: {sig}, HeaderModuleKey: {"other"}}, delivery, 403, ReasonForbidden},
		{"key case", http.Header{HeaderSignature: {hmacHex("app-wide", []byte(`{"events":[{"event":"project.translated"}],"EVENTS":[{"event":"project.deleted"}]}`))}, HeaderModuleKey: {"events-hook"}},
			[]byte(`{"events":[{"event":"project.translated"}],"EVENTS":[{"event":"project.deleted"}]}`), 400, ReasonBadBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, refusal := c.CheckHeaders(tt.header)
			if refusal == nil {
				refusal = c.CheckBody(&d, tt.header, tt.body)
			}
			if tt.status == 0 {
				if refusal != nil {
					t.Fatalf("refused: %s", refusal.Message)
				}
				return
			}
			if refusal == nil || refusal.Status != tt.status || refusal.Reason != tt.reason || refusal.Message == "" {
				t.Fatalf("got %+v, want %d reason %d", refusal, tt.status, tt.reason)
			}
		})
	}
}

func TestCheckerAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	c := newChecker(t)
	c.Events = allowed
	h := http.Header{HeaderSignature: {hmacHex("secret-a", delivery)}, HeaderDomain: {"a.example"}, HeaderOrgID: {"1"}}
	if n := testing.AllocsPerRun(100, func() {
		d, refusal := c.CheckHeaders(h)
		if refusal == nil {
			refusal = c.CheckBody(&d, h, delivery)
		}
		if refusal != nil {
			t.Fatal(refusal)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per delivery, want 0", n)
	}
}
