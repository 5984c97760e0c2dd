package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// Delivery is the event of LifecycleOptions that sends the descriptor's
// webhook events, signed with the organization's installation secret.
const Delivery = "delivery"

// LifecycleOptions are what caddy service-app install, uninstall, paid
// and deliver ask the emulator to call.
type LifecycleOptions struct {
	// Event is emulator.EventInstalled, EventUninstall,
	// EventSubscriptionPaid, or Delivery.
	Event string
	// App is the app's base address as the service reaches it, without a
	// trailing slash.
	App string
	// Organization is the organization's domain.
	Organization string
	// Emulator is the emulated service's address.
	Emulator string
	// Descriptor is the app descriptor, for the event paths and webhook
	// modules: a file or an address.
	Descriptor string
	// Timeout bounds the wait for each answer.
	Timeout time.Duration

	// A delivery's event (instead of the module's declared events), its
	// body from a file (instead of the sample), and how to tamper with
	// it: unsigned, wrong_secret, other_org, or body (one letter changed
	// after signing).
	DeliverEvent, BodyFile, Tamper string
}

// CallLifecycle asks the emulator to make the lifecycle call (or the
// deliveries) to the app, and prints one line per call with how the app
// answered; an error says what failed, a call not answered 2xx too.
func CallLifecycle(o LifecycleOptions, out io.Writer) error {
	if o.Event != Delivery && (o.DeliverEvent != "" || o.BodyFile != "" || o.Tamper != "") {
		return errors.New("--event, --body and --tamper are for deliver")
	}
	d, err := LoadDescriptor(o.Descriptor)
	if err != nil {
		return err
	}
	var body *string
	if o.BodyFile != "" {
		raw, err := os.ReadFile(o.BodyFile)
		if err != nil {
			return fmt.Errorf("reading the body: %w", err)
		}
		b := string(raw)
		body = &b
	}
	reqs := o.requests(d, body)
	if len(reqs) == 0 {
		return fmt.Errorf("%s declares no %s: nothing to call", o.Descriptor, map[bool]string{true: "webhook module", false: "events." + o.Event}[o.Event == Delivery])
	}
	client := &http.Client{Timeout: o.Timeout}
	failed := 0
	for _, req := range reqs {
		body, _ := json.Marshal(req)
		resp, err := client.Post(strings.TrimSuffix(o.Emulator, "/")+emulator.LifecyclePath, "application/json", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("asking the emulator: %w", err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var answer emulator.LifecycleAnswer
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &answer) != nil {
			var msg struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(raw, &msg) == nil && msg.Message != "" {
				return fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, msg.Message)
			}
			return fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, answerSummary(raw))
		}
		line := fmt.Sprintf("%-18s %-16s %s", o.Event, o.Organization, req.URL)
		if answer.Error != "" {
			fmt.Fprintf(out, "%s  no answer: %s\n", line, answer.Error)
			failed++
			continue
		}
		fmt.Fprintf(out, "%s  %d %s\n", line, answer.Status, answerSummary([]byte(answer.Answer)))
		if answer.Status < 200 || answer.Status > 299 {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d calls were not answered 2xx", failed, len(reqs))
	}
	return nil
}

// requests are the calls the emulator is asked to make: one per webhook
// module for Delivery, else the one to the event's declared path.
func (o LifecycleOptions) requests(d *descriptor.Descriptor, body *string) []emulator.LifecycleRequest {
	var reqs []emulator.LifecycleRequest
	if o.Event == Delivery {
		for _, w := range d.Webhooks {
			events := w.Events
			if o.DeliverEvent != "" {
				events = []string{o.DeliverEvent}
			}
			reqs = append(reqs, emulator.LifecycleRequest{Event: o.Event, Organization: o.Organization, URL: o.App + w.URL,
				ModuleKey: w.Key, Events: events, Body: body, Tamper: o.Tamper})
		}
		return reqs
	}
	path := map[string]string{emulator.EventInstalled: d.Events.Installed, emulator.EventUninstall: d.Events.Uninstall,
		emulator.EventSubscriptionPaid: d.Events.SubscriptionPaid}[o.Event]
	if path != "" {
		reqs = append(reqs, emulator.LifecycleRequest{Event: o.Event, Organization: o.Organization, URL: o.App + path})
	}
	return reqs
}
