package installations

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const installedBody = `{"appId":"demo-app","appSecret":"s3cret-of-the-installation","clientId":"client-1","userId":7,` +
	`"organizationId":42,"domain":"acme","baseUrl":"https://acme.service.example","code":"one-time-code"}`

func TestParseEvent(t *testing.T) {
	cases := []struct {
		name string
		kind Kind
		body string
		want string // error substring; empty: parses
	}{
		{"installed", Installed, installedBody, ""},
		{"installed standard edition", Installed, `{"appId":"a","appSecret":"s","clientId":"c","userId":"7","organizationId":"42","domain":null,"baseUrl":"https://x"}`, ""},
		{"installed without secret", Installed, `{"appId":"a","clientId":"c","userId":7,"organizationId":42,"domain":"d","baseUrl":"https://x"}`, "lacks appSecret"},
		{"installed empty secret", Installed, `{"appId":"a","appSecret":"","clientId":"c","userId":7,"organizationId":42,"domain":"d","baseUrl":"https://x"}`, "appSecret is empty"},
		{"installed without user", Installed, `{"appId":"a","appSecret":"s","clientId":"c","organizationId":42,"domain":"d","baseUrl":"https://x"}`, "lacks userId"},
		{"organization is an object", Installed, `{"appId":"a","appSecret":"s","clientId":"c","userId":7,"organizationId":{},"domain":"d","baseUrl":"https://x"}`, "organizationId is neither"},
		{"organization not an integer", Installed, `{"appId":"a","appSecret":"s","clientId":"c","userId":7,"organizationId":4.2,"domain":"d","baseUrl":"https://x"}`, "not an integer"},
		{"secret a number", Installed, `{"appId":"a","appSecret":5,"clientId":"c","userId":7,"organizationId":42,"domain":"d","baseUrl":"https://x"}`, "appSecret is not a string"},
		{"control character", Installed, `{"appId":"a","appSecret":"s","clientId":"c","userId":7,"organizationId":"4\n2","domain":"d","baseUrl":"https://x"}`, "control character"},
		{"not an object", Installed, `[1]`, "not a JSON object"},
		{"null", Installed, `null`, "not a JSON object"},
		{"uninstall", Uninstall, `{"appId":"a","appSecret":"s","clientId":"c","organizationId":42,"domain":"d","baseUrl":"https://x"}`, ""},
		{"uninstall without client", Uninstall, `{"appId":"a","appSecret":"s","organizationId":42,"domain":"d","baseUrl":"https://x"}`, "lacks clientId"},
		{"paid", SubscriptionPaid, `{"appId":"a","organizationId":42,"domain":"d"}`, ""},
		{"paid without organization", SubscriptionPaid, `{"appId":"a","domain":"d"}`, "lacks organizationId"},
		{"paid without domain", SubscriptionPaid, `{"appId":"a","organizationId":42}`, "lacks domain"},
		{"long field", SubscriptionPaid, `{"appId":"` + strings.Repeat("a", 3000) + `","organizationId":42,"domain":"d"}`, "longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := ParseEvent(c.kind, []byte(c.body))
			if c.want == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if ev.OrganizationID != "42" {
					t.Errorf("organization = %q", ev.OrganizationID)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error quotes a value: %v", err)
			}
		})
	}
}

func TestParseEventRefusesAmbiguousKeys(t *testing.T) {
	base := `"appId":"a","appSecret":"s","clientId":"c","userId":7,"organizationId":42,"domain":"d","baseUrl":"https://x"`
	for _, c := range []struct{ name, body, want string }{
		{"a field in another case", `{"organizationid":43,` + base + `}`, "keys differ by case"},
		{"a field in another case alone", `{"appId":"a","appSecret":"s","clientId":"c","userId":7,"OrganizationId":42,"domain":"d","baseUrl":"https://x"}`, "keys differ by case"},
		{"a field twice", `{` + base + `,"organizationId":43}`, "names \"organizationId\" twice"},
		{"another key twice", `{"x":1,` + base + `,"x":2}`, "twice"},
		{"another key in two cases", `{"xY":1,` + base + `,"Xy":2}`, "differ only by case"},
		{"a secret given twice", `{` + base + `,"appSecret":"t"}`, "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEvent(Installed, []byte(c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	// Unknown members are ignored.
	if _, err := ParseEvent(Installed, []byte(`{"extra":{"k":[1]},`+base+`}`)); err != nil {
		t.Fatal(err)
	}
}

func TestToldIsWrittenFromTheInstallation(t *testing.T) {
	in := &Installation{OrganizationID: "42", Domain: `ac"me`, BaseURL: "https://service.example", AppID: "demo-app",
		AppSecret: "s3cret", UserID: "7", InstalledAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Token: Token{AccessToken: "app-token"}}
	for _, k := range []Kind{Installed, Uninstall, SubscriptionPaid} {
		out := told(k, "client-1", in, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: %v: %s", k, err, out)
		}
		if m["event"] != k.String() || m["organizationId"] != float64(42) || m["domain"] != `ac"me` || m["clientId"] != "client-1" {
			t.Errorf("%s: %s", k, out)
		}
		if strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "app-token") {
			t.Errorf("%s tells a secret: %s", k, out)
		}
	}
	in.Domain = ""
	if out := told(Uninstall, "c", in, time.Time{}); !strings.Contains(string(out), `"domain":null`) {
		t.Errorf("standard edition: %s", out)
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add(0, []byte(installedBody))
	f.Add(1, []byte(`{"appId":"a","appSecret":"s","clientId":"c","organizationId":42,"domain":null,"baseUrl":"https://x"}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","domain":"d"}`))
	f.Add(0, []byte(`{"organizationId":-0}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","domain":"d","organizationid":"43"}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","domain":"d","domain":"e"}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","Domain":"e"}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","domain":"d","x":{"organizationId":1}}`))
	f.Fuzz(func(t *testing.T, kind int, body []byte) {
		k := Kind(kind % int(NumKinds))
		if k < 0 {
			k = -k
		}
		ev, err := ParseEvent(k, body)
		if err != nil {
			return
		}
		if ev.OrganizationID == "" || ev.AppID == "" {
			t.Fatalf("parsed without an organization or app: %+v", ev)
		}
		// Go's decoder matches keys in any case and keeps the last: it
		// must read what the parser read.
		var std struct {
			OrganizationID json.RawMessage `json:"organizationId"`
			Domain         json.RawMessage `json:"domain"`
		}
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatalf("parsed a body encoding/json refuses: %v", err)
		}
		if got, _ := readField(std.OrganizationID, true, false); got != ev.OrganizationID {
			t.Fatalf("encoding/json reads organization %q, the parser %q", got, ev.OrganizationID)
		}
		if std.Domain != nil {
			if got, _ := readField(std.Domain, false, true); got != ev.Domain {
				t.Fatalf("encoding/json reads domain %q, the parser %q", got, ev.Domain)
			}
		}
		in := &Installation{OrganizationID: ev.OrganizationID, Domain: ev.Domain, AppID: ev.AppID, UserID: ev.UserID}
		if out := told(k, "client", in, time.Time{}); !json.Valid(out) {
			t.Fatalf("the body the app is told is not JSON: %q", out)
		}
	})
}
