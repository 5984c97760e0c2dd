package main

import (
	"strings"
	"testing"
)

// TestContractChains checks the chains of the contract's four payloads:
// -only contract selects them (contract-5m with them), "all" leaves the
// three others out, each reports against json.Valid, and the NDJSON chain
// fetches its strings from the upstream.
func TestContractChains(t *testing.T) {
	got, err := selectChains([]string{"contract"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.name)
		if c.goal != goalJSONValid || c.load != loadSequential || c.minAnswer < 4_000_000 {
			t.Errorf("%s: goal %v, load %v, minAnswer %d; want json.Valid, sequential, a 5 MB answer", c.name, c.goal, c.load, c.minAnswer)
		}
	}
	if want := "contract-5m,contract-build-5m,contract-preexport-5m,contract-ndjson-5m"; strings.Join(names, ",") != want {
		t.Errorf("-only contract: %v, want %s", names, want)
	}
	all, _ := selectChains(nil)
	for _, c := range all {
		if c.contract {
			t.Errorf("%s runs in all", c.name)
		}
	}
	if needsWrk(got) {
		t.Error("the contract's chains need wrk")
	}
	env := &benchEnv{ports: newPorts(18000)}
	nd := got[3]
	rq, _, err := nd.request(env)
	if err != nil || !strings.Contains(string(rq.body), `"stringsUrl":"http://127.0.0.1:18001`+strings5MPath+`"`) ||
		!strings.Contains(nd.handlers, "inline_allow_private") || nd.stringsPath != strings5MPath {
		t.Errorf("contract-ndjson-5m: job %s, handlers %q, strings path %q, %v", rq.body, nd.handlers, nd.stringsPath, err)
	}
}
