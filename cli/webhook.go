package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// WebhookOptions are what caddy service-webhook sends, and where.
type WebhookOptions struct {
	// URL is the app's webhook URL.
	URL string
	// Descriptor, when set, is the app descriptor (a file or an address)
	// that supplies the module key and the events.
	Descriptor string
	// Secret is the app secret that signs the delivery.
	Secret string
	// Domain and OrganizationID are X-Service-Domain and X-Service-Id.
	Domain, OrganizationID string
	// ModuleKey is X-Module-Key; ModuleKeyGiven says it was chosen rather
	// than defaulted, which picks the descriptor's module of that key.
	ModuleKey      string
	ModuleKeyGiven bool
	// Event is the event name; EventGiven says it was chosen, which
	// overrides the descriptor's events.
	Event      string
	EventGiven bool
	// Project and TargetLanguage are the ids in the event.
	Project, TargetLanguage string
	// BodyFile, when set, is a file whose bytes are sent instead.
	BodyFile string
	// Tamper changes one byte of the body after signing.
	Tamper bool
	// Timeout bounds the wait for the answer.
	Timeout time.Duration
}

// webhookEvent is one event of a delivery, with the fields in the order
// the service sends them.
type webhookEvent struct {
	Event          string      `json:"event"`
	Project        webhookItem `json:"project"`
	TargetLanguage webhookItem `json:"targetLanguage"`
}

type webhookItem struct {
	ID string `json:"id"`
}

// SendWebhook sends one signed bulk event delivery the way the service
// does, and prints the answer's status line and body on out, and what to
// do when the demo secret was refused. answered2xx is false when the
// answer is not 2xx; err is set when there was no answer to print.
func SendWebhook(o WebhookOptions, out io.Writer) (answered2xx bool, err error) {
	moduleKey, events := o.ModuleKey, []string{o.Event}
	if o.Descriptor != "" {
		desc, err := LoadDescriptor(o.Descriptor)
		if err != nil {
			return false, err
		}
		hook, err := declaredWebhook(desc, o.Descriptor, moduleKey, o.ModuleKeyGiven)
		if err != nil {
			return false, err
		}
		moduleKey = hook.Key
		if !o.EventGiven {
			events = hook.Events
		}
	}
	body, err := o.body(events)
	if err != nil {
		return false, err
	}
	d := emulator.Delivery{Body: body, Secret: o.Secret, OrganizationID: o.OrganizationID, Domain: o.Domain, ModuleKey: moduleKey}
	if o.Tamper {
		if len(body) == 0 {
			return false, errors.New("--tamper needs a body to change")
		}
		d.Signature = emulator.SignDelivery(body, o.Secret)
		d.Body = emulator.TamperBody(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	challenges := newTokenChallenges()
	status, answer, err := emulator.SendDelivery(ctx, &http.Client{Timeout: o.Timeout, Transport: challenges}, o.URL, d)
	if err != nil {
		return false, err
	}
	if len(answer) > 0 && answer[len(answer)-1] != '\n' {
		answer = append(answer, '\n')
	}
	if _, err := fmt.Fprintf(out, "%s %s\n%s", strconv.Itoa(status), http.StatusText(status), answer); err != nil {
		return false, err
	}
	if status < 200 || status > 299 {
		// The status line and the answer say what was refused; the
		// tool adds what it alone knows.
		if hint := demoSecretHint(status, o.Secret, o.Tamper || challenges.asked(o.URL)); hint != "" {
			fmt.Fprintln(out, hint)
		}
		return false, nil
	}
	return true, nil
}

// body is the delivery: the bytes of BodyFile, or one event of each name.
func (o WebhookOptions) body(events []string) ([]byte, error) {
	if o.BodyFile != "" {
		body, err := os.ReadFile(o.BodyFile)
		if err != nil {
			return nil, fmt.Errorf("reading the body: %w", err)
		}
		return body, nil
	}
	list := make([]webhookEvent, 0, len(events))
	for _, e := range events {
		list = append(list, webhookEvent{Event: e, Project: webhookItem{o.Project}, TargetLanguage: webhookItem{o.TargetLanguage}})
	}
	return json.Marshal(map[string][]webhookEvent{"events": list})
}

// demoSecretHint is what to do when a signature made with the demo app
// secret was refused (401): the app has a secret of its own. Not when the
// refusal is meant (a tampered delivery) or is about something else (a
// 401 that asks for a token).
func demoSecretHint(status int, secret string, otherCause bool) string {
	if status != http.StatusUnauthorized || secret != DemoAppSecret || otherCause {
		return ""
	}
	return "The delivery was signed with the demo app secret. Pass the app's secret with --secret-env NAME (or --secret)."
}

// tokenChallenges is a transport that remembers the URLs whose answer
// carried a WWW-Authenticate challenge: a 401 that asks for a token (the
// URL is not a webhook route), not one that refused a signature.
type tokenChallenges struct {
	mu   sync.Mutex
	urls map[string]bool
}

func newTokenChallenges() *tokenChallenges {
	return &tokenChallenges{urls: map[string]bool{}}
}

func (t *tokenChallenges) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.Header.Get("WWW-Authenticate") != "" {
		t.mu.Lock()
		t.urls[r.URL.String()] = true
		t.mu.Unlock()
	}
	return resp, err
}

// asked tells whether url answered with a challenge.
func (t *tokenChallenges) asked(url string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.urls[url]
}

// declaredWebhook is the webhook module of the descriptor to deliver to:
// the one named key when the key was given, else the only one.
func declaredWebhook(d *descriptor.Descriptor, source, key string, keyGiven bool) (descriptor.Webhook, error) {
	var keys []string
	for _, w := range d.Webhooks {
		if keyGiven && w.Key == key || !keyGiven && len(d.Webhooks) == 1 {
			return w, nil
		}
		keys = append(keys, strconv.Quote(w.Key))
	}
	switch {
	case len(keys) == 0:
		return descriptor.Webhook{}, fmt.Errorf("%s declares no webhook module", source)
	case keyGiven:
		return descriptor.Webhook{}, fmt.Errorf("%s declares no webhook module %q; it declares %s", source, key, strings.Join(keys, ", "))
	}
	return descriptor.Webhook{}, fmt.Errorf("%s declares the webhook modules %s: choose one with --module-key", source, strings.Join(keys, ", "))
}
