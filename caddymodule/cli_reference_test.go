package caddymodule

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCLIReferenceMatchesFlags compares each subcommand's synopsis in the
// CLI reference (docs/reference/cli.md, which go run ./internal/gendocs
// writes) with the flags the command registers: every flag is shown, none
// that does not exist, and each shows its default as its value (a value in
// capitals for a flag without default, none for a switch).
func TestCLIReferenceMatchesFlags(t *testing.T) {
	raw, err := os.ReadFile("../docs/reference/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)
	placeholder := regexp.MustCompile(`^[A-Z][A-Z0-9_.]*$`)
	for name, flags := range map[string]*pflag.FlagSet{
		"service-token":    serviceTokenFlags(),
		"service-webhook":  serviceWebhookFlags(),
		"service-app send": serviceAppSendFlags(),
	} {
		t.Run(name, func(t *testing.T) {
			i := strings.Index(section, "Synopsis: `caddy "+name+" ")
			if i < 0 {
				t.Fatalf("the CLI reference shows no synopsis of caddy %s", name)
			}
			synopsis := section[i+len("Synopsis: `"):]
			synopsis = synopsis[:strings.Index(synopsis, "`")]
			fields := strings.Fields(strings.NewReplacer("[", " ", "]", " ", "|", " ").Replace(synopsis))
			shown := map[string]bool{}
			for k, f := range fields {
				if !strings.HasPrefix(f, "--") {
					continue
				}
				flagName := strings.TrimPrefix(f, "--")
				shown[flagName] = true
				flag := flags.Lookup(flagName)
				if flag == nil {
					t.Errorf("the CLI reference shows --%s, which caddy %s does not have", flagName, name)
					continue
				}
				value := ""
				if k+1 < len(fields) && !strings.HasPrefix(fields[k+1], "--") {
					value = fields[k+1]
				}
				switch {
				case flag.Value.Type() == "bool":
					if value != "" {
						t.Errorf("the CLI reference shows the switch --%s with the value %q", flagName, value)
					}
				case flag.DefValue == "":
					if !placeholder.MatchString(value) {
						t.Errorf("the CLI reference shows --%s %q; it has no default, so show a placeholder in capitals", flagName, value)
					}
				case value != flag.DefValue:
					t.Errorf("the CLI reference shows --%s %q; its default is %q", flagName, value, flag.DefValue)
				}
			}
			flags.VisitAll(func(f *pflag.Flag) {
				if !shown[f.Name] {
					t.Errorf("the CLI reference's synopsis of caddy %s misses --%s (%s)", name, f.Name, f.Usage)
				}
			})
		})
	}
}
