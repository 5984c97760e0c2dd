package caddymodule

import (
	"cmp"
	"errors"
	"io"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/cli"
	"github.com/servicegate/servicegate/emulator"
)

// installationCommands are the subcommands of caddy service-app that drive
// an app's installation through the emulator: install, uninstall, paid,
// deliver.
func installationCommands() []*cobra.Command {
	short := map[string]string{
		emulator.EventInstalled:        "Installs the app for an organization in the emulated service (a fresh app secret, the installed call)",
		emulator.EventUninstall:        "Uninstalls the app for an organization in the emulated service (the uninstall call)",
		emulator.EventSubscriptionPaid: "Sends the subscription_paid call of an organization",
		cli.Delivery:                   "Sends the descriptor's webhook events, signed with the organization's installation secret",
	}
	var cmds []*cobra.Command
	for _, c := range []struct{ use, event string }{
		{"install", emulator.EventInstalled}, {"uninstall", emulator.EventUninstall},
		{"paid", emulator.EventSubscriptionPaid}, {"deliver", cli.Delivery},
	} {
		use := c.use + " --app <url> [--org <domain>]"
		if c.use == "deliver" {
			use += " [--event <event>] [--body <file>] [--tamper unsigned|wrong_secret|other_org|body]"
		}
		cmd := &cobra.Command{Use: use, Short: short[c.event], Args: cobra.NoArgs}
		cmd.Flags().AddFlagSet(serviceAppLifecycleFlags(c.use))
		event := c.event
		cmd.RunE = plainCommand(func(fl caddycmd.Flags, stdout io.Writer) (int, error) {
			return runServiceAppLifecycle(fl, event, stdout)
		})
		cmds = append(cmds, cmd)
	}
	return cmds
}

func serviceAppLifecycleFlags(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-app "+name, pflag.ContinueOnError)
	fs.String("app", "", "The app's base address as the service reaches it: the gateway, e.g. http://localhost:8080 (required)")
	fs.String("org", cli.DemoDomain, "The organization's domain")
	fs.String("emulator", cli.DemoEmulator, "The emulated service's address (a site with service_emulator)")
	fs.String("descriptor", "", "The app descriptor, for the event paths and webhook modules; default: <app>/manifest.json")
	fs.String("timeout", "30s", "How long to wait for the answer")
	if name == "deliver" {
		fs.String("event", "", "Deliver this event instead of the webhook module's declared events")
		fs.String("body", "", "Send the bytes of this file as the delivery's body")
		fs.String("tamper", "", "Tamper with the delivery: unsigned, wrong_secret, other_org, or body (one letter changed after signing)")
	}
	return fs
}

// runServiceAppLifecycle asks the emulator to make one lifecycle call (or
// the deliveries) to the app, and prints how the app answered.
func runServiceAppLifecycle(fl caddycmd.Flags, event string, stdout io.Writer) (int, error) {
	app := strings.TrimSuffix(fl.String("app"), "/")
	if app == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--app is required: the gateway's address, e.g. http://localhost:8080")
	}
	timeout, err := commandTimeout(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	o := cli.LifecycleOptions{
		Event: event, App: app, Organization: fl.String("org"), Emulator: fl.String("emulator"),
		Descriptor: cmp.Or(fl.String("descriptor"), app+appDefaultDescriptorPath), Timeout: timeout,
	}
	if event == cli.Delivery {
		o.DeliverEvent, o.BodyFile, o.Tamper = fl.String("event"), fl.String("body"), fl.String("tamper")
	}
	return exitCode(true, cli.CallLifecycle(o, stdout))
}
