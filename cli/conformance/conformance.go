// Package conformance is the logic of caddy service-app conformance: it
// plays the service's whole module contract against an app (every module
// its descriptor declares, with valid, boundary and hostile inputs) and
// reports, case by case, where the app breaks it.
//
// A case has an id <kind>/<module key>/<job>/<case>, a status (passed,
// failed or skipped), a reason a person understands when it did not pass,
// and for a failure the request that reproduces it. The answers are judged
// by the contract package's checker, the one the gateway runs on live
// calls, so that the run and the gateway never disagree on a rule; the run
// adds what only a whole exchange shows (the same file by content and by
// URL, round trips through build-file, strings by URL fetched and checked).
//
// The package knows nothing of Caddy: the command's glue reads the flags
// into Options, calls Run (or List) and writes the Report.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/servicegate/servicegate/descriptor"
)

// The statuses of a case.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
)

// The kind of the lifecycle cases, beside the descriptor's module kinds,
// and the module key they are listed under (the descriptor's events).
const (
	KindLifecycle   = "lifecycle"
	LifecycleModule = "events"
)

// MaxInline is the largest answer (and request) the service takes inline:
// 5 MB, read as 5 MiB as the platform's own SDK reads it.
const MaxInline = 5 << 20

// DefaultTimeout is the most the service waits for a job: 2 minutes.
const DefaultTimeout = 2 * time.Minute

// Options are what a run plays, against which app.
type Options struct {
	// App is the address the service calls: the app itself, or the
	// gateway in front of it.
	App string
	// Descriptor is the app descriptor: a file or an address. Empty
	// reads it from the app, at /manifest.json.
	Descriptor string
	// Secret is the app secret the deliveries are signed with (but see
	// InstallationSecret).
	Secret string
	// InstallationSecret, when set, signs the deliveries of a run that
	// goes through a servicegate gateway with the organization's
	// installation secret, which the emulator (Emulator) hands over, as
	// the service signs them; Secret signs them when the organization is
	// not installed there. The command sets it when neither --secret nor
	// --secret-env was given.
	InstallationSecret bool
	// Files are the source files, each "[<module key>=]<path>": the
	// module key (a glob, as path.Match reads it) names the
	// custom-file-format modules the file is for; without it, the
	// modules whose signaturePatterns match the file.
	Files []string
	// Sources are source files given by their bytes rather than a path,
	// each for the modules Module (a glob) names, or else for those
	// whose signaturePatterns match it.
	Sources []Source
	// Only selects the cases whose id matches this glob, each * within
	// one /-separated part (path.Match); empty runs every case.
	Only string
	// Timeout is the most one call may take; zero is DefaultTimeout.
	Timeout time.Duration
	// Emulator is the emulated service that makes the lifecycle calls
	// when App is a servicegate gateway, which proves such calls with
	// the service before the app sees them. Empty sends them straight
	// to App.
	Emulator string
	// Domain and OrganizationID name the organization of the calls.
	Domain         string
	OrganizationID int64
	// OnCase, when set, is called with each case once it has run (from
	// several goroutines, one call at a time), for a live listing.
	OnCase func(Result)
	// Client makes every call; nil is a plain client. Its Timeout is
	// replaced by Timeout.
	Client *http.Client
}

// Source is a source file of Options.Sources.
type Source struct {
	Module  string
	Name    string
	Content []byte
}

// StartError is a run that could not start: the app unreachable, the
// descriptor unreadable or invalid, a flag wrong. Its message says which.
type StartError struct{ msg string }

func (e *StartError) Error() string { return e.msg }

func startErr(format string, args ...any) error {
	return &StartError{msg: fmt.Sprintf(format, args...)}
}

// Report is a whole run: the app, its descriptor, each case.
type Report struct {
	App        string   `json:"app"`
	Descriptor string   `json:"descriptor"`
	DurationMS int64    `json:"duration_ms"`
	Summary    Summary  `json:"summary"`
	Cases      []Result `json:"cases"`
}

// Summary counts the cases of a report by status.
type Summary struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Result is one case of a report.
type Result struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	Module     string `json:"module"`
	Job        string `json:"job"`
	Case       string `json:"case"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// Request is the case's main request (none for a skipped case).
	Request RequestSummary `json:"request"`
	// Answer is how it was answered; absent when no answer came.
	Answer *AnswerSummary `json:"answer,omitempty"`
	// Curl sends the same request, for a failure; the files it names
	// are written next to the report (see Report.WriteFiles).
	Curl string `json:"curl,omitempty"`

	ex *exchange
}

// RequestSummary is a case's request: its method, address and body size.
type RequestSummary struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Size   int    `json:"size"`
}

// AnswerSummary is the answer to a case's request: its status and size.
type AnswerSummary struct {
	Status int   `json:"status"`
	Size   int64 `json:"size"`
}

// Failed reports whether a case of the report failed: the run's exit
// status is 1.
func (r *Report) Failed() bool { return r.Summary.Failed > 0 }

// testCase is one case of a run, before it runs.
type testCase struct {
	kind, module, job, name string
	// run plays the case; nil when the case is skipped, for skip.
	run  func(ctx context.Context) outcome
	skip string
	// last runs after every other case, one at a time, in order:
	// lifecycle calls, which change what the app holds.
	last bool
}

func (c *testCase) id() string { return c.kind + "/" + c.module + "/" + c.job + "/" + c.name }

// outcome is what running a case gave.
type outcome struct {
	reason string // empty: passed
	skip   string // set: skipped, for this reason
	ex     *exchange
}

// List prints the ids of the cases a run with o would play, one a line,
// and calls no module.
func List(ctx context.Context, o Options) ([]string, error) {
	p, err := newPlan(ctx, o, false)
	if err != nil {
		return nil, err
	}
	defer p.close()
	ids := make([]string, 0, len(p.cases))
	for _, c := range p.cases {
		ids = append(ids, c.id())
	}
	return ids, nil
}

// Run plays every selected case against the app and returns the report.
// A failure never stops the run. The error, a *StartError, is set only
// when the run could not start.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	p, err := newPlan(ctx, o, true)
	if err != nil {
		return nil, err
	}
	defer p.close()
	rep := &Report{App: p.app, Descriptor: p.source, Cases: make([]Result, len(p.cases))}
	var mu sync.Mutex
	record := func(i int, res Result) {
		mu.Lock()
		defer mu.Unlock()
		rep.Cases[i] = res
		if o.OnCase != nil {
			o.OnCase(res)
		}
	}
	// The cases run side by side, a few at a time: a slow module costs
	// the run its time limit once, not once per case. Cases that need
	// another's answer (a build-file job needs the parsed strings) wait
	// for it through their module's shared calls.
	sem := make(chan struct{}, parallelCases)
	var wg sync.WaitGroup
	for i, c := range p.cases {
		if c.last {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			record(i, play(ctx, c))
		}()
	}
	wg.Wait()
	for i, c := range p.cases {
		if c.last {
			record(i, play(ctx, c))
		}
	}
	for _, c := range rep.Cases {
		switch c.Status {
		case Passed:
			rep.Summary.Passed++
		case Failed:
			rep.Summary.Failed++
		default:
			rep.Summary.Skipped++
		}
	}
	rep.DurationMS = time.Since(start).Milliseconds()
	return rep, nil
}

// parallelCases is how many cases run at once.
const parallelCases = 8

// play runs one case and makes its result.
func play(ctx context.Context, c *testCase) Result {
	res := Result{ID: c.id(), Kind: c.kind, Module: c.module, Job: c.job, Case: c.name}
	if c.run == nil {
		res.Status, res.Reason = Skipped, c.skip
		return res
	}
	start := time.Now()
	out := c.run(ctx)
	res.DurationMS = time.Since(start).Milliseconds()
	res.ex = out.ex
	if ex := out.ex; ex != nil {
		res.Request = RequestSummary{Method: http.MethodPost, URL: ex.url, Size: len(ex.body)}
		if ex.answered {
			res.Answer = &AnswerSummary{Status: ex.status, Size: ex.size}
		}
	}
	switch {
	case out.skip != "":
		res.Status, res.Reason = Skipped, out.skip
	case out.reason != "":
		res.Status, res.Reason = Failed, out.reason
	default:
		res.Status = Passed
	}
	return res
}

// Select reports whether id matches the --only glob: each * within one
// /-separated part. An empty glob selects every id.
func Select(glob, id string) (bool, error) {
	if glob == "" {
		return true, nil
	}
	ok, err := path.Match(glob, id)
	if err != nil {
		return false, startErr("--only %q is not a glob: %v", glob, err)
	}
	return ok, nil
}

// newPlan reads the descriptor and the files, and makes the cases; with
// serve, it starts the loopback server of the files and strings sent by
// URL.
func newPlan(ctx context.Context, o Options, serve bool) (*plan, error) {
	if o.App == "" {
		return nil, startErr("--app is required: the address the service calls (the app, or the gateway in front of it)")
	}
	if !descriptor.IsAddress(o.App) {
		return nil, startErr("--app %q is not an http or https address", o.App)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	p := &plan{o: o, app: strings.TrimSuffix(o.App, "/")}
	p.client = &http.Client{Timeout: o.Timeout}
	if o.Client != nil {
		c := *o.Client
		c.Timeout = o.Timeout
		p.client = &c
	}
	if err := p.loadDescriptor(ctx); err != nil {
		return nil, err
	}
	files, err := p.readFiles(o.Files, o.Sources)
	if err != nil {
		return nil, err
	}
	if serve {
		if p.served, err = newServer(); err != nil {
			return nil, startErr("the run could not serve its files on loopback: %v", err)
		}
		if p.desc.Events.Any() || (o.InstallationSecret && len(p.desc.Webhooks) > 0) {
			p.viaEmulator = o.Emulator != "" && isGateway(ctx, p.client, p.app)
		}
	}
	all := p.allCases(files)
	for _, c := range all {
		ok, err := Select(o.Only, c.id())
		if err != nil {
			p.close()
			return nil, err
		}
		if ok {
			p.cases = append(p.cases, c)
		}
	}
	if len(p.cases) == 0 {
		p.close()
		if o.Only != "" {
			return nil, startErr("--only %q selects none of the %d cases (--list prints them)", o.Only, len(all))
		}
		return nil, startErr("the descriptor declares no module and no lifecycle event: there is nothing to play")
	}
	return p, nil
}

// plan is a run's descriptor, files and cases.
type plan struct {
	o           Options
	app         string
	source      string
	desc        *descriptor.Descriptor
	client      *http.Client
	served      *server
	viaEmulator bool
	cases       []*testCase
}

func (p *plan) close() {
	if p.served != nil {
		p.served.close()
	}
}

// loadDescriptor reads the descriptor from --descriptor or the app, and
// makes sure the app answers.
func (p *plan) loadDescriptor(ctx context.Context) error {
	p.source = p.o.Descriptor
	if p.source == "" {
		p.source = p.app + "/manifest.json"
	}
	loaded, err := (&descriptor.Loader{Client: p.client}).Load(ctx, p.source)
	var defects *descriptor.Defects
	switch {
	case errors.As(err, &defects):
		return startErr("the descriptor is not valid: %v", err)
	case err != nil && p.o.Descriptor == "":
		return startErr("the descriptor could not be read from the app at %s (give it with --descriptor, or check that the app is up): %v", p.source, err)
	case err != nil:
		return startErr("the descriptor could not be read: %v", err)
	}
	p.desc = loaded.Descriptor
	if p.o.Descriptor != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.app+"/", nil)
		if err != nil {
			return startErr("--app %q is not an address: %v", p.o.App, err)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return startErr("the app at %s could not be reached: %v", p.app, err)
		}
		resp.Body.Close()
	}
	return nil
}

// isGateway reports whether app is a servicegate gateway: it answers
// service_app's health check.
func isGateway(ctx context.Context, client *http.Client, app string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, app+"/servicegate/health", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Status *string `json:"status"`
		Checks []any   `json:"checks"`
	}
	body, _ := readCapped(resp.Body, 64<<10)
	return jsonUnmarshal(body, &h) == nil && h.Status != nil && h.Checks != nil
}
