package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var allowed = NewEvents("project.translated", "project.approved")

func TestEventsCheck(t *testing.T) {
	deep := `{"events":[{"event":"project.translated","x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}]}`
	tests := []struct {
		body string
		want error
	}{
		{string(delivery), nil},
		{`{"events":[{"event":"project.translated"}],"other":{"events":[{"event":"x"}]}}`, nil},
		{`{"events":[{"event":"project.\u0074ranslated"}]}`, nil},
		{`{"\u0065vents":[{"\u0065vent":"project.translated"}]}`, nil},
		{`{"events":[{"event":"project.deleted"}]}`, ErrEventNotAllowed},
		{`{"events":[{"event":"project.translated"},{"event":"project.deleted"}]}`, ErrEventNotAllowed},
		// Names read as encoding/json reads them: invalid UTF-8 is U+FFFD.
		{"{\"events\":[{\"event\":\"project.translated\xff\"}]}", ErrEventNotAllowed},
		// issue 13 #5: Go's encoding/json matches keys without regard to
		// case, so a Go app decodes project.deleted from this one.
		{`{"events":[{"event":"project.translated"}],"EVENTS":[{"event":"project.deleted"}]}`, ErrKeyCase},
		{`{"Events":[{"event":"project.translated"}]}`, ErrKeyCase},
		{`{"events":[{"event":"project.translated","Event":"project.deleted"}]}`, ErrKeyCase},
		{`{"events":[{"EVENT":"project.deleted","event":"project.translated"}]}`, ErrKeyCase},
		// U+017F folds to s, and encoding/json matches it to "events".
		{`{"events":[{"event":"project.translated"}],"eventſ":[{"event":"project.deleted"}]}`, ErrKeyCase},
		{`{"events":[{"event":"project.translated"}],"events":[]}`, ErrDuplicateKey},
		{`{"events":[{"event":"project.translated","event":"project.deleted"}]}`, ErrDuplicateKey},
		{``, ErrNotJSON},
		{`not json`, ErrNotJSON},
		{`{"events":[{"event":"project.translated"}]`, ErrNotJSON},
		{`{"events":[{"event":"project.translated"}]} x`, ErrNotJSON},
		{`[]`, ErrShape},
		{`{}`, ErrShape},
		{`{"events":null}`, ErrShape},
		{`{"events":[]}`, ErrShape},
		{`{"events":{}}`, ErrShape},
		{`{"events":[1]}`, ErrShape},
		{`{"events":[{}]}`, ErrShape},
		{`{"events":[{"event":1}]}`, ErrShape},
		{`{"events":[{"event":null}]}`, ErrShape},
		{deep, ErrTooDeep},
		{strings.Repeat("[", 100000), ErrTooDeep},
	}
	for _, tt := range tests {
		if err := allowed.Check([]byte(tt.body)); err != tt.want {
			t.Errorf("Check(%.60q) = %v, want %v", tt.body, err, tt.want)
		}
	}
}

func TestEventsCheckAllocatesNothing(t *testing.T) {
	body := []byte(`{"events":[{"event":"project.translated","project":{"id":"42","name":"caf\u00e9"}},{"event":"project.approved"}]}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := allowed.Check(body); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per check, want 0", n)
	}
}

// FuzzEvents feeds arbitrary bodies through the events check: never a
// panic, and a body passes only if a Go app decoding it (with
// encoding/json, which matches keys without regard to case) reads only
// allowed events.
func FuzzEvents(f *testing.F) {
	f.Add(delivery)
	f.Add([]byte(`{"events":[{"event":"project.translated"}]}`))
	f.Add([]byte(`{"events":[{"event":"other"}]}`))
	f.Add([]byte(`{"events":[]}`))
	f.Add([]byte(`{`))
	// Names with invalid UTF-8 or escapes, read as encoding/json reads them
	// (invalid bytes become U+FFFD): an earlier scanner compared the raw bytes.
	f.Add([]byte("{\"events\":[{\"event\":\"project.translated\xff\"}]}"))
	f.Add([]byte(`{"events":[{"event":"project.\u0074ranslated"}]}`))
	f.Add([]byte("{\"events\":[{\"event\":\"project.approved\xc3\"}]}"))
	f.Add([]byte(`{"events":[{"event":"project.translated"}],"EVENTS":[{"event":"project.deleted"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := allowed.Check(body)
		if err != nil {
			for _, known := range []error{ErrNotJSON, ErrTooDeep, ErrShape, ErrDuplicateKey, ErrKeyCase, ErrEventNotAllowed} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("Check(%q) = %v, not one of the package's errors", body, err)
		}
		var d struct {
			Events []struct {
				Event *string `json:"event"`
			} `json:"events"`
		}
		if err := json.Unmarshal(body, &d); err != nil || len(d.Events) == 0 {
			t.Fatalf("accepted a body without events: %q", body)
		}
		for _, e := range d.Events {
			if e.Event == nil || *e.Event != "project.translated" && *e.Event != "project.approved" {
				t.Fatalf("accepted %q, where a Go app reads the event %v", body, e.Event)
			}
		}
		// As a generic decoder reads it, with keys matched exactly.
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			t.Fatalf("accepted %q, which is not a JSON object", body)
		}
		events, _ := m["events"].([]any)
		for _, e := range events {
			obj, _ := e.(map[string]any)
			if name, _ := obj["event"].(string); name != "project.translated" && name != "project.approved" {
				t.Fatalf("accepted %q, where a generic decoder reads the event %q", body, name)
			}
		}
	})
}
