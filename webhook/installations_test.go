package webhook

import (
	"net/http"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/signature"
)

// installed is an Installations of fixed organizations.
type installed map[string]struct{ id, domain, secret string }

func (in installed) Installation(domain, id string) (*signature.Verifier, string, string, bool) {
	for _, o := range in {
		if (domain != "" && o.domain == domain) || (domain == "" && o.id == id) {
			v, _ := signature.NewVerifier(o.secret)
			return v, o.id, o.domain, true
		}
	}
	return nil, "", "", false
}

func TestCheckerInstallations(t *testing.T) {
	orgs := installed{
		"acme":   {"42", "acme.example", "secret-of-acme"},
		"globex": {"43", "globex.example", "secret-of-globex"},
		"plain":  {"44", "", "secret-of-plain"},
	}
	appWide, _ := signature.NewVerifier("app-wide")
	tests := []struct {
		name, domain, id, secret string
		appWide                  bool
		status                   int // 0: passes
		message                  string
	}{
		{"its own secret, by domain", "acme.example", "", "secret-of-acme", false, 0, ""},
		{"its own secret, by domain and id", "acme.example", "42", "secret-of-acme", false, 0, ""},
		{"its own secret, by id", "", "44", "secret-of-plain", false, 0, ""},
		{"another organization's secret", "acme.example", "42", "secret-of-globex", false, http.StatusUnauthorized, "does not match"},
		{"the id of another organization", "acme.example", "43", "secret-of-acme", false, http.StatusForbidden, "different organizations"},
		{"no installation", "initech.example", "45", "secret-of-acme", false, http.StatusForbidden, "not installed"},
		{"no organization named", "", "", "secret-of-acme", false, http.StatusForbidden, "not installed"},
		{"an id sent as the domain", "42", "", "secret-of-acme", false, http.StatusForbidden, "not installed"},
		{"a domain sent as the id", "", "acme.example", "secret-of-acme", false, http.StatusForbidden, "not installed"},
		{"no installation, app-wide secrets", "initech.example", "", "app-wide", true, 0, ""},
		{"an installation wins over app-wide secrets", "acme.example", "", "app-wide", true, http.StatusUnauthorized, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Checker{Installations: orgs}
			if tt.appWide {
				c.AppWide = appWide
			}
			_, refusal := checkDelivery(c, tt.secret, tt.domain, tt.id)
			switch {
			case tt.status == 0 && refusal != nil:
				t.Fatalf("refused %d: %s", refusal.Status, refusal.Message)
			case tt.status != 0 && (refusal == nil || refusal.Status != tt.status || !strings.Contains(refusal.Message, tt.message)):
				t.Fatalf("got %+v, want %d %q", refusal, tt.status, tt.message)
			}
		})
	}
}

// unreadableToo is installed, with organizations whose records do not
// open, named by id or by domain.
type unreadableToo struct {
	installed
	ids, domains map[string]bool
}

func (u unreadableToo) Unreadable(domain, id string) bool { return u.ids[id] || u.domains[domain] }

// TestCheckerInstallationsUnreadableOrNamedByEither: an organization whose
// record does not open gets 503 however the delivery names it and
// whatever the app-wide secrets say; an installed one named by either
// header is verified with its installation's secret only.
func TestCheckerInstallationsUnreadableOrNamedByEither(t *testing.T) {
	orgs := unreadableToo{
		installed: installed{"acme": {"42", "acme.example", "secret-of-acme"}},
		ids:       map[string]bool{"43": true},
		domains:   map[string]bool{"globex.example": true},
	}
	appWide, _ := signature.NewVerifier("app-wide")
	for _, tt := range []struct {
		name, domain, id, secret string
		status                   int // 0: passes
	}{
		{"unreadable by id, app-wide secret", "", "43", "app-wide", http.StatusServiceUnavailable},
		{"unreadable by domain, app-wide secret", "globex.example", "", "app-wide", http.StatusServiceUnavailable},
		{"unreadable by both", "globex.example", "43", "secret-of-globex", http.StatusServiceUnavailable},
		{"unreadable id beside an installed domain", "acme.example", "43", "secret-of-acme", http.StatusServiceUnavailable},
		{"installed by id, unknown domain, app-wide secret", "initech.example", "42", "app-wide", http.StatusUnauthorized},
		{"installed by id, unknown domain, its own secret", "initech.example", "42", "secret-of-acme", http.StatusForbidden},
		{"installed by id alone, app-wide secret", "", "42", "app-wide", http.StatusUnauthorized},
		{"no installation, app-wide secret", "initech.example", "45", "app-wide", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Checker{Installations: orgs, AppWide: appWide}
			_, refusal := checkDelivery(c, tt.secret, tt.domain, tt.id)
			switch {
			case tt.status == 0 && refusal != nil:
				t.Fatalf("refused %d: %s", refusal.Status, refusal.Message)
			case tt.status != 0 && (refusal == nil || refusal.Status != tt.status):
				t.Fatalf("got %+v, want %d", refusal, tt.status)
			}
		})
	}
}
