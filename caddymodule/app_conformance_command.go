package caddymodule

import (
	"context"
	"os"
	"os/signal"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/servicegate/servicegate/cli"
	"github.com/servicegate/servicegate/cli/conformance"
)

// conformanceCommand is caddy service-app conformance: its flags read into
// a conformance.Command, which does the rest.
func conformanceCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "conformance --app <url> [--descriptor <url|path>] [--file [<module key>=]<path>]... [--only <glob>] [--format text|json|junit|markdown] [--output <file>] [--list]",
		Short: "Plays the service's whole module contract against an app and reports each case",
		Args:  cobra.NoArgs,
	}
	c.Flags().AddFlagSet(serviceAppConformanceFlags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		fl := caddycmd.Flags{FlagSet: cmd.Flags()}
		command, err := conformanceOptions(fl)
		if err != nil {
			return exitWith(commandOutcome(cmd.ErrOrStderr(), cmd.CommandPath(), conformance.ExitNotStarted, err), nil)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return exitWith(conformance.Main(ctx, command, cmd.OutOrStdout(), cmd.ErrOrStderr()), nil)
	}
	return c
}

func serviceAppConformanceFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("service-app conformance", pflag.ContinueOnError)
	fs.String("app", "", "The address the service calls: the app, or the gateway in front of it (required)")
	fs.String("descriptor", "", "The app descriptor, a file or an address (default: the app's /manifest.json)")
	fs.String("secret", cli.DemoAppSecret, "The app secret that signs deliveries when the run does not go through a gateway or the organization has no installation in the emulator")
	fs.String("secret-env", "", "Read the app secret from this environment variable")
	fs.StringArray("file", nil, "A source file in a custom-file-format module's format, [<module key>=]<path> (repeatable; the key may be a glob; without it, the modules whose signaturePatterns match the file)")
	fs.String("only", "", "Run only the cases whose id matches this glob, each * within one /-separated part")
	fs.String("timeout", "2m", "The most one call may take")
	fs.String("format", "text", "The report's format: text, json, junit or markdown")
	fs.String("output", "", "Write the report to this file (the failures' requests next to it) instead of stdout")
	fs.Bool("list", false, "Print the case ids and run nothing")
	fs.String("emulator", cli.DemoEmulator, "The emulated service that makes the lifecycle calls when --app is a servicegate gateway")
	fs.String("domain", cli.DemoDomain, "The organization's domain")
	fs.Int64("organization-id", 1, "The organization's id")
	return fs
}

// conformanceOptions reads the flags of caddy service-app conformance.
func conformanceOptions(fl caddycmd.Flags) (conformance.Command, error) {
	secret, err := commandSecret(fl)
	if err != nil {
		return conformance.Command{}, err
	}
	timeout, err := commandTimeout(fl)
	if err != nil {
		return conformance.Command{}, err
	}
	orgID, err := fl.GetInt64("organization-id")
	if err != nil {
		return conformance.Command{}, err
	}
	files, err := fl.GetStringArray("file")
	if err != nil {
		return conformance.Command{}, err
	}
	list, err := fl.GetBool("list")
	if err != nil {
		return conformance.Command{}, err
	}
	return conformance.Command{
		Options: conformance.Options{
			App: fl.String("app"), Descriptor: fl.String("descriptor"), Secret: secret, Files: files,
			Only: fl.String("only"), Timeout: timeout, Emulator: fl.String("emulator"),
			Domain: fl.String("domain"), OrganizationID: orgID,
			InstallationSecret: !fl.Changed("secret") && fl.String("secret-env") == "",
		},
		Format: fl.String("format"), Output: fl.String("output"), List: list,
	}, nil
}
