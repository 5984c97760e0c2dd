package caddymodule

import (
	"fmt"
	"strings"
	"testing"
)

// TestServiceAppSubdirectivesShareTheTable: service_app's own
// sub-directives are read with the table every directive uses, so a
// repeat is refused in the same words as anywhere else, at its line.
func TestServiceAppSubdirectivesShareTheTable(t *testing.T) {
	desc := appDescriptorFile(t)
	for _, tt := range []struct{ lines, want string }{
		{"client_id c\n\t\tclient_id d", "service_app: client_id given more than once, at Caddyfile:5"},
		{"base_url", "wrong argument count or unexpected line ending after 'base_url', at Caddyfile:4"},
		{"public", "wrong argument count or unexpected line ending after 'public', at Caddyfile:4"},
		{"app_secret a\n\t\tapp_secret b\n\t\tcolour blue", `unrecognized service_app sub-directive "colour", at Caddyfile:6`},
	} {
		_, err := adaptCaddyfile(t, fmt.Sprintf(":8080 {\n\tservice_app {\n\t\tdescriptor %s\n\t\t%s\n\t}\n}\n", desc, tt.lines))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v\nwant %s", tt.lines, err, tt.want)
		}
	}
}

// TestServiceAppNestedBlocksCheckTheirSettings: a nested block's own
// settings are checked as in the handler's directive and refused at the
// block's line, while what service_app supplies (secrets, the service's
// address, the contract) is not asked of the block.
func TestServiceAppNestedBlocksCheckTheirSettings(t *testing.T) {
	desc := appDescriptorFile(t)
	head := ":8080 {\n\tservice_app {\n\t\tdescriptor " + desc + "\n\t\tclient_id c\n\t\tclient_secret s\n\t\tapp_secret w\n\t\tservice http://127.0.0.1:1\n"
	for _, tt := range []struct{ block, want string }{
		{"sign_in {\n\t\t\tlogout_path out\n\t\t}", "logout_path \"out\" must be a path starting with /"},
		{"sign_in {\n\t\t\tredirect_uri /oauth/logout\n\t\t}", "redirect_uri and logout_path must differ"},
		{"webhook {\n\t\t\tmodule_key \"\"\n\t\t}", "a module key is empty"},
		{"auth {\n\t\t\ths256_secret a\n\t\t\tjwks_url https://x.example/jwks\n\t\t}", "exactly one of hs256_secret, public_key and jwks_url"},
		{"limits kv-format {\n\t\t\tmax_response_size 2MiB\n\t\t\tspill_max_size 1MiB\n\t\t}", "spill_max_size (1 MB) is below max_response_size (2 MB)"},
		{"limits {\n\t\t\tspill_max_size 1MiB\n\t\t}", "spill_max_size (1 MB) is below max_response_size (5 MB)"},
		{"limits {\n\t\t\tinline\n\t\t}", "inline needs inline_hosts"},
	} {
		_, err := adaptCaddyfile(t, head+"\t\t"+tt.block+"\n\t}\n}\n")
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Caddyfile:8") {
			t.Errorf("%q: %v\nwant %q at Caddyfile:8", tt.block, err, tt.want)
		}
	}
	for _, block := range []string{
		"sign_in {\n\t\t\tcookie_secure off\n\t\t}",
		"subscription {\n\t\t\ton_error allow\n\t\t}",
		"auth {\n\t\t\tleeway 5s\n\t\t}",
		"webhook {\n\t\t\tmax_size 1MiB\n\t\t}",
		"limits {\n\t\t\tmode report\n\t\t\tspill\n\t\t}",
	} {
		if _, err := adaptCaddyfile(t, head+"\t\t"+block+"\n\t}\n}\n"); err != nil {
			t.Errorf("%q: %v", block, err)
		}
	}
}

// TestValidateTakesUnsetSettingsAsDefaults: Validate judges a setting
// left unset as its default, before Provision has filled it in as after,
// so the Caddyfile parser needs no completed copy to check.
func TestValidateTakesUnsetSettingsAsDefaults(t *testing.T) {
	if err := (&ServiceOAuth{AuthURL: "https://a.example", Scopes: []string{"project"}}).Validate(); err != nil {
		t.Errorf("service_oauth with defaults: %v", err)
	}
	if err := (&ServiceOAuth{AuthURL: "https://a.example", Scopes: []string{"project"}, LogoutPath: oauthDefaultCallback}).Validate(); err == nil {
		t.Error("service_oauth: a logout_path that is the default redirect_uri passed")
	}
	l := &ServiceLimits{Contract: "custom-file-format", Spill: &SpillOptions{MaxSize: 1 << 20}}
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "below max_response_size (5 MB)") {
		t.Errorf("service_limits: spill_max_size under the default max_response_size: %v", err)
	}
}

// TestEveryAddressWantsAScheme: every sub-directive that takes an address
// refuses one written without http:// or https:// at its own line, in
// the same words (service_app's own: TestServiceAddressWithoutScheme).
func TestEveryAddressWantsAScheme(t *testing.T) {
	const noScheme = `"localhost:8093" has no scheme: write http://localhost:8093 (or https://)`
	oauth := []string{"client_id c", "client_secret {env.CLIENT_SECRET}", "scopes p"}
	emulator := []string{"client_id c", "client_secret {env.CLIENT_SECRET}"}
	for _, tt := range []struct {
		directive string
		lines     []string // the address's line last
		want      string
	}{
		{"service_auth", []string{"jwks_url localhost:8093"}, "jwks_url " + noScheme},
		{"service_subscription", []string{"app_identifier a", "base_url localhost:8093"}, "base_url " + noScheme},
		{"service_oauth", append(oauth, "auth_url localhost:8093"), "auth_url " + noScheme},
		{"service_oauth", append(oauth, "auth_url https://a.example", "redirect_uri localhost:8093"), `redirect_uri "localhost:8093" is neither a path starting with / nor an http(s) URL`},
		{"service_oauth", append(oauth, "auth_url https://a.example", "logout_redirect localhost:8093"), `logout_redirect "localhost:8093" is neither a path starting with / nor an http(s) URL`},
		{"service_limits", []string{"contract custom-file-format", "spill_base_url localhost:8093"}, "spill_base_url " + noScheme},
		{"service_webhook", []string{"secret {env.APP_SECRET}", "queue {", "to localhost:8093"}, "to " + noScheme},
		{"service_webhook", []string{"secret {env.APP_SECRET}", "queue {", "to http://127.0.0.1:3000/hooks"}, `to "http://127.0.0.1:3000/hooks" is not scheme, host and port alone`},
		{"service_emulator", append(emulator, "redirect_uri http://localhost:8080/cb localhost:8093"), "redirect_uri " + noScheme},
		{"service_emulator", append(emulator, "redirect_uri http://localhost:8080/cb", "organization a.example {", "id 1", "unpaid localhost:8093"), "unpaid " + noScheme},
	} {
		lines := tt.lines
		for _, l := range lines {
			if strings.HasSuffix(l, "{") {
				lines = append(lines, "}")
			}
		}
		err := adaptDirective(tt.directive, lines)
		at := fmt.Sprintf("Caddyfile:%d", 3+len(tt.lines))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), ", at "+at) {
			t.Errorf("%s %q: %v\nwant %s at %s", tt.directive, tt.lines[len(tt.lines)-1], err, tt.want, at)
		}
	}
}

// FuzzCheckAddress: checkAddress takes any value without panicking, never
// quotes the user name and password an address holds, and what it accepts
// as an http(s) URL starts with http:// or https://.
func FuzzCheckAddress(f *testing.F) {
	for _, seed := range []string{"localhost:8093", "http://localhost:8093", "https://u:pw@x.example/", "ftp://x", "/cb",
		"{env.X}", "http://{http.request.host}/s", "localhost:{env.PORT}", "http://x?q#f", "http://[::1]:80", "http://a@b/c@d",
		"127.0.0.1:3000/manifest.json", "manifest.json", "http://%zz", "HTTPS://X.EXAMPLE", "http://.x", "http://a..b"} {
		for form := range fileOrURL + 1 {
			f.Add(seed, int(form))
		}
	}
	f.Fuzz(func(t *testing.T, value string, form int) {
		af := addressForm(form) % (fileOrURL + 1)
		if af < 0 {
			af = -af
		}
		err := checkAddress("address", value, af)
		if shown := withoutUserInfo(value); shown != value && err != nil {
			// shown is value[:start] + "…@" + what follows the '@'.
			start := 0
			if i := strings.Index(value, "://"); i >= 0 {
				start = i + 3
			}
			userinfo := value[start : len(value)-len(shown)+start+len("…@")] // with its '@'
			if strings.Contains(err.Error(), userinfo) && !strings.Contains(shown, userinfo) {
				t.Fatalf("the error quotes the user info %q: %v", userinfo, err)
			}
		}
		if err == nil && (af == anyURL || af == baseURL || af == originURL) && value != "" && !strings.HasPrefix(value, "{") {
			if lower := strings.ToLower(value); !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
				t.Fatalf("accepted %q, which is no http(s) URL", value)
			}
		}
	})
}
