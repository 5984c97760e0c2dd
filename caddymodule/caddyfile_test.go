package caddymodule

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// adaptDirective adapts a Caddyfile named "Caddyfile" whose site holds
// the directive with the given block lines. The directive is on line 3,
// its sub-directives from line 4.
func adaptDirective(directive string, lines []string) error {
	var b strings.Builder
	b.WriteString(":8080 {\n\troute {\n\t\t" + directive + " {\n")
	for _, l := range lines {
		b.WriteString("\t\t\t" + l + "\n")
	}
	b.WriteString("\t\t}\n\t\treverse_proxy 127.0.0.1:3000\n\t}\n}\n")
	_, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(b.String()), map[string]any{"filename": "Caddyfile"})
	return err
}

// directiveGrammar is what the sub-directive table test knows of a
// directive: a block that adapts, and sub-directives with a valid value.
type directiveGrammar struct {
	name       string
	valid      []string // the lines of a block that adapts
	once       []string // "<sub-directive> <value>", refused when repeated
	onceList   []string // "<sub-directive> <values…>", refused when repeated
	repeatable []string // "<sub-directive> <value>", accepted when repeated
	flags      []string // sub-directives that take no value
}

var servicegateDirectives = []directiveGrammar{
	{
		name:  "service_auth",
		valid: []string{"hs256_secret s"},
		once: []string{"jwks_refresh 5m", "jwks_min_interval 10s", "issuer i", "leeway 10s", "from_query jwtToken",
			"realm r", "cache_size 10"},
		onceList:   []string{"organization_claims domain context.organization_id"},
		repeatable: []string{"audience a", "claim_header X-A sub"},
		flags:      []string{"strip_query"},
	},
	{
		name:       "service_subscription",
		valid:      []string{"app_identifier a", "base_url http://127.0.0.1:8081"},
		once:       []string{"negative_ttl 1m", "timeout 5s", "on_error deny", "max_age 1m", "cache_size 10", "time_zone UTC", "realm r"},
		repeatable: nil,
	},
	{
		name:       "service_webhook",
		valid:      []string{"secret s"},
		once:       []string{"secrets_file /etc/secrets.json", "secrets_poll 2s", "max_size 1MB"},
		repeatable: []string{"secret t", "module_key k", "events project.translated"},
	},
	{
		name:  "service_limits",
		valid: []string{"contract custom-file-format"},
		once: []string{"max_request_size 1MB", "max_response_size 1MB", "timeout 1m", "mode report",
			"spill_path /spill/", "spill_base_url https://app.example", "spill_ttl 1m", "spill_dir /tmp/spill",
			"spill_max_size 64MB", "spill_key k", "inline_max_size 1MB", "inline_timeout 5s"},
		repeatable: []string{"inline_hosts a.example"},
		flags:      []string{"spill", "inline_allow_private"},
	},
	{
		name:  "service_oauth",
		valid: []string{"client_id c", "client_secret s", "auth_url http://127.0.0.1:8081", "scopes project"},
		once: []string{"redirect_uri /cb", "logout_path /out", "logout_redirect /", "cookie_name sid", "cookie_secure off",
			"cookie_domain app.example", "cookie_path /", "session_lifetime 1h", "session_store memory", "max_sessions 10",
			"user_header X-U", "organization_header X-O", "timeout 5s"},
		repeatable: []string{"scopes tm"},
	},
	{
		name:       "service_emulator",
		valid:      []string{"client_id c", "client_secret s", "redirect_uri http://localhost:8080/cb"},
		once:       []string{"app_identifier a", "issuer i", "token_lifetime 1h", "code_lifetime 1m"},
		repeatable: []string{"redirect_uri http://localhost:8080/cb2", "organization b.example {\n\t\t\t\tid 2\n\t\t\t}"},
	},
}

// TestSubdirectivesAlike holds every servicegate directive to the same
// rules, each error naming the file and line of the offending
// sub-directive: an unknown sub-directive, a repeat of one that is not
// repeatable, a missing value, and a value where none is taken.
func TestSubdirectivesAlike(t *testing.T) {
	for _, g := range servicegateDirectives {
		t.Run(g.name, func(t *testing.T) {
			// The line of the first sub-directive after the valid block.
			next := 4 + len(g.valid)
			at := fmt.Sprintf("Caddyfile:%d", next)
			if err := adaptDirective(g.name, g.valid); err != nil {
				t.Fatalf("the valid block does not adapt: %v", err)
			}
			wantErr := func(t *testing.T, lines []string, line, want string) {
				t.Helper()
				err := adaptDirective(g.name, lines)
				if err == nil {
					t.Fatalf("%q adapted, want an error", lines)
				}
				if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), line) {
					t.Fatalf("error %q, want one saying %q at %s", err, want, line)
				}
			}
			t.Run("unknown", func(t *testing.T) {
				wantErr(t, append(g.valid[:len(g.valid):len(g.valid)], "bogus 1"), at, `unrecognized `+g.name+` sub-directive "bogus"`)
			})
			t.Run("a slip", func(t *testing.T) {
				// The first valid sub-directive, its last letter left out
				// and its first in capitals: the nearest name is offered.
				name := strings.Fields(g.valid[0])[0]
				slip := strings.ToUpper(name[:1]) + name[1:len(name)-1]
				wantErr(t, append(g.valid[:len(g.valid):len(g.valid)], slip+" 1"), at,
					fmt.Sprintf(`unrecognized %s sub-directive %q; did you mean %q?`, g.name, slip, name))
			})
			t.Run("argument on the directive line", func(t *testing.T) {
				err := adaptDirective(g.name+" extra", g.valid)
				if err == nil || !strings.Contains(err.Error(), "wrong argument count") || !strings.Contains(err.Error(), "Caddyfile:3") {
					t.Fatalf("error %v, want a wrong argument count at Caddyfile:3", err)
				}
			})
			for _, sub := range append(g.once, g.onceList...) {
				name := strings.Fields(sub)[0]
				list := slices.Contains(g.onceList, sub)
				t.Run(name, func(t *testing.T) {
					base := g.valid[:len(g.valid):len(g.valid)]
					if name == "mode" || strings.HasPrefix(name, "inline_") {
						base = append(base, "inline_hosts a.example")
					}
					if err := adaptDirective(g.name, append(base, sub)); err != nil {
						t.Fatalf("%s once: %v", sub, err)
					}
					line := fmt.Sprintf("Caddyfile:%d", 4+len(base)+1)
					wantErr(t, append(base, sub, sub), line, g.name+": "+name+" given more than once")
					wantErr(t, append(base, name), fmt.Sprintf("Caddyfile:%d", 4+len(base)), "wrong argument count")
					if !list {
						wantErr(t, append(base, sub+" extra"), fmt.Sprintf("Caddyfile:%d", 4+len(base)), "wrong argument count")
					}
				})
			}
			for _, sub := range g.repeatable {
				name := strings.Fields(sub)[0]
				t.Run(name+" repeated", func(t *testing.T) {
					lines := append(g.valid[:len(g.valid):len(g.valid)], sub)
					if name == "inline_hosts" {
						lines = append(lines, "inline_hosts b.example")
					} else if name == "claim_header" {
						lines = append(lines, "claim_header X-B sub")
					} else if name == "organization" {
						lines = append(lines, strings.ReplaceAll(strings.ReplaceAll(sub, "b.example", "c.example"), "id 2", "id 3"))
					} else {
						lines = append(lines, sub)
					}
					if err := adaptDirective(g.name, lines); err != nil {
						t.Fatalf("%s twice: %v", name, err)
					}
					if name != "organization" {
						wantErr(t, append(g.valid[:len(g.valid):len(g.valid)], name), at, "wrong argument count")
					}
				})
			}
			for _, flag := range g.flags {
				t.Run(flag, func(t *testing.T) {
					wantErr(t, append(g.valid[:len(g.valid):len(g.valid)], flag+" on"), at, "wrong argument count")
					wantErr(t, append(g.valid[:len(g.valid):len(g.valid)], flag, flag), fmt.Sprintf("Caddyfile:%d", next+1), g.name+": "+flag+" given more than once")
				})
			}
		})
	}
}

// TestConfigErrorsNameFileAndLine adapts Caddyfiles whose mistakes Caddy
// would otherwise find only at provision, with no file or line: each must
// fail to adapt, naming the line of the directive (for a missing or
// conflicting sub-directive) or of the sub-directive at fault.
func TestConfigErrorsNameFileAndLine(t *testing.T) {
	tests := []struct {
		name, directive string
		lines           []string
		line            int
		want            string
	}{
		{"webhook without secret", "service_webhook", []string{"module_key k"}, 3, "needs at least one secret or a secrets_file"},
		{"webhook empty module key", "service_webhook", []string{"secret s", `module_key ""`}, 3, "a module key is empty"},
		{"webhook empty event", "service_webhook", []string{"secret s", `events ""`}, 3, "an event name is empty"},
		{"webhook queue unknown store", "service_webhook", []string{"secret s", "queue {", "to http://127.0.0.1:3000", "store memory", "}"}, 3, `store "memory" is neither disk nor redis`},
		{"webhook queue dir with redis", "service_webhook", []string{"secret s", "queue {", "to http://127.0.0.1:3000", "store redis", "dir /tmp/q", "}"}, 3, "with store redis, leave it out"},
		{"subscription without base_url", "service_subscription", []string{"app_identifier a"}, 3, "base_url is required"},
		{"subscription without app_identifier", "service_subscription", []string{"base_url http://127.0.0.1:8081"}, 3, "app_identifier is required"},
		{"subscription base_url not http", "service_subscription", []string{"app_identifier a", "base_url ftp://x.example"}, 5, "not an http(s) URL"},
		{"subscription base_url with query", "service_subscription", []string{"app_identifier a", "base_url https://x.example/?a=1"}, 5, "query"},
		{"subscription unknown time zone", "service_subscription", []string{"app_identifier a", "base_url https://x.example", "time_zone Mars/Olympus"}, 6, "time_zone"},
		{"auth two keys", "service_auth", []string{"hs256_secret s", "jwks_url https://x.example/jwks"}, 3, "exactly one of hs256_secret, public_key and jwks_url"},
		{"auth no key", "service_auth", []string{"issuer i"}, 3, "exactly one of hs256_secret, public_key and jwks_url"},
		{"auth jwks_url not http", "service_auth", []string{"jwks_url file:///etc/jwks.json"}, 4, "not an http(s) URL"},
		{"auth claim_header without path", "service_auth", []string{"hs256_secret s", `claim_header X-A ""`}, 5, "has no claim path"},
		{"oauth without scopes", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example"}, 3, "needs client_id, client_secret, auth_url and scopes"},
		{"oauth logout_path not a path", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example", "scopes p", "logout_path out"}, 3, "logout_path"},
		{"oauth redirect_uri is logout_path", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example", "scopes p", "redirect_uri /x", "logout_path /x"}, 3, "must differ"},
		{"oauth bad redirect_uri", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example", "scopes p", "redirect_uri ftp://x"}, 8, "redirect_uri"},
		{"oauth redirect_uri without a path", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example", "scopes p", "redirect_uri https://x.example"}, 3, "needs a path"},
		{"oauth bad cookie name", "service_oauth", []string{"client_id c", "client_secret s", "auth_url https://a.example", "scopes p", "cookie_name a;b"}, 3, "cookie_name"},
		{"limits mode without contract", "service_limits", []string{"mode report"}, 3, "mode needs contract"},
		{"limits spill without contract", "service_limits", []string{"spill"}, 3, "spill needs contract"},
		{"limits inline without hosts", "service_limits", []string{"contract file-pre-export", "inline"}, 3, "inline needs inline_hosts"},
		{"limits spill below response", "service_limits", []string{"contract custom-file-format", "max_response_size 2MiB", "spill_max_size 1MiB"}, 3, "spill_max_size (1 MB) is below max_response_size (2 MB)"},
		{"limits size too large", "service_limits", []string{"max_request_size 2TiB"}, 4, "too large: at most 1 TB"},
		{"emulator token_lifetime under a second", "service_emulator", []string{"client_id c", "client_secret s", "redirect_uri http://localhost/cb", "token_lifetime 500ms"}, 7, "shorter than the one second"},
		{"emulator without secret", "service_emulator", []string{"client_id c", "redirect_uri http://localhost/cb"}, 3, "needs client_id, client_secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := adaptDirective(tt.directive, tt.lines)
			if err == nil {
				t.Fatal("adapted without error")
			}
			at := fmt.Sprintf("Caddyfile:%d", tt.line)
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), at) {
				t.Fatalf("error %q, want one saying %q at %s", err, tt.want, at)
			}
		})
	}
}

// FuzzDirectiveCaddyfile feeds every servicegate directive's Caddyfile
// parser any block: none may panic, and what one accepts must pass its
// module's Validate, as the parser runs the checks Caddy would run at
// provision.
func FuzzDirectiveCaddyfile(f *testing.F) {
	for i, g := range servicegateDirectives {
		f.Add(i, strings.Join(g.valid, "\n"))
		f.Add(i, strings.Join(append(g.valid, g.once...), "\n"))
		f.Add(i, strings.Join(append(append(g.valid, g.repeatable...), g.repeatable...), "\n"))
		f.Add(i, strings.Join(g.once, "\n"))
	}
	f.Fuzz(func(t *testing.T, which int, block string) {
		if which < 0 {
			which = -which
		}
		g := servicegateDirectives[which%len(servicegateDirectives)]
		var u caddyfile.Unmarshaler
		switch g.name {
		case "service_auth":
			u = new(ServiceAuth)
		case "service_subscription":
			u = new(ServiceSubscription)
		case "service_webhook":
			u = new(ServiceWebhook)
		case "service_limits":
			u = new(ServiceLimits)
		case "service_oauth":
			u = new(ServiceOAuth)
		case "service_emulator":
			u = new(ServiceEmulator)
		}
		if err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser(g.name + " {\n" + block + "\n}")); err != nil {
			return
		}
		if v, ok := u.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				t.Fatalf("%s {%s} parsed but does not validate: %v", g.name, block, err)
			}
		}
	})
}
