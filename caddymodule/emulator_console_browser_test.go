package caddymodule

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// The console's browser tests: the page in headless Chromium against the
// emulator and the gateway in one Caddy, as the demo runs them. The
// handler tests of emulator/ cover the API; these check what a person
// sees and does.

// consoleRig is the Caddy of a console's browser test.
type consoleRig struct {
	tester  *caddytest.Tester
	app     string
	console string
}

// openConsole starts the emulator and the gateway, and opens the console
// in a tab once it is live.
func openConsole(t *testing.T) (*cdpPage, consoleRig) {
	t.Helper()
	needBrowser(t)
	rig := consoleRig{app: newConsoleApp(t).URL, console: uniqueConsole()}
	rig.tester = startCaddy(t, consoleSites(t, rig.app, rig.console))
	page := newTab(t)
	page.navigate(t, "http://127.0.0.1:"+strconv.Itoa(e2eHTTPPort)+"/emulator/console")
	page.waitFor(t, "the console, live", `document.body.dataset.live === 'true' && document.body.dataset.ready === 'true'`)
	return page, rig
}

// sel is a JavaScript expression for the element a selector finds.
func sel(selector string) string {
	return "document.querySelector(" + jsString(selector) + ")"
}

// click clicks the element a selector finds.
func (p *cdpPage) click(t *testing.T, selector string) {
	t.Helper()
	if p.eval(t, "("+sel(selector)+".click(), true)") != "true" {
		t.Fatalf("no %s to click", selector)
	}
}

// choose sets a select (or input) to value, as a person would.
func (p *cdpPage) choose(t *testing.T, selector, value string) {
	t.Helper()
	if p.eval(t, "((e) => { e.value = "+jsString(value)+"; e.dispatchEvent(new Event('change', {bubbles: true})); return e.value === "+jsString(value)+" })("+sel(selector)+")") != "true" {
		t.Fatalf("%s cannot be set to %q", selector, value)
	}
}

// row is the selector of a call row.
func row(kind, org string, more string) string {
	return `[data-testid="call"][data-kind="` + kind + `"][data-org="` + org + `"]` + more
}

// installAcme installs the app for acme.example from the page.
func installAcme(t *testing.T, page *cdpPage) {
	t.Helper()
	page.click(t, `[data-testid="org"][data-domain="acme.example"] [data-action="install"]`)
	page.waitFor(t, "acme installed", sel(`[data-testid="org"][data-domain="acme.example"][data-installation="installed"]`)+" !== null")
}

// selectedID is the id of the selected call, once the detail shows it.
func selectedID(t *testing.T, page *cdpPage) int64 {
	t.Helper()
	page.waitFor(t, "a call's detail", sel(`[data-testid="call-detail"]`)+` !== null && `+sel(`[data-testid="call"][data-selected="true"]`)+` !== null && `+
		sel(`[data-testid="call-detail"]`)+`.dataset.id === `+sel(`[data-testid="call"][data-selected="true"]`)+`.dataset.id`)
	id, err := strconv.ParseInt(page.eval(t, sel(`[data-testid="call-detail"]`)+".dataset.id"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// deliver sends a delivery from the page and waits for its row.
func deliverFromPage(t *testing.T, page *cdpPage) int64 {
	t.Helper()
	page.waitFor(t, "a sample delivery", sel(`[data-testid="delivery-body"]`)+`.value.includes('project.translated') && `+
		sel(`[data-testid="delivery-org"]`)+`.value === 'acme.example'`)
	page.click(t, `[data-action="deliver"]`)
	page.waitFor(t, "the delivery's 200 row", sel(row("delivery", "acme.example", `[data-status="200"][data-selected="true"]`))+" !== null")
	return selectedID(t, page)
}

func TestConsoleBrowserLoadsWithoutErrors(t *testing.T) {
	page, _ := openConsole(t)
	page.waitFor(t, "the organizations", `document.querySelectorAll('[data-testid="org"]').length === 3`)
	page.waitFor(t, "the app's modules", sel(`[data-testid="delivery-module"]`)+`.value === 'events-hook' && `+
		sel(`[data-testid="app-url"]`)+`.textContent === 'http://localhost:`+strconv.Itoa(e2eHTTPPort)+`'`)
	if got := page.eval(t, sel(`[data-testid="org"][data-domain="unpaid.example"]`)+".dataset.subscription"); got != "unpaid" {
		t.Fatalf("unpaid.example shows %q", got)
	}
}

func TestConsoleBrowserInstall(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	page.waitFor(t, "the installed call and the gateway's token grant, live",
		sel(row("installed", "acme.example", `[data-status="200"][data-outcome="accepted"]`))+` !== null && `+
			sel(row("token", "acme.example", `[data-status="200"]`))+` !== null`)
	// The installed call is selected: its verdict names the header the
	// gateway added for the app.
	page.waitFor(t, "the installed call's verdict", sel(`[data-testid="call"][data-kind="installed"][data-selected="true"]`)+` !== null && `+
		sel(`[data-testid="gateway-verdict"][data-outcome="accepted"]`)+` !== null && `+
		sel(`[data-testid="gateway-verdict"]`)+`.textContent.includes('X-Service-App-Token')`)
}

func TestConsoleBrowserDelivery(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	id := deliverFromPage(t, page)
	var item consoleItem
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(id, 10), "", &item)
	if item.Kind != "delivery" || item.Status != 200 || item.Gateway.Outcome != "accepted" {
		t.Fatalf("the delivery: %+v", item)
	}
}

func TestConsoleBrowserTamperedResend(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	first := deliverFromPage(t, page)
	page.click(t, `[data-testid="call-detail"] details.resend summary`)
	page.choose(t, `[data-testid="resend-tamper"]`, "wrong_secret")
	page.click(t, `[data-testid="call-detail"] [data-action="resend"]`)
	page.waitFor(t, "the refused resend, selected", sel(row("delivery", "acme.example", `[data-outcome="refused"][data-selected="true"]`))+" !== null")
	id := selectedID(t, page)
	if id <= first {
		t.Fatalf("the resend is call %d, the delivery %d", id, first)
	}
	var item consoleItem
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(id, 10), "", &item)
	verdict := page.eval(t, sel(`[data-testid="call-detail"] [data-testid="gateway-verdict"]`)+".textContent")
	if item.Gateway.Reason != "The signature of the delivery does not match its body." || verdict != item.Gateway.Reason ||
		page.eval(t, sel(`[data-testid="gateway-verdict"]`)+".dataset.outcome") != "refused" {
		t.Fatalf("the verdict shows %q for %+v", verdict, item.Gateway)
	}
}

func TestConsoleBrowserReplay(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	first := deliverFromPage(t, page)
	page.click(t, `[data-testid="call-detail"] [data-action="replay"]`)
	page.waitFor(t, "a new selected row", `Number(`+sel(`[data-testid="call"][data-selected="true"]`)+`.dataset.id) > `+strconv.FormatInt(first, 10))
	id := selectedID(t, page)
	if kind := page.eval(t, sel(`[data-testid="call"][data-selected="true"]`)+".dataset.kind"); kind != "delivery" || id <= first {
		t.Fatalf("the replay is %s %d", kind, id)
	}
	if n := page.eval(t, `document.querySelectorAll('[data-testid="call"][data-selected="true"]').length`); n != "1" {
		t.Fatalf("%s rows selected", n)
	}
}

func TestConsoleBrowserFileRoundTrip(t *testing.T) {
	page, _ := openConsole(t)
	file := filepath.Join(t.TempDir(), "strings.kv")
	if err := os.WriteFile(file, []byte("greeting = Hello\nfarewell = Goodbye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page.setFile(t, `[data-testid="file-upload"]`, file)
	page.waitFor(t, "the strings", `document.querySelectorAll('[data-testid="string"]').length === 2`)
	if got := page.eval(t, sel(`[data-testid="file-matches"]`)+".textContent"); !strings.Contains(got, "kv-format") {
		t.Fatalf("the signaturePatterns matches: %q", got)
	}
	if got := page.eval(t, sel(`[data-testid="string"]`)+".dataset.identifier"); got != "greeting" {
		t.Fatalf("the first string: %q", got)
	}
	page.click(t, `[data-action="build"]`)
	page.waitFor(t, "the build, identical", sel(`[data-testid="build-result"][data-identical="true"]`)+" !== null")
	page.waitFor(t, "the parse-file and build-file rows", sel(`[data-testid="call"][data-kind="parse-file"]`)+` !== null && `+
		sel(`[data-testid="call"][data-kind="build-file"][data-status="200"]`)+` !== null`)
}

func TestConsoleBrowserSecretMaskedUntilRevealed(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	secret := revealSecret(t, "acme.example")
	code := sel(`[data-testid="org"][data-domain="acme.example"] [data-testid="secret"]`)
	shown := page.eval(t, code+".textContent")
	if page.eval(t, code+".dataset.state") != "masked" || len([]rune(strings.TrimLeft(shown, "•"))) > 4 ||
		!strings.HasSuffix(secret, strings.TrimLeft(shown, "•")) || strings.Contains(page.eval(t, "document.body.innerText"), secret) {
		t.Fatalf("before reveal the page shows %q of %q", shown, secret)
	}
	page.click(t, `[data-testid="org"][data-domain="acme.example"] [data-action="reveal"]`)
	page.waitFor(t, "the revealed secret", code+".dataset.state === 'revealed' && "+code+".textContent === "+jsString(secret))
}

func TestConsoleBrowserReconnectMissesNothing(t *testing.T) {
	page, rig := openConsole(t)
	page.allowNetworkErrors.Store(true) // the dropped stream
	// The same sites and one more: Caddy loads a new config and closes the
	// old one's connections, the event stream with them; the emulator
	// (its configuration unchanged) keeps its calls.
	sites := consoleSites(t, rig.app, rig.console) + "\nhttp://other.localhost:{port} {\n\trespond \"other\"\n}\n"
	loadCaddyfile(rig.tester, e2eGlobal()+strings.ReplaceAll(sites, "{port}", strconv.Itoa(e2eHTTPPort)))
	var missed []int64
	for range 2 {
		var item consoleItem
		if code := consoleCall(t, "POST", "organizations/globex.example/paid", "", &struct {
			Call *consoleItem `json:"call"`
		}{&item}); code != 200 || item.ID == 0 {
			t.Fatalf("paid: %d %+v", code, item)
		}
		missed = append(missed, item.ID)
	}
	page.waitFor(t, "a second connection", `Number(document.body.dataset.connections) >= 2 && document.body.dataset.live === 'true'`)
	for _, id := range missed {
		page.waitFor(t, "call "+strconv.FormatInt(id, 10), sel(`[data-testid="call"][data-id="`+strconv.FormatInt(id, 10)+`"]`)+" !== null")
	}
}

func TestConsoleBrowserFaults(t *testing.T) {
	page, _ := openConsole(t)
	page.choose(t, `[data-testid="fault-token"]`, "500")
	page.choose(t, `[data-testid="fault-subscription"]`, "slow")
	page.choose(t, `[data-testid="fault-subscription-seconds"]`, "3")
	page.click(t, `[data-action="apply-faults"]`)
	page.waitFor(t, "the faults set", sel(`[data-testid="faults-now"]`)+`.textContent === 'token endpoint: answers 500; subscription query: slow 3s'`)
	var faults map[string]map[string]any
	consoleCall(t, "GET", "faults", "", &faults)
	if faults["token"]["status"] != 500.0 || faults["subscription"]["delay"] != "3s" {
		t.Fatalf("faults %v", faults)
	}
	page.choose(t, `[data-testid="fault-token"]`, "")
	page.choose(t, `[data-testid="fault-subscription"]`, "")
	page.click(t, `[data-action="apply-faults"]`)
	page.waitFor(t, "no faults", sel(`[data-testid="faults-now"]`)+`.textContent === 'token endpoint: normal; subscription query: normal'`)
}

// TestConsoleBrowserScreenshot writes the README's picture of the console
// from a real run: install, a delivery, a resend signed with a wrong
// secret (refused, and selected), a file's round trip. It runs with
// SERVICEGATE_CONSOLE_PNG set to the file to write (the README names the
// command).
func TestConsoleBrowserScreenshot(t *testing.T) {
	out := os.Getenv("SERVICEGATE_CONSOLE_PNG")
	if out == "" {
		t.Skip("set SERVICEGATE_CONSOLE_PNG to the picture to write, e.g. ../docs/console.png")
	}
	page, _ := openConsole(t)
	page.resize(t, 1440, 1080)
	installAcme(t, page)
	page.click(t, `[data-testid="org"][data-domain="globex.example"] [data-action="install"]`)
	page.waitFor(t, "globex installed", sel(`[data-testid="org"][data-domain="globex.example"][data-installation="installed"]`)+" !== null")
	file := filepath.Join(t.TempDir(), "strings.kv")
	if err := os.WriteFile(file, []byte("greeting = Hello\nfarewell = Goodbye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page.setFile(t, `[data-testid="file-upload"]`, file)
	page.waitFor(t, "the strings", `document.querySelectorAll('[data-testid="string"]').length === 2`)
	page.click(t, `[data-action="build"]`)
	page.waitFor(t, "the build, identical", sel(`[data-testid="build-result"][data-identical="true"]`)+" !== null")
	page.choose(t, `[data-testid="delivery-org"]`, "acme.example")
	deliverFromPage(t, page)
	page.click(t, `[data-testid="call-detail"] details.resend summary`)
	page.choose(t, `[data-testid="resend-tamper"]`, "wrong_secret")
	page.click(t, `[data-testid="call-detail"] [data-action="resend"]`)
	page.waitFor(t, "the refused resend, selected", sel(row("delivery", "acme.example", `[data-outcome="refused"][data-selected="true"]`))+" !== null")
	selectedID(t, page)
	page.eval(t, "window.scrollTo(0, 0)")
	page.screenshot(t, out)
	if info, err := os.Stat(out); err != nil || info.Size() == 0 {
		t.Fatalf("no picture at %s: %v", out, err)
	}
}
