package emulator

import (
	"bufio"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// consoleWithCalls is an emulator whose console holds an installation of
// acme.example, a delivery of project.approved and a request as a user of
// unpaid.example.
func consoleWithCalls(t testing.TB) (*Server, string) {
	t.Helper()
	s := newConsoleServer(t, newFakeGateway(t), 0)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/install", "", nil)
	mustAPI(t, s, 200, "POST", "/emulator/api/deliveries", `{"organization":"acme.example","event":"project.approved"}`, nil)
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/unpaid.example/request", `{"path":"/api/Needle-Path?x=1"}`, nil)
	return s, orgOf(t, s, "acme.example").Secret
}

// TestConsoleSearchCalls: q matches the URL, headers and bodies of calls,
// in any case, as the page shows them: a secret is not found by its value.
func TestConsoleSearchCalls(t *testing.T) {
	s, _ := consoleWithCalls(t)
	var secret map[string]string
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/secret", "", &secret)
	kinds := func(q string) string {
		var out []string
		for _, c := range calls(t, s, "?q="+url.QueryEscape(q)) {
			out = append(out, c.Kind)
		}
		return strings.Join(out, " ")
	}
	for q, want := range map[string]string{
		"needle-path":          "user",                    // the URL
		"X-MODULE-KEY: events": "delivery",                // a header, name and value
		`"project.approved"`:   "delivery",                // the body
		"Service-Webhook":      "delivery",                // a header's value
		`"received": 1`:        "delivery",                // the answer's body, as shown
		secret["secret"][4:]:   "",                        // never by a secret's value
		"nothing holds this":   "",                        // nothing
		"":                     "user delivery installed", // no search
	} {
		if got := kinds(q); got != want {
			t.Errorf("q=%q: %q, want %q", q, got, want)
		}
	}
	if got := calls(t, s, "?q=needle&kind=delivery"); len(got) != 0 {
		t.Errorf("q and kind together: %+v", got)
	}
	if rec := api(t, s, "GET", "/emulator/api/calls?q="+strings.Repeat("x", maxSearch+1), "", nil); rec.Code != 400 {
		t.Errorf("a long search: %d %s", rec.Code, rec.Body)
	}
	if rec := api(t, s, "GET", "/emulator/api/calls?format=xml", "", nil); rec.Code != 400 || !strings.Contains(rec.Body.String(), "har or ndjson") {
		t.Errorf("format=xml: %d %s", rec.Code, rec.Body)
	}
}

// TestConsoleExportHAR: format=har is a HAR 1.2 archive of the calls the
// other parameters select, oldest first, with secrets masked as the page
// masks them.
func TestConsoleExportHAR(t *testing.T) {
	s, _ := consoleWithCalls(t)
	var secret map[string]string
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/secret", "", &secret)
	rec := api(t, s, "GET", "/emulator/api/calls?format=har", "", nil)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" ||
		!strings.Contains(rec.Header().Get("Content-Disposition"), `filename="emulator-calls.har"`) {
		t.Fatalf("the HAR: %d %v", rec.Code, rec.Header())
	}
	if strings.Contains(rec.Body.String(), secret["secret"]) {
		t.Fatal("the HAR holds the app secret")
	}
	var har struct {
		Log struct {
			Version string `json:"version"`
			Creator struct {
				Name string `json:"name"`
			} `json:"creator"`
			Entries []struct {
				Started string  `json:"startedDateTime"`
				Time    float64 `json:"time"`
				Request struct {
					Method      string      `json:"method"`
					URL         string      `json:"url"`
					HTTPVersion string      `json:"httpVersion"`
					Headers     []harPair   `json:"headers"`
					QueryString []harPair   `json:"queryString"`
					PostData    *harContent `json:"postData"`
					BodySize    int64       `json:"bodySize"`
					Cookies     []harPair   `json:"cookies"`
				} `json:"request"`
				Response struct {
					Status  int        `json:"status"`
					Content harContent `json:"content"`
				} `json:"response"`
				Timings map[string]float64 `json:"timings"`
				Kind    string             `json:"_kind"`
				Gateway Verdict            `json:"_gateway"`
			} `json:"entries"`
		} `json:"log"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &har); err != nil {
		t.Fatalf("the HAR is not JSON: %v", err)
	}
	l := har.Log
	if l.Version != "1.2" || l.Creator.Name == "" || len(l.Entries) != 3 {
		t.Fatalf("the HAR's log: %s %q %d entries", l.Version, l.Creator.Name, len(l.Entries))
	}
	kinds := []string{}
	for _, e := range l.Entries {
		kinds = append(kinds, e.Kind)
		if e.Started == "" || e.Request.HTTPVersion != "HTTP/1.1" || e.Request.Cookies == nil || e.Timings == nil {
			t.Errorf("entry %s lacks a member HAR requires: %+v", e.Kind, e)
		}
	}
	if strings.Join(kinds, " ") != "installed delivery user" {
		t.Fatalf("the entries, oldest first: %v", kinds)
	}
	d := l.Entries[1]
	if d.Request.Method != "POST" || d.Request.PostData == nil || !strings.Contains(d.Request.PostData.Text, "project.approved") ||
		d.Request.PostData.MimeType != "application/json" || d.Response.Status != 200 || d.Gateway.Outcome != OutcomeAccepted {
		t.Fatalf("the delivery's entry: %+v", d)
	}
	for _, h := range d.Request.Headers {
		if h.Name == "X-Service-Signature" && !strings.HasPrefix(h.Value, "••••") {
			t.Fatalf("the signature in the HAR: %q", h.Value)
		}
	}
	u := l.Entries[2]
	if len(u.Request.QueryString) != 1 || u.Request.QueryString[0] != (harPair{Name: "x", Value: "1"}) || u.Request.PostData != nil {
		t.Fatalf("the user's entry: %+v", u.Request)
	}
	// The other parameters select.
	rec = api(t, s, "GET", "/emulator/api/calls?format=har&kind=delivery", "", nil)
	if n := strings.Count(rec.Body.String(), `"_kind":`); n != 1 {
		t.Fatalf("kind=delivery: %d entries", n)
	}
}

// TestConsoleExportNDJSON: format=ndjson is one call's detail a line,
// oldest first, secrets masked.
func TestConsoleExportNDJSON(t *testing.T) {
	s, _ := consoleWithCalls(t)
	var secret map[string]string
	mustAPI(t, s, 200, "POST", "/emulator/api/organizations/acme.example/secret", "", &secret)
	rec := api(t, s, "GET", "/emulator/api/calls?format=ndjson&organization=acme.example", "", nil)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" || strings.Contains(rec.Body.String(), secret["secret"]) {
		t.Fatalf("the NDJSON: %d %v", rec.Code, rec.Header())
	}
	var kinds []string
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d callDetail
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		var one callDetail
		mustAPI(t, s, 200, "GET", "/emulator/api/calls/"+itoa(d.ID), "", &one)
		if one.Request.Body != d.Request.Body || one.URL != d.URL {
			t.Fatalf("line %d differs from the call's detail", d.ID)
		}
		kinds = append(kinds, d.Kind)
	}
	if strings.Join(kinds, " ") != "installed delivery" {
		t.Fatalf("the lines: %v", kinds)
	}
}

// TestSampleDeliveryPerEvent: each event of a sample names itself and
// carries its own objects: project and targetLanguage for the project
// events, a file for file.*, a string for string.*, the object its name
// starts with for others; no event's sample is another's renamed.
func TestSampleDeliveryPerEvent(t *testing.T) {
	s := newConsoleServer(t, newFakeGateway(t), 0)
	var out map[string]string
	mustAPI(t, s, 200, "GET", "/emulator/api/deliveries/sample?event=project.translated&event=file.approved&event=string.added&event=task.deleted&event=event.x&event=file.added", "", &out)
	var body struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal([]byte(out["body"]), &body); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		event   string
		objects string
	}{
		{"project.translated", "event project targetLanguage"},
		{"file.approved", "event file project targetLanguage"},
		{"string.added", "event project string"},
		{"task.deleted", "event project task"},
		{"event.x", "event project"},
		{"file.added", "event file project"},
	}
	if len(body.Events) != len(want) {
		t.Fatalf("%d events", len(body.Events))
	}
	for i, w := range want {
		e := body.Events[i]
		var name string
		json.Unmarshal(e["event"], &name)
		var keys []string
		for k := range e {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if name != w.event || strings.Join(keys, " ") != w.objects {
			t.Errorf("event %d: %s with %v, want %s with %s", i, name, keys, w.event, w.objects)
		}
	}
	var file struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if json.Unmarshal(body.Events[1]["file"], &file) != nil || file.ID == "" || file.Name == "" {
		t.Errorf("the file of file.approved: %s", body.Events[1]["file"])
	}
}
