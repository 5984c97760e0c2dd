package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// conformanceServer is an emulator whose console runs its conformance
// cases with run.
func conformanceServer(t *testing.T, g *fakeGateway, run Conformance) *Server {
	t.Helper()
	c := &clock{now: testStart}
	cfg := testConfig(c)
	cfg.Console = ConsoleConfig{App: g.URL, Gateway: g.verdicts, Conformance: run}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConsoleConformance: POST conformance hands the runner the app, the
// organization, its secret, the files and the emulator's own address,
// streams each case as it ends and then the report, and the calls the
// runner marks show in the log.
func TestConsoleConformance(t *testing.T) {
	g := newFakeGateway(t)
	var got ConformanceRun
	s := conformanceServer(t, g, func(ctx context.Context, run ConformanceRun, onCase func(json.RawMessage)) (json.RawMessage, error) {
		got = run
		req, _ := http.NewRequestWithContext(MarkCall(ctx, "parse-file", run.Organization, "kv-format"), http.MethodPost,
			run.App+"/file-format", strings.NewReader(`{}`))
		if resp, err := run.Client.Do(req); err == nil {
			resp.Body.Close()
		}
		onCase(json.RawMessage(`{"id":"a/b/c/d","status":"passed"}`))
		onCase(json.RawMessage(`{"id":"a/b/c/e","status":"failed","reason":"why"}`))
		return json.RawMessage(`{"summary":{"passed":1,"failed":1,"skipped":0}}`), nil
	})
	body := `{"organization":"acme.example","secret":"s3","only":"a/*/*/*","timeout":"30s","files":[{"module":"kv-format","name":"a.kv","content":"YSA9IGIK"}]}`
	rec := do(s, httptest.NewRequest("POST", "http://localhost/emulator/api/conformance", strings.NewReader(body)))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	want := `{"case":{"id":"a/b/c/d","status":"passed"}}` + "\n" + `{"case":{"id":"a/b/c/e","status":"failed","reason":"why"}}` + "\n" +
		`{"report":{"summary":{"passed":1,"failed":1,"skipped":0}}}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("the stream:\n%s", rec.Body)
	}
	if got.App != g.URL || got.Organization != "acme.example" || got.OrganizationID != 1 || got.Secret != "s3" ||
		got.Only != "a/*/*/*" || got.Timeout.String() != "30s" || len(got.Files) != 1 || !bytes.Equal(got.Files[0].Content, []byte("a = b\n")) ||
		got.Client == nil {
		t.Errorf("the run: %+v", got)
	}
	if list := calls(t, s, ""); len(list) != 1 || list[0].Kind != "parse-file" || list[0].Organization != "acme.example" {
		t.Errorf("the log: %+v", list)
	}
}

// TestConsoleConformanceRefusals: the refusals of POST conformance, each
// with its message, before any case runs.
func TestConsoleConformanceRefusals(t *testing.T) {
	g := newFakeGateway(t)
	ran := false
	runner := func(ctx context.Context, run ConformanceRun, onCase func(json.RawMessage)) (json.RawMessage, error) {
		ran = true
		return nil, errors.New("the descriptor is not valid: no modules")
	}
	s := conformanceServer(t, g, runner)
	for body, want := range map[string]string{
		`{"organization":"nowhere.example","secret":"s"}`:            "The emulator has no organization nowhere.example.",
		`{"organization":"acme.example"}`:                            "The app is not installed for acme.example and no secret was given to sign its deliveries with.",
		`{"organization":"acme.example","secret":"s","timeout":"x"}`: `timeout must be a duration such as "30s".`,
		`{"organization":"acme.example","secret":"s","bogus":1}`:     `The request has no member "bogus"; its members are "files", "only", "organization", "secret", "timeout".`,
	} {
		var out struct{ Message string }
		if rec := api(t, s, "POST", "/emulator/api/conformance", body, &out); rec.Code != 400 || out.Message != want {
			t.Errorf("%s: %d %q, want %q", body, rec.Code, out.Message, want)
		}
	}
	if ran {
		t.Error("a refused request ran the cases")
	}
	var out struct{ Message string }
	if rec := api(t, s, "POST", "/emulator/api/conformance", `{"organization":"acme.example","secret":"s"}`, &out); rec.Code != 400 ||
		out.Message != "the descriptor is not valid: no modules" {
		t.Errorf("a run that cannot start: %d %q", rec.Code, out.Message)
	}
	if rec := api(t, conformanceServer(t, g, nil), "POST", "/emulator/api/conformance", `{}`, &out); rec.Code != 501 {
		t.Errorf("without a runner: %d %q", rec.Code, out.Message)
	}
	if rec := api(t, s, "GET", "/emulator/api/conformance", "", &out); rec.Code != 405 {
		t.Errorf("GET: %d", rec.Code)
	}
}
