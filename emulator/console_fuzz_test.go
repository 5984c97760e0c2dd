package emulator

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzConsoleRequests: the parser of the console API's JSON requests
// never panics, accepts only one valid JSON object that encoding/json
// reads the same way with unknown members refused, and refuses every
// member that differs from a known one only by case.
func FuzzConsoleRequests(f *testing.F) {
	for _, seed := range []string{
		`{"domain":"new.example","id":4,"subscription":"paid"}`,
		`{"organization":"acme.example","event":"project.translated","body":"{}","module":"m","tamper":"unsigned"}`,
		`{"organization":"acme.example","events":["a","b"],"url":"http://localhost/x"}`,
		`{"body":"{\"events\":[]}","tamper":"other_org"}`,
		`{"token":{"status":500},"subscription":{"delay":"5s"}}`,
		`{"token":null,"subscription":{"outage":true}}`,
		`{"module":"kv","organization":"acme.example","pseudo":true,"strings":[{"identifier":"a","text":"b"}]}`,
		`{"descriptor":{"identifier":"x"},"app":"http://localhost","file":{"name":"a","content":"YQ=="}}`,
		`{"Organization":"x"}`, `{"organization":"a","organization":"b"}`, `{"token":{"Status":1}}`,
		`{"a":1} {}`, `{`, `[]`, `null`, `"x"`, ``, `{"strings":[{"a":1,"A":2}]}`,
	} {
		for kind := range 7 {
			f.Add(uint8(kind), []byte(seed))
		}
	}
	f.Add(uint8(6), []byte(`{"path":"/api/x?y=1","method":"post","user":7}`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var v any
		switch kind % 7 {
		case 5:
			v = &userRequest{}
		case 0:
			v = &addOrganizationRequest{}
		case 1:
			v = &deliveryRequest{}
		case 2:
			v = &resendRequest{}
		case 3:
			v = &faultsRequest{}
		case 4:
			v = &jobRequest{}
		default:
			v = &SendRequest{}
		}
		err := decodeStrict(data, v)
		if err == nil {
			if !json.Valid(data) || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
				t.Fatalf("accepted %q, which is not one JSON object", data)
			}
		}
		if err != nil && strings.Contains(err.Error(), string(data)) && len(data) > 20 {
			t.Fatalf("the error quotes the request: %v", err)
		}
	})
}

// FuzzCallID: a call's id in a path is a positive decimal integer written
// one way only.
func FuzzCallID(f *testing.F) {
	for _, seed := range []string{"1", "42", "0", "01", "-1", "+1", "1e3", " 1", "9223372036854775807", "9223372036854775808", "x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parseID(s)
		if ok && (id <= 0 || strconv.FormatInt(id, 10) != s) {
			t.Fatalf("parseID(%q) = %d", s, id)
		}
	})
}

// FuzzMaskedBody: showing a body never panics, a JSON body stays valid
// JSON, and a secret member's value is never shown whole.
func FuzzMaskedBody(f *testing.F) {
	for _, seed := range []string{
		`{"access_token":"eyJhbGciOiJIUzI1NiJ9.e30.abcdefgh","refresh_token":"R3FRESHTOKEN12345"}`,
		`{"appSecret":"S3CRET-VALUE-0123","code":"C0DE-0123456789"}`,
		`{"a":{"client_secret":"x\"y\\z-long-enough"}}`,
		`grant_type=refresh_token&refresh_token=abcdefghijklmnop&client_secret=s3cr3ts3cr3t`,
		"\xff\xfe{\"token\":\"zzzzzzzzzzzzzzzz\"}", `{"token":`, ``,
	} {
		f.Add([]byte(seed), strings.HasPrefix(seed, "grant_type"))
	}
	f.Fuzz(func(t *testing.T, body []byte, form bool) {
		ct := "application/json"
		if form {
			ct = "application/x-www-form-urlencoded"
		}
		out, isJSON := maskedBody(body, ct)
		if isJSON && !json.Valid([]byte(out)) {
			t.Fatalf("masked JSON %q is not valid", out)
		}
		var doc map[string]any
		if !form && json.Unmarshal(body, &doc) == nil {
			for _, key := range []string{"access_token", "refresh_token", "appSecret", "client_secret", "code", "token"} {
				// Held once, as the member's value: it must not show whole.
				if v, ok := doc[key].(string); ok && len(v) >= 12 && strings.Count(string(body), v) == 1 && strings.Contains(out, v) {
					t.Fatalf("the value of %s shows whole in %q", key, out)
				}
			}
		}
	})
}

// FuzzCallsQuery: the query of GET calls (filters, search, format) never
// panics, is refused with a 400 and a message when it is not understood,
// and otherwise answers the format asked for with the calls it selects.
func FuzzCallsQuery(f *testing.F) {
	for _, seed := range []string{
		"", "q=needle", "q=X-Module-Key%3A+events", "format=har", "format=ndjson&kind=delivery", "format=json&status=2xx",
		"q=%FF%FE", "after=-1", "after=1&q=a", "status=6xx", "format=xml", "q=" + strings.Repeat("a", 300),
		"organization=&kind=", "q=%00", "q=++", "format=har&q=%E2%80%A2",
	} {
		f.Add(seed)
	}
	s, _ := consoleWithCalls(f)
	f.Fuzz(func(t *testing.T, query string) {
		target := "/emulator/api/calls?" + strings.NewReplacer(" ", "+", "#", "%23").Replace(query)
		if _, err := url.ParseRequestURI(target); err != nil {
			t.Skip("no client sends this request line")
		}
		rec := api(t, s, "GET", target, "", nil)
		switch rec.Code {
		case 200:
			if ct := rec.Header().Get("Content-Type"); strings.HasPrefix(ct, "application/json") && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%q: the answer is not JSON", query)
			}
		case 400:
			var m struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &m) != nil || m.Message == "" {
				t.Fatalf("%q: a refusal with no message: %s", query, rec.Body)
			}
		default:
			t.Fatalf("%q: %d %s", query, rec.Code, rec.Body)
		}
	})
}
