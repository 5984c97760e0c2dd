package descriptor

import (
	"strings"
	"testing"
)

func TestParseEvents(t *testing.T) {
	const webhook = `"modules":{"webhook":[{"key":"hook","url":"/webhooks","events":["file.added"]}]}`
	cases := []struct {
		name, doc string
		want      Events
		defect    string
	}{
		{"all three", `{"events":{"installed":"/installed","uninstall":"/uninstall","subscription_paid":"/subscription-paid"}}`,
			Events{Installed: "/installed", Uninstall: "/uninstall", SubscriptionPaid: "/subscription-paid"}, ""},
		{"one, with a query", `{"events":{"installed":"/lifecycle/installed?v=1"}}`, Events{}, `has a query`},
		{"null", `{"events":null}`, Events{}, ""},
		{"not an object", `{"events":["/installed"]}`, Events{}, "events is not an object"},
		{"unknown event", `{"events":{"installed":"/i","deleted":"/d"}}`, Events{}, `events.deleted is not a lifecycle event`},
		{"an event a letter off", `{"events":{"instaled":"/i"}}`, Events{}, `events.instaled is not a lifecycle event of the service; did you mean "installed"?`},
		{"absolute", `{"events":{"installed":"https://app.example/installed"}}`, Events{}, "is absolute"},
		{"not a string", `{"events":{"installed":5}}`, Events{}, "events: installed is not a string"},
		{"a module's url", `{` + webhook + `,"events":{"installed":"/webhooks"}}`, Events{}, `also the url of module "hook"`},
		{"twice", `{"events":{"installed":"/x","uninstall":"/x"}}`, Events{}, "also the path of events.installed"},
		{"a module's url in another spelling", `{` + webhook + `,"events":{"installed":"/WebHooks"}}`, Events{}, `also the url of module "hook"`},
		{"twice in another case", `{"events":{"installed":"/x","uninstall":"/X"}}`, Events{}, "also the path of events.installed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Every document names the app: a JSON object without an
			// identifier or modules is no descriptor.
			d, err := Parse("app.json", []byte(`{"identifier":"app",`+c.doc[1:]))
			if c.defect != "" {
				if err == nil || !strings.Contains(err.Error(), c.defect) {
					t.Fatalf("err = %v, want %q", err, c.defect)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Events != c.want || d.Events.Any() != (c.want != Events{}) {
				t.Fatalf("events = %+v", d.Events)
			}
		})
	}
}
