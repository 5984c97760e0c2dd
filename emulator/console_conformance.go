package emulator

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/servicegate/servicegate/siteorigin"
)

// ConformanceRequest asks the console to run the conformance cases
// against the app (POST /emulator/api/conformance), through the gateway
// in front of it, as caddy service-app conformance does. The answer is
// new-line delimited JSON: {"case":{…}} for each case as it ends, then
// {"report":{…}} (the report of --format json).
type ConformanceRequest struct {
	// Organization is the domain of the organization the calls are for.
	Organization string `json:"organization"`
	// Secret signs the deliveries when the organization has no
	// installation; an installation's own secret signs them otherwise.
	Secret string `json:"secret"`
	// Files are source files in the formats of the custom-file-format
	// modules.
	Files []ConformanceFile `json:"files"`
	// Only selects the cases by a glob on their ids.
	Only string `json:"only"`
	// Timeout is the most one call may take, as Go writes durations
	// ("30s"); default and at most the 2 minutes the service waits.
	Timeout string `json:"timeout"`
}

// ConformanceFile is a source file of a ConformanceRequest: for the
// module of key Module (a glob), or else for the modules whose
// signaturePatterns match it.
type ConformanceFile struct {
	Module  string `json:"module"`
	Name    string `json:"name"`
	Content []byte `json:"content"`
}

// ConformanceRun is what the console hands its Conformance runner: the
// request, with what the emulator knows filled in.
type ConformanceRun struct {
	ConformanceRequest
	// App is the app's base address (the gateway in front of it), and
	// Emulator the emulator's own, which makes the lifecycle calls.
	App, Emulator string
	// OrganizationID is the organization's id.
	OrganizationID int64
	// Timeout is the request's, read.
	Timeout time.Duration
	// Client makes the calls: each one marked with MarkCall is recorded
	// in the console's log.
	Client *http.Client
}

// Conformance runs the conformance cases of run, calling onCase with
// each case (JSON) as it ends, and returns the report (JSON). An error
// means the run could not start; its message says why.
type Conformance func(ctx context.Context, run ConformanceRun, onCase func(json.RawMessage)) (json.RawMessage, error)

// MarkCall returns ctx marking the requests made with it, through the
// client of a ConformanceRun, as one call of the console's log: of kind
// (the job type, delivery, or the lifecycle event), for the organization
// and module.
func MarkCall(ctx context.Context, kind, org, module string) context.Context {
	return withCall(ctx, callMeta{kind: kind, org: org, module: module})
}

// conformanceAPI runs the conformance cases and streams them.
func (c *console) conformanceAPI(w http.ResponseWriter, r *http.Request) error {
	if c.cfg.Conformance == nil {
		return failf(http.StatusNotImplemented, "This emulator cannot run the conformance cases.")
	}
	var req ConformanceRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	run := ConformanceRun{ConformanceRequest: req, App: strings.TrimSuffix(c.cfg.App, "/"), Timeout: jobTimeout, Client: c.client}
	if req.Timeout != "" {
		t, err := time.ParseDuration(req.Timeout)
		if err != nil || t <= 0 {
			return failf(http.StatusBadRequest, "timeout must be a duration such as \"30s\".")
		}
		run.Timeout = min(t, jobTimeout)
	}
	org, ok := c.s.organization(req.Organization)
	if !ok {
		return failf(http.StatusBadRequest, "The emulator has no organization %s.", req.Organization)
	}
	run.OrganizationID = org.ID
	if _, secret, ok := c.s.installation(org.Domain); ok {
		run.Secret = secret
	}
	if run.Secret == "" {
		return failf(http.StatusBadRequest, "The app is not installed for %s and no secret was given to sign its deliveries with.", org.Domain)
	}
	// the lifecycle calls come back here, at the address this request
	// came in on
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		run.Emulator = siteorigin.Scheme(r) + "://" + addr.String()
	}
	var mu sync.Mutex
	started := false
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	line := func(key string, v json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		_ = enc.Encode(map[string]json.RawMessage{key: v})
		if flusher != nil {
			flusher.Flush()
		}
	}
	report, err := c.cfg.Conformance(r.Context(), run, func(v json.RawMessage) { line("case", v) })
	if err != nil {
		if !started {
			return failf(http.StatusBadRequest, "%v", err)
		}
		line("error", json.RawMessage(mustMarshal(err.Error())))
		return nil
	}
	line("report", report)
	return nil
}

func mustMarshal(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
