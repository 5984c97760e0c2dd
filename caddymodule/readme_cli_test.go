package caddymodule

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestReadmeCLIMatchesFlags compares each subcommand's synopsis in the
// README with the flags the command registers: every flag is shown, none
// that does not exist, and each shows its default as its value (a value in
// capitals for a flag without default, none for a switch).
func TestReadmeCLIMatchesFlags(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "## CLI subcommands\n")
	if start < 0 {
		t.Fatal("README.md has no CLI subcommands section")
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	placeholder := regexp.MustCompile(`^[A-Z][A-Z0-9_.]*$`)
	for name, flags := range map[string]*pflag.FlagSet{
		"service-token":    serviceTokenFlags(),
		"service-webhook":  serviceWebhookFlags(),
		"service-app send": serviceAppSendFlags(),
	} {
		t.Run(name, func(t *testing.T) {
			i := strings.Index(section, "- `caddy "+name+" ")
			if i < 0 {
				t.Fatalf("the README shows no synopsis of caddy %s", name)
			}
			synopsis := section[i+3:]
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
					t.Errorf("the README shows --%s, which caddy %s does not have", flagName, name)
					continue
				}
				value := ""
				if k+1 < len(fields) && !strings.HasPrefix(fields[k+1], "--") {
					value = fields[k+1]
				}
				switch {
				case flag.Value.Type() == "bool":
					if value != "" {
						t.Errorf("the README shows the switch --%s with the value %q", flagName, value)
					}
				case flag.DefValue == "":
					if !placeholder.MatchString(value) {
						t.Errorf("the README shows --%s %q; it has no default, so show a placeholder in capitals", flagName, value)
					}
				case value != flag.DefValue:
					t.Errorf("the README shows --%s %q; its default is %q", flagName, value, flag.DefValue)
				}
			}
			flags.VisitAll(func(f *pflag.Flag) {
				if !shown[f.Name] {
					t.Errorf("the README's synopsis of caddy %s misses --%s (%s)", name, f.Name, f.Usage)
				}
			})
		})
	}
}
