package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/emulator"
)

// demoEmulator is the emulator's address in Caddyfile.example.
const demoEmulator = "http://localhost:8081"

// installationCommands are the subcommands of caddy service-app that drive
// an app's installation through the emulator: install, uninstall, paid,
// deliver.
func installationCommands() []*cobra.Command {
	short := map[string]string{
		emulator.EventInstalled:        "Installs the app for an organization in the emulated service (a fresh app secret, the installed call)",
		emulator.EventUninstall:        "Uninstalls the app for an organization in the emulated service (the uninstall call)",
		emulator.EventSubscriptionPaid: "Sends the subscription_paid call of an organization",
		"delivery":                     "Sends the descriptor's webhook events, signed with the organization's installation secret",
	}
	var cmds []*cobra.Command
	for _, c := range []struct{ use, event string }{
		{"install", emulator.EventInstalled}, {"uninstall", emulator.EventUninstall},
		{"paid", emulator.EventSubscriptionPaid}, {"deliver", "delivery"},
	} {
		cmd := &cobra.Command{Use: c.use + " --app <url> [--org <domain>]", Short: short[c.event], Args: cobra.NoArgs}
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
	fs.String("org", demoDomain, "The organization's domain")
	fs.String("emulator", demoEmulator, "The emulated service's address (a site with service_emulator)")
	fs.String("descriptor", "", "The app descriptor, for the event paths and webhook modules; default: <app>/manifest.json")
	fs.String("timeout", "30s", "How long to wait for the answer")
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
	source := fl.String("descriptor")
	if source == "" {
		source = app + appDefaultDescriptorPath
	}
	d, err := loadForCommand(source)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var reqs []emulator.LifecycleRequest
	org := fl.String("org")
	if event == "delivery" {
		for _, w := range d.Webhooks {
			reqs = append(reqs, emulator.LifecycleRequest{Event: event, Organization: org, URL: app + w.URL, ModuleKey: w.Key, Events: w.Events})
		}
	} else {
		path := map[string]string{emulator.EventInstalled: d.Events.Installed, emulator.EventUninstall: d.Events.Uninstall,
			emulator.EventSubscriptionPaid: d.Events.SubscriptionPaid}[event]
		if path != "" {
			reqs = append(reqs, emulator.LifecycleRequest{Event: event, Organization: org, URL: app + path})
		}
	}
	if len(reqs) == 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("%s declares no %s: nothing to call", source, map[bool]string{true: "webhook module", false: "events." + event}[event == "delivery"])
	}
	client := &http.Client{Timeout: timeout}
	failed := 0
	for _, req := range reqs {
		body, _ := json.Marshal(req)
		resp, err := client.Post(strings.TrimSuffix(fl.String("emulator"), "/")+emulator.LifecyclePath, "application/json", bytes.NewReader(body))
		if err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("asking the emulator: %w", err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var out emulator.LifecycleAnswer
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, answerSummary(raw))
		}
		line := fmt.Sprintf("%-18s %-16s %s", event, org, req.URL)
		if out.Error != "" {
			fmt.Fprintf(stdout, "%s  no answer: %s\n", line, out.Error)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "%s  %d %s\n", line, out.Status, answerSummary([]byte(out.Answer)))
		if out.Status < 200 || out.Status > 299 {
			failed++
		}
	}
	if failed > 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("%d of %d calls were not answered 2xx", failed, len(reqs))
	}
	return caddy.ExitCodeSuccess, nil
}
