package emulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/servicegate/servicegate/descriptor"
)

// SendRequest asks the emulator to call every module an app's descriptor
// declares, the way the service does (POST /emulator/api/send): what
// caddy service-app send does, through the emulator so that the calls
// show in its console.
type SendRequest struct {
	// Descriptor is the app's descriptor, as the tool read it, and
	// Source where from (for messages).
	Descriptor json.RawMessage `json:"descriptor"`
	Source     string          `json:"source"`
	// App is the app's base address as the service reaches it.
	App string `json:"app"`
	// Organization and OrganizationID name the organization; a
	// configured organization's own id is used.
	Organization   string `json:"organization"`
	OrganizationID int64  `json:"organization_id"`
	// Secret signs the deliveries when the organization has no
	// installation; an installation's own secret signs them otherwise.
	Secret string `json:"secret"`
	// File is a source file for the file jobs.
	File *SendFile `json:"file"`
	// Only is "events", "jobs", or "" for both.
	Only string `json:"only"`
	// Timeout bounds the wait for each answer, as Go writes durations
	// ("2m"); default and at most the 2 minutes the service waits.
	Timeout string `json:"timeout"`
}

// SendFile is the source file of SendRequest's jobs.
type SendFile struct {
	Name    string `json:"name"`
	Content []byte `json:"content"`
}

// SendAnswer is the answer to SendRequest: each call and its answer.
type SendAnswer struct {
	// Installed says the deliveries were signed with the organization's
	// installation secret, not the one the request gave.
	Installed bool       `json:"installed"`
	Calls     []SentCall `json:"calls"`
}

// SentCall is one call of SendAnswer.
type SentCall struct {
	// ID is the call's id in the console.
	ID             int64  `json:"id"`
	Kind           string `json:"kind"`
	Key            string `json:"key"`
	Job            string `json:"job"`
	URL            string `json:"url"`
	Status         int    `json:"status"`
	Answer         string `json:"answer"`
	Error          string `json:"error,omitempty"`
	TokenChallenge bool   `json:"token_challenge,omitempty"`
}

func (c *console) sendAPI(w http.ResponseWriter, r *http.Request) error {
	var req SendRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	if err := checkCallURL(req.App); err != nil {
		return failf(http.StatusBadRequest, "app must be an http or https address.")
	}
	if req.Only != "" && req.Only != "events" && req.Only != "jobs" {
		return failf(http.StatusBadRequest, "only takes events or jobs.")
	}
	source := req.Source
	if source == "" {
		source = "the descriptor"
	}
	d, err := descriptor.Parse(source, req.Descriptor)
	if err != nil {
		return failf(http.StatusBadRequest, "%v", err)
	}
	each := jobTimeout
	if req.Timeout != "" {
		t, err := time.ParseDuration(req.Timeout)
		if err != nil || t <= 0 {
			return failf(http.StatusBadRequest, "timeout must be a duration such as \"2m\".")
		}
		each = min(t, jobTimeout)
	}
	client := &http.Client{Transport: c.client.Transport, Timeout: each}
	in := &Installation{Descriptor: d, AppURL: strings.TrimSuffix(req.App, "/"), Domain: req.Organization,
		OrganizationID: req.OrganizationID, AppSecret: req.Secret, Client: client}
	installed := false
	if org, ok := c.s.organization(req.Organization); ok {
		in.OrganizationID = org.ID
		if _, secret, ok := c.s.installation(org.Domain); ok {
			in.AppSecret, installed = secret, true
		}
	}
	if in.AppSecret == "" && req.Only != "jobs" && len(d.Webhooks) > 0 {
		return failf(http.StatusBadRequest, "The app is not installed for %s and no secret was given to sign its deliveries with.", req.Organization)
	}
	ctx := r.Context()
	var calls []Call
	if req.Only != "jobs" {
		calls = append(calls, in.SendEvents(ctx)...)
	}
	if req.Only != "events" && req.File != nil {
		calls = append(calls, in.SendJobs(ctx, req.File.Name, req.File.Content)...)
	}
	answer := SendAnswer{Installed: installed, Calls: make([]SentCall, 0, len(calls))}
	for _, call := range calls {
		sent := SentCall{ID: call.ID, Kind: call.Kind, Key: call.Key, Job: call.Job, URL: call.URL, Status: call.Status,
			Answer: truncateAnswer(call.Body)}
		if call.Err != nil {
			sent.Error = call.Err.Error()
		}
		if e := c.log.get(call.ID); e != nil {
			sent.TokenChallenge = len(e.respHeader["Www-Authenticate"]) > 0
		}
		answer.Calls = append(answer.Calls, sent)
	}
	writeJSON(w, http.StatusOK, answer)
	return nil
}
