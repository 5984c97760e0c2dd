package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/descriptor"
	"github.com/servicegate/servicegate/emulator"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "service-app",
		Usage: "check <descriptor> | send --descriptor <descriptor> --app <url> [options] | install|uninstall|paid|deliver --app <url> [--org <domain>]",
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

send --descriptor <descriptor> --app <url> [--file <path>] [--only events|jobs]
  Installs the app in the emulated service from its descriptor and calls
  every declared module at --app (the gateway in front of the app): one
  signed bulk delivery of the declared events to each webhook url with its
  module key, and for a source file (--file) a parse-file job, a build-file
  job with the parsed strings, and a file-pre-export job to each file
  module. Prints one line per call, then how many were answered 2xx, as
  plain text on stdout; the exit code is non-zero when a call was not.

install|uninstall|paid|deliver --app <url> [--org <domain>] [--emulator <url>]
  Asks the emulated service (a site with service_emulator) to install the
  app for an organization (a fresh app secret, the installed call to the
  descriptor's events.installed path at --app), to uninstall it, to send
  subscription_paid, or to send the descriptor's webhook events signed
  with the organization's installation secret.

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
			cmd.AddCommand(check, send)
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
	fs.String("secret", demoAppSecret, "The app secret that signs deliveries")
	fs.String("secret-env", "", "Read the app secret from this environment variable")
	fs.String("domain", demoDomain, "The organization's domain")
	fs.Int64("organization-id", 1, "The organization's id")
	fs.String("file", "", "A source file for the file jobs; without it only events are sent")
	fs.String("only", "", "Send only events, or only jobs")
	fs.String("timeout", "2m", "How long to wait for each answer")
	return fs
}

// runServiceAppCheck prints what a descriptor declares, or its defects.
func runServiceAppCheck(source string, stdout io.Writer) (int, error) {
	d, err := loadForCommand(source)
	var defects *descriptor.Defects
	if errors.As(err, &defects) {
		fmt.Fprintln(stdout, err)
		return caddy.ExitCodeFailedStartup, nil
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Fprintf(stdout, "%s: no defects; %s\n", source, summarize(d))
	for _, m := range d.FileFormats {
		fmt.Fprintf(stdout, "  custom-file-format %-20s %s  (limits and contract)\n", m.Key, m.URL)
	}
	for _, m := range d.PreExports {
		fmt.Fprintf(stdout, "  file-pre-export    %-20s %s  (limits and contract)\n", m.Key, m.URL)
	}
	for _, m := range d.Webhooks {
		fmt.Fprintf(stdout, "  webhook            %-20s %s  (signature, module key, events %v)\n", m.Key, m.URL, m.Events)
	}
	for _, m := range d.Others {
		fmt.Fprintf(stdout, "  %-18s %-20s %s  (token, like every other path)\n", m.Kind, m.Key, m.URL)
	}
	return caddy.ExitCodeSuccess, nil
}

func summarize(d *descriptor.Descriptor) string {
	s := fmt.Sprintf("%d file format, %d pre-export and %d webhook modules", len(d.FileFormats), len(d.PreExports), len(d.Webhooks))
	if len(d.Others) > 0 {
		s += fmt.Sprintf(", %d other (%s)", len(d.Others), strings.Join(d.Ignored, ", "))
	}
	if d.Identifier != "" {
		s = "app " + strconv.Quote(d.Identifier) + ", " + s
	}
	return s
}

// loadForCommand reads a descriptor from a file or an address, with no
// kept copy: the command says what the app serves now.
func loadForCommand(source string) (*descriptor.Descriptor, error) {
	l, err := (&descriptor.Loader{}).Load(context.Background(), source)
	if err != nil {
		return nil, err
	}
	return l.Descriptor, nil
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
	only := fl.String("only")
	if only != "" && only != "events" && only != "jobs" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--only takes events or jobs, not %q", only)
	}
	orgID, err := fl.GetInt64("organization-id")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	d, err := loadForCommand(source)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	challenges := newTokenChallenges()
	in := &emulator.Installation{
		Descriptor: d, AppURL: app, AppSecret: secret,
		OrganizationID: orgID, Domain: fl.String("domain"),
		Client: &http.Client{Timeout: timeout, Transport: challenges},
	}
	ctx := context.Background()
	var calls []emulator.Call
	if only != "jobs" {
		calls = append(calls, in.SendEvents(ctx)...)
	}
	if only != "events" {
		file := fl.String("file")
		if file == "" && only == "jobs" {
			return caddy.ExitCodeFailedStartup, errors.New("--only jobs needs --file, the source file of the jobs")
		}
		if file != "" {
			content, err := os.ReadFile(file)
			if err != nil {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("reading the source file: %w", err)
			}
			calls = append(calls, in.SendJobs(ctx, filepath.Base(file), content)...)
		}
	}
	if len(calls) == 0 {
		return caddy.ExitCodeFailedStartup, errors.New("the descriptor declares no module to call")
	}
	failed, hint := 0, ""
	for _, c := range calls {
		if c.Kind == descriptor.KindWebhook && hint == "" {
			hint = demoSecretHint(c.Status, secret, challenges.asked(c.URL))
		}
		line := fmt.Sprintf("%-18s %-20s %-15s %s", c.Kind, c.Key, c.Job, c.URL)
		if c.Err != nil {
			fmt.Fprintf(stdout, "%s  no answer: %v\n", line, c.Err)
		} else {
			fmt.Fprintf(stdout, "%s  %d %s\n", line, c.Status, answerSummary(c.Body))
		}
		if !c.OK() {
			failed++
		}
	}
	if hint != "" {
		fmt.Fprintln(stdout, hint)
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d calls were not answered 2xx\n", failed, len(calls))
		return caddy.ExitCodeFailedStartup, nil
	}
	fmt.Fprintf(stdout, "all %d calls were answered 2xx\n", len(calls))
	return caddy.ExitCodeSuccess, nil
}

// answerSummary is the start of an answer, on one line.
func answerSummary(body []byte) string {
	const max = 120
	s := []rune(strings.TrimSpace(string(body)))
	for i, r := range s {
		if r == '\n' || r == '\r' {
			s[i] = ' '
		}
	}
	if len(s) > max {
		return string(s[:max]) + "…"
	}
	return string(s)
}
