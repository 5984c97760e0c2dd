package installations

import (
	"encoding/json"
	"strings"
	"testing"
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

func TestForwardedDropsSecrets(t *testing.T) {
	body := `{"appId":"a","appSecret":"first","clientId":"c","userId":7,"organizationId":42,"domain":"d",` +
		`"baseUrl":"https://x","code":"the-code","AppSecret":"variant","extra":{"k":1},"appSecret":"second"}`
	ev, err := ParseEvent(Installed, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out := ev.Forwarded()
	for _, secret := range []string{"first", "second", "variant", "the-code"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("the app is told %q: %s", secret, out)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m["organizationId"] != float64(42) || m["extra"] == nil || m["userId"] != float64(7) {
		t.Errorf("forwarded = %s", out)
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add(0, []byte(installedBody))
	f.Add(1, []byte(`{"appId":"a","appSecret":"s","clientId":"c","organizationId":42,"domain":null,"baseUrl":"https://x"}`))
	f.Add(2, []byte(`{"appId":"a","organizationId":"42","domain":"d"}`))
	f.Add(0, []byte(`{"organizationId":-0}`))
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
		out := ev.Forwarded()
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("the forwarded body is not JSON: %q", out)
		}
		for key := range m {
			if strings.EqualFold(key, "appSecret") || strings.EqualFold(key, "code") {
				t.Fatalf("the forwarded body keeps %q", key)
			}
		}
	})
}
