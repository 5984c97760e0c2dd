package caddymodule

import (
	"errors"
	"io"
	"os"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/cli"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "service-app",
		Usage: "check <descriptor> | send --descriptor <descriptor> --app <url> [options] | conformance --app <url> [options] | install|uninstall|paid|deliver --app <url> [--org <domain>] [options]",
		Short: "Checks an app descriptor, and calls an app's modules the way the service does",
		Long: `
check <descriptor>
  Reads an app descriptor (a file, or an address such as
  http://127.0.0.1:3000/manifest.json) and reports every defect service_app
  would refuse at load: missing key or url, duplicate keys or urls, absolute
  urls, urls that are not plain paths (wildcards, queries, encodings), a
  webhook without events, unknown environments, signaturePatterns that do
  not compile or cost too much. Lists the modules, those of kinds that are
  only routed behind the token (pages) too. Exit code 1 on a defect.

send --descriptor <descriptor> --app <url> [--file <path>] [--only events|jobs] [--emulator <url>]
  Asks the emulated service (a site with service_emulator, whose console
  then shows the calls) to call every declared module at --app (the
  gateway in front of the app), as the service does: one signed bulk
  delivery of the declared events to each webhook url with its module
  key (signed with the organization's installation secret when it has
  one, else with --secret), and for a source file (--file) a parse-file
  job, a build-file job with the parsed strings, and a file-pre-export
  job to each file module. Prints one line per call, then how many were
  answered 2xx, as plain text on stdout; the exit code is non-zero when a
  call was not.

conformance --app <url> [--descriptor <url|path>] [--secret <app secret>]
        [--file [<module key>=]<path>]... [--only <glob>] [--timeout <dur>]
        [--format text|json|junit|markdown] [--output <file>] [--list]
  Plays the service's whole module contract against the app at --app (the
  app, or the gateway in front of it), for every module its descriptor
  declares: parse-file and build-file jobs with the given files (by
  content and by URL, as source and translation, round trips, an empty
  file, a byte-order mark, CRLF line ends, a file near 5 MB),
  file-pre-export jobs, signed webhook deliveries (through a gateway,
  signed with the organization's installation secret, which the emulator
  holds, unless --secret or --secret-env is given), and the lifecycle
  calls. Each case <kind>/<module key>/<job>/<case> is passed, failed (with
  the reason and a curl that sends the same request) or skipped. --list
  prints the case ids; --only runs those matching a glob. Exit code 0:
  every case passed; 1: a case failed; 2: the run could not start.

install|uninstall|paid|deliver --app <url> [--org <domain>] [--emulator <url>]
  Asks the emulated service (a site with service_emulator) to install the
  app for an organization (a fresh app secret, the installed call to the
  descriptor's events.installed path at --app), to uninstall it, to send
  subscription_paid, or to send the descriptor's webhook events signed
  with the organization's installation secret (the last one it had once
  uninstalled). deliver takes --event (one event instead of those
  declared), --body (a file's bytes as the body) and --tamper (unsigned,
  wrong_secret, other_org, or body: one letter changed after signing).

This is a development tool.
`,
		CobraFunc: func(cmd *cobra.Command) {
			check := &cobra.Command{
				Use:   "check <descriptor>",
				Short: "Reports every defect of an app descriptor",
				Args:  cobra.ExactArgs(1),
				RunE: func(cmd *cobra.Command, args []string) error {
					code, err := runServiceAppCheck(args[0], cmd.OutOrStdout())
					return exitWith(commandOutcome(cmd.ErrOrStderr(), cmd.CommandPath(), code, err), nil)
				},
			}
			send := &cobra.Command{
				Use:   "send --descriptor <descriptor> --app <url>",
				Short: "Calls every declared module of an app the way the service does",
				Args:  cobra.NoArgs,
			}
			send.Flags().AddFlagSet(serviceAppSendFlags())
			send.RunE = plainCommand(runServiceAppSend)
			cmd.AddCommand(check, send, conformanceCommand())
			cmd.AddCommand(installationCommands()...)
		},
	})
}

// exitWith turns a command func's result into cobra's, exiting with the
// code as Caddy's own commands do.
func exitWith(code int, err error) error {
	if err != nil {
		return err
	}
	if code != caddy.ExitCodeSuccess {
		os.Exit(code)
	}
	return nil
}

func serviceAppSendFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-app send", pflag.ContinueOnError)
	fs.String("descriptor", "", "The app descriptor: a file or an address (required)")
	fs.String("app", "", "The app's base address as the service reaches it, e.g. http://localhost:8080 (required)")
	fs.String("secret", cli.DemoAppSecret, "The app secret that signs deliveries when the organization has no installation in the emulator")
	fs.String("secret-env", "", "Read the app secret from this environment variable")
	fs.String("domain", cli.DemoDomain, "The organization's domain")
	fs.Int64("organization-id", 1, "The organization's id")
	fs.String("file", "", "A source file for the file jobs; without it only events are sent")
	fs.String("only", "", "Send only events, or only jobs")
	fs.String("emulator", cli.DemoEmulator, "The emulated service's address (a site with service_emulator): the calls go through it")
	fs.String("timeout", "2m", "How long to wait for each answer")
	return fs
}

// runServiceAppCheck prints what a descriptor declares, or its defects.
func runServiceAppCheck(source string, stdout io.Writer) (int, error) {
	return exitCode(cli.CheckDescriptor(source, stdout))
}

func runServiceAppSend(fl caddycmd.Flags, stdout io.Writer) (int, error) {
	source, app := fl.String("descriptor"), fl.String("app")
	if source == "" || app == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--descriptor and --app are required")
	}
	secret, err := commandSecret(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	timeout, err := commandTimeout(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	orgID, err := fl.GetInt64("organization-id")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return exitCode(cli.SendToApp(cli.SendOptions{
		Descriptor: source, App: app, Emulator: fl.String("emulator"), Secret: secret,
		Domain: fl.String("domain"), OrganizationID: orgID,
		File: fl.String("file"), Only: fl.String("only"), Timeout: timeout,
	}, stdout))
}
