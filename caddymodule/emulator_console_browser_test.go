package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
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
	return openConsoleOf(t, newConsoleApp(t).URL, func(sites string) string { return sites })
}

// openConsoleOf is openConsole with the app at app, and the sites changed
// by edit.
func openConsoleOf(t *testing.T, app string, edit func(string) string) (*cdpPage, consoleRig) {
	t.Helper()
	needBrowser(t)
	rig := consoleRig{app: app, console: uniqueConsole()}
	rig.tester = startCaddy(t, edit(consoleSites(t, rig.app, rig.console)))
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

// consoleWidths are the widths the console's layout is measured at: a
// desktop, a laptop, a phone.
var consoleWidths = []struct{ width, height int64 }{{1440, 900}, {1280, 800}, {390, 844}}

// layoutProblems is a JavaScript expression listing, from element boxes,
// what breaks the console's layout at the current width: the document
// wider than the window; at 1280 px and more, a column of the calls
// table (the verdict included) outside its box or a table wider than its
// box; below 900 px, the calls beside the side instead of under it; a
// control of the file round trip outside its panel; a body, address or
// header value that may break a word.
const layoutProblems = `(() => {
  const out = [];
  const w = window.innerWidth;
  const doc = document.documentElement;
  if (doc.scrollWidth > w) out.push('the document is ' + doc.scrollWidth + ' px wide in ' + w);
  const box = (e) => e.getBoundingClientRect();
  const wrap = document.querySelector('.calls-wrap');
  const wb = box(wrap);
  if (w >= 1280) {
    if (wrap.scrollWidth > wrap.clientWidth) out.push('the calls table scrolls sideways: ' + wrap.scrollWidth + ' in ' + wrap.clientWidth);
    const cells = [...document.querySelectorAll('table.calls th'), ...document.querySelectorAll('[data-testid="call-verdict"]')];
    if (!document.querySelector('[data-testid="call-verdict"]')) out.push('no verdict cell');
    for (const c of cells) {
      const b = box(c);
      if (b.left < wb.left - 0.5 || b.right > wb.right + 0.5 || b.width < 30) out.push('a cell of the calls table at ' + b.left + '..' + b.right + ' in ' + wb.left + '..' + wb.right + ': ' + c.textContent.slice(0, 20));
    }
  }
  if (w < 900) {
    const side = box(document.querySelector('.side'));
    const pane = box(document.querySelector('.calls-pane'));
    if (pane.top < side.bottom || Math.abs(pane.left - side.left) > 1) out.push('not one column: the calls at ' + pane.left + ',' + pane.top + ', the side ends at ' + side.bottom);
  }
  const panel = box(document.querySelector('[data-testid="file-form"]').closest('section'));
  for (const c of document.querySelectorAll('[data-testid="file-form"] select, [data-testid="file-form"] input, [data-action="build"], [data-action="build-pseudo"], [data-action="pre-export"], [data-testid="preexport-module"]')) {
    const b = box(c);
    if (b.right > panel.right + 0.5 || b.left < panel.left - 0.5) out.push('a control of the file round trip at ' + b.left + '..' + b.right + ' outside its panel ' + panel.left + '..' + panel.right);
  }
  for (const e of document.querySelectorAll('pre, .headers dd, .detail .line code')) {
    const s = getComputedStyle(e);
    if (s.wordBreak === 'break-all' || s.overflowWrap === 'anywhere' || s.overflowWrap === 'break-word') out.push('a ' + e.tagName + ' may break words: ' + s.wordBreak + ' ' + s.overflowWrap);
    if (e.tagName === 'PRE' && s.whiteSpace !== 'pre') out.push('a pre wraps: ' + s.whiteSpace);
    if (box(e).right > box(e.closest('section')).right + 0.5) out.push('a ' + e.tagName + ' runs past its section');
  }
  return JSON.stringify(out);
})()`

// TestConsoleBrowserLayout measures the console at 1440×900, 1280×800 and
// 390×844 with a call selected: every column of the calls table within
// its box at the desktop widths, one column and no sideways scroll of the
// document on the phone, the file round trip's controls in their panel,
// no word broken. With SERVICEGATE_CONSOLE_SHOTS set to a directory (the
// docs), it writes console-<width>.png there.
func TestConsoleBrowserLayout(t *testing.T) {
	page, _ := openConsoleOf(t, newFailingApp(t).URL, func(sites string) string { return sites })
	installAcme(t, page)
	deliverFromPage(t, page)
	page.click(t, `[data-testid="org"][data-domain="unpaid.example"] [data-action="open-as-user"]`)
	page.waitFor(t, "the request as a user, selected", sel(row("user", "unpaid.example", `[data-selected="true"]`))+" !== null")
	file := filepath.Join(t.TempDir(), "crash.kv")
	if err := os.WriteFile(file, []byte("greeting = Hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page.setFile(t, `[data-testid="file-upload"]`, file)
	page.waitFor(t, "the refused parse-file row", sel(`[data-testid="call"][data-kind="parse-file"][data-status="502"]`)+" !== null")
	page.click(t, `[data-testid="call"][data-kind="parse-file"]`)
	selectedID(t, page)
	page.waitFor(t, "the app's side", sel(`[data-testid="app-answer"][data-status="500"]`)+" !== null")
	for _, size := range consoleWidths {
		page.resize(t, size.width, size.height)
		page.waitFor(t, "the new width", "window.innerWidth === "+strconv.FormatInt(size.width, 10))
		if problems := page.eval(t, layoutProblems); problems != "[]" {
			t.Errorf("at %d×%d: %s", size.width, size.height, problems)
		}
		if dir := os.Getenv("SERVICEGATE_CONSOLE_SHOTS"); dir != "" {
			page.eval(t, "window.scrollTo(0, 0)")
			page.screenshot(t, filepath.Join(dir, "console-"+strconv.FormatInt(size.width, 10)+".png"))
		}
	}
	if dir := os.Getenv("SERVICEGATE_CONSOLE_SHOTS"); dir != "" {
		// The app's side of the refused call, in view.
		page.resize(t, 1440, 900)
		page.waitFor(t, "the width of the picture", "window.innerWidth === 1440")
		page.eval(t, sel(`[data-testid="service-request"]`)+".scrollIntoView()")
		page.screenshot(t, filepath.Join(dir, "console-app-side.png"))
	}
}

// TestConsoleBrowserDarkMode: with prefers-color-scheme: dark the page is
// dark, its text light, and a body block dark too.
func TestConsoleBrowserDarkMode(t *testing.T) {
	page, _ := openConsole(t)
	luminance := func(expr string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(page.eval(t, `((c) => { const [r, g, b] = c.match(/\d+(\.\d+)?/g).map(Number); return (0.2126*r + 0.7152*g + 0.0722*b) / 255 })(`+expr+`)`), 64)
		if err != nil {
			t.Fatalf("the colour of %s: %v", expr, err)
		}
		return v
	}
	bg := `getComputedStyle(document.body).backgroundColor === 'rgba(0, 0, 0, 0)' ? getComputedStyle(document.documentElement).backgroundColor : getComputedStyle(document.body).backgroundColor`
	if l := luminance(bg); l < 0.8 {
		t.Fatalf("the light page's background: %.2f", l)
	}
	err := page.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	page.waitFor(t, "the dark scheme", `matchMedia('(prefers-color-scheme: dark)').matches`)
	if l := luminance(bg); l > 0.2 {
		t.Errorf("the dark page's background: %.2f", l)
	}
	if l := luminance(`getComputedStyle(document.body).color`); l < 0.7 {
		t.Errorf("the dark page's text: %.2f", l)
	}
	if l := luminance(`getComputedStyle(document.querySelector('section')).backgroundColor`); l > 0.2 {
		t.Errorf("a dark section: %.2f", l)
	}
	if l := luminance(`getComputedStyle(document.querySelector('[data-testid="delivery-body"]')).backgroundColor`); l > 0.25 {
		t.Errorf("a dark text area: %.2f", l)
	}
}

// TestConsoleBrowserDiffMarksAndCurl: a resend with one byte changed after
// signing marks that byte against the delivery it resends; Copy as curl
// says that it copied (or where the command is).
func TestConsoleBrowserDiffMarksAndCurl(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	first := deliverFromPage(t, page)
	page.click(t, `[data-testid="call-detail"] [data-action="curl"]`)
	page.waitFor(t, "the curl's confirmation", sel(`[data-testid="curl-copied"]`)+`.dataset.state !== undefined && `+
		sel(`[data-testid="curl-copied"]`)+`.textContent !== '' && `+sel(`[data-testid="curl"]`)+`.textContent.startsWith('curl ')`)
	page.click(t, `[data-testid="call-detail"] details.resend summary`)
	page.choose(t, `[data-testid="resend-tamper"]`, "body")
	page.click(t, `[data-testid="call-detail"] [data-action="resend"]`)
	page.waitFor(t, "the tampered resend, selected, with its marks", sel(row("delivery", "acme.example", `[data-outcome="refused"][data-selected="true"]`))+
		` !== null && `+sel(`[data-testid="call-detail"][data-diff]`)+` !== null`)
	marks := page.eval(t, `JSON.stringify([...document.querySelectorAll('[data-testid="diff-mark"]')].map((m) => m.textContent))`)
	if marks == "[]" || strings.Count(marks, ",") != 0 || len([]rune(strings.Trim(marks, `[]"`))) != 1 {
		t.Fatalf("the marks: %s", marks)
	}
	var original, resent struct {
		Request struct {
			Body string `json:"body"`
		} `json:"request"`
	}
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(first, 10), "", &original)
	consoleCall(t, "GET", "calls/"+strconv.FormatInt(selectedID(t, page), 10), "", &resent)
	at := page.eval(t, `(() => { const m = document.querySelector('[data-testid="diff-mark"]'); let n = 0; for (let e = m.previousSibling; e; e = e.previousSibling) n += e.textContent.length; return n })()`)
	i, _ := strconv.Atoi(at)
	if i >= len(original.Request.Body) || original.Request.Body[i] == resent.Request.Body[i] || original.Request.Body[:i] != resent.Request.Body[:i] {
		t.Fatalf("the mark at %d does not sit on the changed byte", i)
	}
}

// TestConsoleBrowserArrowKeys: the arrow keys move the selection through
// the calls' rows, and the detail follows.
func TestConsoleBrowserArrowKeys(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	deliverFromPage(t, page)
	ids := page.eval(t, `[...document.querySelectorAll('[data-testid="call"]')].map((r) => r.dataset.id).join(' ')`)
	rows := strings.Fields(ids)
	if len(rows) < 3 {
		t.Fatalf("rows %q", ids)
	}
	page.eval(t, sel(`[data-testid="call"]`)+".focus()")
	for i, key := range []string{kb.ArrowDown, kb.ArrowDown, kb.ArrowUp} {
		want := rows[[]int{1, 2, 1}[i]]
		if err := page.do(chromedp.KeyEvent(key)); err != nil {
			t.Fatal(err)
		}
		page.waitFor(t, "row "+want+" selected and focused", sel(`[data-testid="call"][data-selected="true"]`)+`.dataset.id === '`+want+
			`' && document.activeElement.dataset.id === '`+want+`' && `+sel(`[data-testid="call-detail"]`)+`.dataset.id === '`+want+`'`)
	}
}

// TestConsoleBrowserSearch: the search box shows only the calls whose
// URL, headers or bodies hold its text, and the export links carry it.
func TestConsoleBrowserSearch(t *testing.T) {
	page, _ := openConsole(t)
	installAcme(t, page)
	deliverFromPage(t, page)
	search := func(text string) {
		t.Helper()
		page.eval(t, `((e) => { e.value = `+jsString(text)+`; e.dispatchEvent(new Event('input', {bubbles: true})); return true })(`+sel(`[data-testid="call-search"]`)+`)`)
	}
	visible := `[...document.querySelectorAll('[data-testid="call"]')].filter((r) => !r.hidden).map((r) => r.dataset.kind).join(' ')`
	search("project.translated")
	page.waitFor(t, "only the delivery", sel(`[data-testid="call-search"]`)+`.dataset.state === 'done' && `+visible+` === 'delivery'`)
	if href := page.eval(t, sel(`[data-testid="export-har"]`)+".getAttribute('href')"); href != "/emulator/api/calls?q=project.translated&format=har" {
		t.Errorf("the HAR link: %s", href)
	}
	// A header only the app received, which the gateway added.
	search("X-Service-App-Token")
	page.waitFor(t, "the calls the gateway added an app token to", sel(`[data-testid="call-search"]`)+`.dataset.found === '2' && `+visible+` === 'delivery installed'`)
	search("")
	page.waitFor(t, "every call again", sel(`[data-testid="call-search"]`)+`.dataset.found === '' && !`+visible+`.includes('  ') && `+
		`[...document.querySelectorAll('[data-testid="call"]')].every((r) => !r.hidden)`)
}

// TestConsoleBrowserAppSideOfRefusedCall: a parse-file job the app
// answers 500 with a traceback, which the gateway refuses with a 502,
// shows the app's 500 and its body beside what the app received.
func TestConsoleBrowserAppSideOfRefusedCall(t *testing.T) {
	page, _ := openConsoleOf(t, newFailingApp(t).URL, func(sites string) string { return sites })
	installAcme(t, page)
	file := filepath.Join(t.TempDir(), "crash.kv")
	if err := os.WriteFile(file, []byte("greeting = Hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page.setFile(t, `[data-testid="file-upload"]`, file)
	page.waitFor(t, "the refused parse-file row", sel(`[data-testid="call"][data-kind="parse-file"][data-status="502"]`)+" !== null")
	page.click(t, `[data-testid="call"][data-kind="parse-file"]`)
	page.waitFor(t, "the app's 500", sel(`[data-testid="app-answer"][data-status="500"]`)+` !== null && `+
		sel(`[data-testid="app-answer"]`)+`.textContent.includes('Traceback (most recent call last)') && `+
		sel(`[data-testid="app-received"]`)+`.textContent.includes('POST /file-format') && `+
		sel(`[data-testid="gateway-verdict"][data-outcome="refused"]`)+` !== null`)
}

// TestConsoleBrowserSubscriptionCacheNote: after Make unpaid the
// organization says that the gateway of the process forgot its cached
// answer; with the gateway in another process it says that the cache
// keeps the old answer until expires or a purge, and offers the purge.
func TestConsoleBrowserSubscriptionCacheNote(t *testing.T) {
	note := sel(`[data-testid="org"][data-domain="acme.example"] [data-testid="cache-note"]`)
	t.Run("gateway here", func(t *testing.T) {
		page, _ := openConsoleOf(t, newConsoleApp(t).URL, func(sites string) string {
			return strings.Replace(sites, "\t\tinstallations {", "\t\tsubscription\n\t\tinstallations {", 1)
		})
		page.click(t, `[data-testid="org"][data-domain="acme.example"] [data-action="unpaid"]`)
		page.waitFor(t, "the note", note+` !== null && `+note+`.dataset.state === 'forgotten'`)
	})
	t.Run("gateway elsewhere", func(t *testing.T) {
		page, _ := openConsoleOf(t, newConsoleApp(t).URL, func(sites string) string {
			return sites[:strings.Index(sites, "\nhttp://localhost:{port}")]
		})
		page.allowNetworkErrors.Store(true) // the app's descriptor, which nothing serves
		page.click(t, `[data-testid="org"][data-domain="acme.example"] [data-action="unpaid"]`)
		page.waitFor(t, "the note and its purge", note+` !== null && `+note+`.dataset.state === 'kept' && `+note+
			`.textContent.includes('until its expires') && `+sel(`[data-testid="purge-command"]`)+
			`.textContent.includes('/service/subscription/cache?organization=acme.example')`)
		page.click(t, `[data-action="copy-purge"]`)
		page.waitFor(t, "the copy's confirmation", sel(`[data-testid="org"][data-domain="acme.example"] [data-testid="copied"]`)+`.dataset.state !== undefined`)
	})
}
