package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/cli"
	"github.com/servicegate/servicegate/emulator"
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
	fs.String("secret", cli.DemoClientSecret, "The client secret that signs the token")
	fs.String("secret-env", "", "Read the client secret from this environment variable")
	fs.String("domain", cli.DemoDomain, "The organization's domain (domain claim); empty leaves it out")
	fs.Int64("organization-id", 1, "The organization's id (context.organization_id)")
	fs.Int64("user", emulator.DefaultUserID, "The user's id (sub and context.user_id)")
	fs.String("audience", cli.DemoClientID, "The aud claim: the app's client_id")
	fs.String("issuer", emulator.DefaultIssuer, "The iss claim")
	fs.String("lifetime", "2h", "How long the token is valid")
	return fs
}

func serviceWebhookFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-webhook", pflag.ContinueOnError)
	fs.String("url", "", "The app's webhook URL (required)")
	fs.String("descriptor", "", "Take the module key and events from this app descriptor (a file or an address)")
	fs.String("secret", cli.DemoAppSecret, "The app secret that signs the delivery")
	fs.String("secret-env", "", "Read the app secret from this environment variable")
	fs.String("domain", cli.DemoDomain, "X-Service-Domain: the organization's domain")
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
	return cli.Secret(fl.String("secret"), fl.String("secret-env"), fl.Changed("secret"))
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
	return exitCode(true, cli.PrintToken(stdout, secret, emulator.Token{
		Issuer:         fl.String("issuer"),
		Audience:       fl.String("audience"),
		UserID:         user,
		OrganizationID: orgID,
		Domain:         fl.String("domain"),
		Lifetime:       lifetime,
	}))
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
	return exitCode(cli.SendWebhook(cli.WebhookOptions{
		URL: target, Descriptor: fl.String("descriptor"), Secret: secret,
		Domain: fl.String("domain"), OrganizationID: fl.String("organization-id"),
		ModuleKey: fl.String("module-key"), ModuleKeyGiven: fl.Changed("module-key"),
		Event: fl.String("event"), EventGiven: fl.Changed("event"),
		Project: fl.String("project"), TargetLanguage: fl.String("target-language"),
		BodyFile: fl.String("body"), Tamper: fl.Bool("tamper"), Timeout: timeout,
	}, stdout))
}

// exitCode is the exit code of a command that did its work (ok), found
// it refused (not ok, the refusal printed) or failed (err).
func exitCode(ok bool, err error) (int, error) {
	if err != nil || !ok {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
}
