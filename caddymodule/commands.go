package caddymodule

import (
	"bytes"
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

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

// Defaults of the subcommands, matching the demo configuration.
const (
	demoClientSecret = "demo-client-secret"
	demoAppSecret    = "demo-app-secret"
	demoDomain       = "acme.example"
	demoClientID     = "demo-client"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "service-token",
		Usage: "[--secret <secret> | --secret-env <name>] [--domain <domain>] [--organization-id <n>] [--user <id>] [--audience <client_id>] [--issuer <iss>] [--lifetime <duration>]",
		Short: "Prints an access token that service_emulator and service_auth accept",
		Long: `
Mints an HS256 access token shaped like the service's, signed with the app's
client secret, and prints it (and nothing else) on stdout. service_auth with
hs256_secret set to the same secret accepts it, and so does service_emulator.

The defaults match the demo: secret demo-client-secret, organization
acme.example with id 1, user 7, audience demo-client, issuer service-emulator,
lifetime 2h. An empty --domain leaves the domain claim out. Prefer
--secret-env over --secret for real secrets: command lines are visible to
other users of the machine.

This is a development tool.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().AddFlagSet(serviceTokenFlags())
			cmd.RunE = plainCommand(runServiceToken)
		},
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "service-webhook",
		Usage: "--url <url> [--descriptor <descriptor>] [--secret <secret> | --secret-env <name>] [--domain <domain>] [--organization-id <n>] [--module-key <key>] [--event <name>] [--project <id>] [--target-language <id>] [--body <file.json>] [--tamper] [--timeout <duration>]",
		Short: "Sends a signed webhook event delivery to a URL",
		Long: `
Sends one bulk event delivery the way the service does: POST <url> with
{"events":[{"event":…,"project":{"id":…},"targetLanguage":{"id":…}}]} (or the
bytes of --body), signed in X-Service-Signature with HMAC-SHA256 of the body
under the app secret (lowercase hex), and the headers User-Agent,
X-Service-Id, X-Service-Domain and X-Module-Key.

--descriptor (the app descriptor: a file, or an address such as
http://127.0.0.1:3000/manifest.json) supplies the module key and the events:
those of its webhook module (of --module-key when it declares several), one
event each, unless --event is given.

--tamper changes one byte of the body after signing, to see the delivery
refused (by service_webhook in front of the app, or by the app itself).

Prints the answer's status line and body on stdout, and what to do when a
delivery signed with the demo secret is refused. The exit code is non-zero
when the answer is not 2xx; errors go to stderr as plain text.

Defaults: secret demo-app-secret, domain acme.example, organization id 1,
module key events-hook, event project.translated, project 1, target language
uk, timeout 30s. This is a development tool.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().AddFlagSet(serviceWebhookFlags())
			cmd.RunE = plainCommand(runServiceWebhook)
		},
	})
}

func serviceTokenFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-token", pflag.ContinueOnError)
	fs.String("secret", demoClientSecret, "The client secret that signs the token")
	fs.String("secret-env", "", "Read the client secret from this environment variable")
	fs.String("domain", demoDomain, "The organization's domain (domain claim); empty leaves it out")
	fs.Int64("organization-id", 1, "The organization's id (context.organization_id)")
	fs.Int64("user", emulator.DefaultUserID, "The user's id (sub and context.user_id)")
	fs.String("audience", demoClientID, "The aud claim: the app's client_id")
	fs.String("issuer", emulator.DefaultIssuer, "The iss claim")
	fs.String("lifetime", "2h", "How long the token is valid")
	return fs
}

func serviceWebhookFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-webhook", pflag.ContinueOnError)
	fs.String("url", "", "The app's webhook URL (required)")
	fs.String("descriptor", "", "Take the module key and events from this app descriptor (a file or an address)")
	fs.String("secret", demoAppSecret, "The app secret that signs the delivery")
	fs.String("secret-env", "", "Read the app secret from this environment variable")
	fs.String("domain", demoDomain, "X-Service-Domain: the organization's domain")
	fs.String("organization-id", "1", "X-Service-Id: the organization's id")
	fs.String("module-key", "events-hook", "X-Module-Key: the key of the webhook module")
	fs.String("event", "project.translated", "The event name")
	fs.String("project", "1", "The project id of the event")
	fs.String("target-language", "uk", "The target language id of the event")
	fs.String("body", "", "Send the bytes of this file as the body instead")
	fs.Bool("tamper", false, "Change one byte of the body after signing")
	fs.String("timeout", "30s", "How long to wait for the answer")
	return fs
}

// plainCommand runs one of servicegate's subcommands for cobra. What the
// command prints goes to stdout as it wrote it; an error goes to stderr as
// one plain line (Caddy's own wrapper writes it as a log entry, JSON when
// stderr is not a terminal); the exit code is the command's.
func plainCommand(run func(fl caddycmd.Flags, stdout io.Writer) (int, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		code, err := run(caddycmd.Flags{FlagSet: cmd.Flags()}, cmd.OutOrStdout())
		return exitWith(commandOutcome(cmd.ErrOrStderr(), cmd.CommandPath(), code, err), nil)
	}
}

// commandOutcome writes err, if any, on stderr as "<command>: <error>" and
// returns the exit code: never success with an error.
func commandOutcome(stderr io.Writer, command string, code int, err error) int {
	if err == nil {
		return code
	}
	fmt.Fprintf(stderr, "%s: %v\n", command, err)
	if code == caddy.ExitCodeSuccess {
		code = caddy.ExitCodeFailedStartup
	}
	return code
}

// commandSecret is --secret, or the variable named by --secret-env.
func commandSecret(fl caddycmd.Flags) (string, error) {
	name := fl.String("secret-env")
	if name == "" {
		if fl.String("secret") == "" {
			return "", errors.New("the secret is empty")
		}
		return fl.String("secret"), nil
	}
	if fl.Changed("secret") {
		return "", errors.New("give --secret or --secret-env, not both")
	}
	secret := os.Getenv(name)
	if secret == "" {
		return "", fmt.Errorf("the environment variable %s is empty or not set", name)
	}
	return secret, nil
}

// commandTimeout is --timeout, a positive duration.
func commandTimeout(fl caddycmd.Flags) (time.Duration, error) {
	timeout, err := caddy.ParseDuration(fl.String("timeout"))
	if err != nil || timeout <= 0 {
		return 0, fmt.Errorf("--timeout %q is not a positive duration", fl.String("timeout"))
	}
	return timeout, nil
}

func runServiceToken(fl caddycmd.Flags, stdout io.Writer) (int, error) {
	secret, err := commandSecret(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	lifetime, err := caddy.ParseDuration(fl.String("lifetime"))
	if err != nil || lifetime < time.Second {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--lifetime %q is not a duration of at least 1s", fl.String("lifetime"))
	}
	orgID, err := fl.GetInt64("organization-id")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	user, err := fl.GetInt64("user")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	token, err := emulator.MintToken(secret, emulator.Token{
		Issuer:         fl.String("issuer"),
		Audience:       fl.String("audience"),
		UserID:         user,
		OrganizationID: orgID,
		Domain:         fl.String("domain"),
		Lifetime:       lifetime,
	})
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if _, err := fmt.Fprintln(stdout, token); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
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

func runServiceWebhook(fl caddycmd.Flags, stdout io.Writer) (int, error) {
	target := fl.String("url")
	if target == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--url is required")
	}
	secret, err := commandSecret(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	timeout, err := commandTimeout(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	moduleKey, events := fl.String("module-key"), []string{fl.String("event")}
	if source := fl.String("descriptor"); source != "" {
		desc, err := loadForCommand(source)
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		hook, err := declaredWebhook(desc, source, moduleKey, fl.Changed("module-key"))
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		moduleKey = hook.Key
		if !fl.Changed("event") {
			events = hook.Events
		}
	}
	var body []byte
	if file := fl.String("body"); file != "" {
		if body, err = os.ReadFile(file); err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("reading the body: %w", err)
		}
	} else {
		list := make([]webhookEvent, 0, len(events))
		for _, e := range events {
			list = append(list, webhookEvent{
				Event:          e,
				Project:        webhookItem{fl.String("project")},
				TargetLanguage: webhookItem{fl.String("target-language")},
			})
		}
		if body, err = json.Marshal(map[string][]webhookEvent{"events": list}); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
	}
	d := emulator.Delivery{
		Body:           body,
		Secret:         secret,
		OrganizationID: fl.String("organization-id"),
		Domain:         fl.String("domain"),
		ModuleKey:      moduleKey,
	}
	if fl.Bool("tamper") {
		if len(body) == 0 {
			return caddy.ExitCodeFailedStartup, errors.New("--tamper needs a body to change")
		}
		d.Signature = emulator.SignDelivery(body, secret)
		d.Body = tamper(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	challenges := newTokenChallenges()
	status, answer, err := emulator.SendDelivery(ctx, &http.Client{Timeout: timeout, Transport: challenges}, target, d)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if len(answer) > 0 && answer[len(answer)-1] != '\n' {
		answer = append(answer, '\n')
	}
	if _, err := fmt.Fprintf(stdout, "%s %s\n%s", strconv.Itoa(status), http.StatusText(status), answer); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if status < 200 || status > 299 {
		// The status line and the answer say what was refused; the
		// tool adds what it alone knows.
		if hint := demoSecretHint(status, secret, fl.Bool("tamper") || challenges.asked(target)); hint != "" {
			fmt.Fprintln(stdout, hint)
		}
		return caddy.ExitCodeFailedStartup, nil
	}
	return caddy.ExitCodeSuccess, nil
}

// demoSecretHint is what to do when a signature made with the demo app
// secret was refused (401): the app has a secret of its own. Not when the
// refusal is meant (a tampered delivery) or is about something else (a
// 401 that asks for a token).
func demoSecretHint(status int, secret string, otherCause bool) string {
	if status != http.StatusUnauthorized || secret != demoAppSecret || otherCause {
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

// tamper returns a copy of body with one byte changed: the last lowercase
// letter becomes the next one, which keeps JSON valid (so the app refuses
// the signature, not the syntax); without such a letter the last byte's
// low bit flips.
func tamper(body []byte) []byte {
	out := bytes.Clone(body)
	for i := len(out) - 1; i >= 0; i-- {
		if c := out[i]; c >= 'a' && c <= 'z' {
			out[i] = 'a' + (c-'a'+1)%26
			return out
		}
	}
	out[len(out)-1] ^= 1
	return out
}
