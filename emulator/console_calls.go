package emulator

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/respond"
)

// callItem is a call as the API lists it.
type callItem struct {
	ID           int64   `json:"id"`
	Time         string  `json:"time"`
	Kind         string  `json:"kind"`
	Organization string  `json:"organization"`
	Method       string  `json:"method"`
	URL          string  `json:"url"`
	Status       int     `json:"status"`
	DurationMS   float64 `json:"duration_ms"`
	Gateway      Verdict `json:"gateway"`
	// Direction is "sent" for a call the emulator made (to the app,
	// through the gateway), "answered" for one it answered.
	Direction string `json:"direction"`
	Module    string `json:"module,omitempty"`
	Error     string `json:"error,omitempty"`
	ReplayOf  int64  `json:"replay_of,omitempty"`
	Tamper    string `json:"tamper,omitempty"`
}

func itemOf(e *callRecord) callItem {
	item := callItem{
		ID: e.id, Time: apiTime(e.start), Kind: e.kind, Organization: e.org,
		Method: e.method, URL: maskURL(e.url), Status: e.status,
		DurationMS: math.Round(e.duration.Seconds()*1e4) / 10,
		Gateway:    e.verdict, Direction: "answered", Module: e.module,
		Error: e.err, ReplayOf: e.replayOf, Tamper: e.tamper,
	}
	if e.sent {
		item.Direction = "sent"
	}
	return item
}

// callDetail is a call with its headers and bodies, secrets masked.
type callDetail struct {
	callItem
	Request messageDetail `json:"request"`
	Answer  messageDetail `json:"answer"`
	// Replayable says the call can be replayed or resent: the emulator
	// sent it and kept its body whole.
	Replayable bool `json:"replayable"`
	// App is what the app received and answered, when a gateway in the
	// emulator's process handed the call on to it.
	App *appDetail `json:"app,omitempty"`
}

// messageDetail is a request or an answer as the console shows it.
type messageDetail struct {
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
	// Size is the size of the whole body; Cut says only its first 64
	// KiB were kept.
	Size int64 `json:"size"`
	Cut  bool  `json:"cut"`
	JSON bool  `json:"json"`
}

func detailOf(h map[string][]string, b keptBody) messageDetail {
	var contentType string
	if v := h["Content-Type"]; len(v) > 0 {
		contentType = v[0]
	}
	body, isJSON := maskedBody(b.data, contentType)
	return messageDetail{Headers: maskHeader(h), Body: body, Size: b.size, Cut: !b.whole(), JSON: isJSON}
}

func (c *console) listCalls(w http.ResponseWriter, r *http.Request) error {
	f, err := parseCallFilter(r.URL.Query())
	if err != nil {
		return err
	}
	all, _ := c.log.since(f.after)
	calls := all[:0:0]
	for _, e := range all {
		if f.match(e) {
			calls = append(calls, e)
		}
	}
	switch f.format {
	case "har":
		writeHAR(w, calls)
		return nil
	case "ndjson":
		writeNDJSON(w, calls)
		return nil
	}
	items := make([]callItem, 0, len(calls))
	for i := len(calls) - 1; i >= 0; i-- {
		items = append(items, itemOf(calls[i]))
	}
	writeJSON(w, http.StatusOK, items)
	return nil
}

// statusClass is "2xx" for 200 to 299, and so on; "none" for no answer.
func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "none"
	}
	return strconv.Itoa(status/100) + "xx"
}

// call finds the call of a path's id.
func (c *console) call(id string) (*callRecord, error) {
	n, ok := parseID(id)
	if !ok {
		return nil, failf(http.StatusBadRequest, "%s is not a call's id: ids are positive integers.", respond.Quote(id))
	}
	e := c.log.get(n)
	if e == nil {
		return nil, failf(http.StatusNotFound, "There is no call %d: it never was, or the log (the last %d calls) no longer holds it.", n, c.cfg.Keep)
	}
	return e, nil
}

func (c *console) callDetail(id string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := c.call(id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, detailOfCall(e))
		return nil
	}
}

// The ways of tampering with a delivery.
const (
	// tamperBody changes one byte of the body after signing it.
	tamperBody = "body"
	// tamperUnsigned sends no signature.
	tamperUnsigned = "unsigned"
	// tamperWrongSecret signs with a secret the service never gave.
	tamperWrongSecret = "wrong_secret"
	// tamperOtherOrg signs with another organization's app secret.
	tamperOtherOrg = "other_org"
)

func checkTamper(t string) error {
	switch t {
	case "", tamperBody, tamperUnsigned, tamperWrongSecret, tamperOtherOrg:
		return nil
	}
	return failf(http.StatusBadRequest, "tamper must be unsigned, wrong_secret, other_org or body, not %s.", respond.Quote(t))
}

// resendRequest is the request of a resend: the body to send instead,
// and how to tamper with a delivery.
type resendRequest struct {
	Body   *string `json:"body"`
	Tamper string  `json:"tamper"`
}

func (c *console) callAction(id, action string) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		e, err := c.call(id)
		if err != nil {
			return err
		}
		if !e.sent {
			return failf(http.StatusConflict, "Call %d was made to the emulator, not by it: only calls the emulator sent can be replayed, resent or copied.", e.id)
		}
		var req resendRequest
		switch action {
		case "replay", "curl":
			if r.ContentLength != 0 {
				return failf(http.StatusBadRequest, "A %s takes no body.", action)
			}
		case "resend":
			if err := readRequest(w, r, &req); err != nil {
				return err
			}
			if err := checkTamper(req.Tamper); err != nil {
				return err
			}
		default:
			return failf(http.StatusNotFound, "A call's actions are replay, resend and curl, not %s.", respond.Quote(action))
		}
		body := e.reqBody.data
		if req.Body != nil {
			body = []byte(*req.Body)
		} else if !e.reqBody.whole() {
			return failf(http.StatusConflict, "The body of call %d was larger than 64 KiB and was not kept whole: it cannot be sent again.", e.id)
		}
		header := e.reqHeader.Clone()
		header.Del("Content-Length")
		if action == "resend" {
			if e.kind != kindDelivery && req.Tamper != "" {
				return failf(http.StatusBadRequest, "Only deliveries are signed, so tamper applies to them alone; call %d is %s.", e.id, e.kind)
			}
			if e.kind == kindDelivery {
				if err := c.sign(header, e.org, body, req.Tamper); err != nil {
					return err
				}
				if req.Tamper == tamperBody {
					body = TamperBody(body)
				}
			}
		}
		if action == "curl" {
			writeJSON(w, http.StatusOK, map[string]string{"curl": curlOf(e.method, e.url, header, body)})
			return nil
		}
		ctx, cancel := context.WithTimeout(r.Context(), jobTimeout)
		defer cancel()
		ctx = withCall(ctx, callMeta{kind: e.kind, org: e.org, module: e.module, replayOf: e.id, tamper: req.Tamper})
		newID, err := c.send(ctx, e.method, e.url, header, body)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, itemOf(c.log.get(newID)))
		return nil
	}
}

// send makes one call with the console's client and returns its id.
func (c *console) send(ctx context.Context, method, url string, header http.Header, body []byte) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, failf(http.StatusBadRequest, "The call could not be made: %v.", err)
	}
	req.Header = header
	if resp, err := c.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRecordedAnswer))
		resp.Body.Close()
	}
	id := recordedID(ctx)
	if id == 0 || c.log.get(id) == nil {
		return 0, failf(http.StatusBadGateway, "The call could not be made.")
	}
	return id, nil
}

// sign sets the X-Service-Signature of a delivery (see Server.sign).
func (c *console) sign(header http.Header, org string, body []byte, tamper string) error {
	return c.s.sign(header, org, body, tamper)
}

// curlOf writes a call as a curl command a shell runs as is.
func curlOf(method, url string, header http.Header, body []byte) string {
	var b strings.Builder
	b.WriteString("curl -X " + method + " " + shellQuote(url))
	names := make([]string, 0, len(header))
	for name := range header {
		if name != "Accept-Encoding" && name != CallHeader {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range header[name] {
			b.WriteString(" \\\n  -H " + shellQuote(name+": "+v))
		}
	}
	if len(body) > 0 {
		b.WriteString(" \\\n  --data-binary " + shellQuote(string(body)))
	}
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TamperBody returns a copy of body with one byte changed: the last
// lowercase letter becomes the next one, which keeps JSON valid (so the
// app refuses the signature, not the syntax); without such a letter the
// last byte's low bit flips.
func TamperBody(body []byte) []byte {
	out := bytes.Clone(body)
	for i := len(out) - 1; i >= 0; i-- {
		if c := out[i]; c >= 'a' && c <= 'z' {
			out[i] = 'a' + (c-'a'+1)%26
			return out
		}
	}
	if len(out) > 0 {
		out[len(out)-1] ^= 1
	}
	return out
}

// --- deliveries

// deliveryRequest asks for one signed delivery of an organization.
type deliveryRequest struct {
	// Organization is the organization's domain.
	Organization string `json:"organization"`
	// Event, or Events, are the events of the sample body.
	Event  string   `json:"event"`
	Events []string `json:"events"`
	// Body, when set, is sent instead of the sample.
	Body *string `json:"body"`
	// Module is the webhook module's key; default the descriptor's first.
	Module string `json:"module"`
	// Tamper is how to tamper with the delivery (see checkTamper).
	Tamper string `json:"tamper"`
	// URL is where to send it; default the module's url at the app.
	URL string `json:"url"`
}

func (c *console) postDelivery(w http.ResponseWriter, r *http.Request) error {
	var req deliveryRequest
	if err := readRequest(w, r, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	id, err := c.deliver(ctx, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, itemOf(c.log.get(id)))
	return nil
}

// deliver sends one delivery and returns its call's id.
func (c *console) deliver(ctx context.Context, req deliveryRequest) (int64, error) {
	if err := checkTamper(req.Tamper); err != nil {
		return 0, err
	}
	org, ok := c.s.organization(req.Organization)
	if !ok {
		return 0, failf(http.StatusNotFound, "There is no organization %s in the emulator.", respond.Quote(req.Organization))
	}
	if _, _, ok := c.s.signingSecret(org.Domain); !ok {
		return 0, failf(http.StatusConflict, "The app was never installed for %s, so the service has no app secret to sign its deliveries with: install it first.", org.Domain)
	}
	events := req.Events
	if req.Event != "" {
		events = append([]string{req.Event}, events...)
	}
	if req.Body == nil && len(events) == 0 {
		return 0, failf(http.StatusBadRequest, "Name the event to deliver (event), or give the body to send.")
	}
	module, url := req.Module, req.URL
	if url == "" {
		d, err := c.descriptor(ctx)
		if err != nil {
			return 0, err
		}
		hook, err := webhookModule(d.Webhooks, module)
		if err != nil {
			return 0, err
		}
		module, url = hook.Key, c.cfg.App+hook.URL
	} else if err := checkCallURL(url); err != nil {
		return 0, err
	}
	body := sampleDelivery(events)
	if req.Body != nil {
		body = []byte(*req.Body)
	}
	header := deliveryHeader(org, module)
	if err := c.sign(header, org.Domain, body, req.Tamper); err != nil {
		return 0, err
	}
	if req.Tamper == tamperBody {
		body = TamperBody(body)
	}
	ctx = withCall(ctx, callMeta{kind: kindDelivery, org: org.Domain, module: module, tamper: req.Tamper})
	return c.send(ctx, http.MethodPost, url, header, body)
}

// deliveryHeader is the header of a delivery the service sends, without
// its signature.
func deliveryHeader(org Organization, module string) http.Header {
	h := http.Header{}
	h.Set("User-Agent", "Service-Webhook")
	h.Set("Content-Type", "application/json")
	h.Set("X-Service-Id", itoa(org.ID))
	h.Set("X-Service-Domain", org.Domain)
	h.Set("X-Module-Key", module)
	return h
}

func (c *console) deliverySample(w http.ResponseWriter, r *http.Request) error {
	events := r.URL.Query()["event"]
	if len(events) == 0 {
		return failf(http.StatusBadRequest, "Name the event of the sample: ?event=project.translated.")
	}
	writeJSON(w, http.StatusOK, map[string]string{"body": string(sampleDelivery(events))})
	return nil
}

// checkCallURL accepts an http or https address to send a call to.
func checkCallURL(raw string) error {
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") || len(raw) < len("http://x") {
		return failf(http.StatusBadRequest, "url must be an http or https address.")
	}
	return nil
}

// webhookModule is the webhook module of key, or the first one when key
// is empty.
func webhookModule(hooks []descriptor.Webhook, key string) (descriptor.Webhook, error) {
	if len(hooks) == 0 {
		return descriptor.Webhook{}, failf(http.StatusConflict, "The app's descriptor declares no webhook module to deliver to.")
	}
	var keys []string
	for _, h := range hooks {
		if key == "" || h.Key == key {
			return h, nil
		}
		keys = append(keys, respond.Quote(h.Key))
	}
	return descriptor.Webhook{}, failf(http.StatusBadRequest, "The app declares no webhook module %s; it declares %s.", respond.Quote(key), strings.Join(keys, ", "))
}
