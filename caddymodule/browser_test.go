package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's headless Chromium with chromedp: one
// browser for the whole test binary, a tab of its own for each test. Any
// console error, uncaught exception or error the browser logs (a
// Content-Security-Policy violation, say) fails the test; a failed test
// leaves a screenshot of its tab. They run only with
// SERVICEGATE_BROWSER_TESTS=1 and Chromium installed, and wait on the
// page's own markers (data-testid, data-state, data-live), never for a
// while.

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// browserStartBudget bounds Chromium's start on a loaded machine.
const browserStartBudget = 90 * time.Second

// browserStepBudget bounds one step in a tab: a command, or a wait for
// the page's markers.
const browserStepBudget = 30 * time.Second

// chromiumFlags start Chromium headless with a fresh profile (chromedp
// makes it, and removes it when the browser stops), talking to nothing
// but the pages the tests open: the machine may have no network.
// --no-sandbox because CI runs the tests as root.
var chromiumFlags = []chromedp.ExecAllocatorOption{
	chromedp.ExecPath(chromiumPath),
	chromedp.Headless,
	chromedp.NoSandbox,
	chromedp.Flag("disable-gpu", true),
	chromedp.Flag("disable-quic", true),
	chromedp.NoFirstRun,
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.Flag("force-color-profile", "srgb"),
}

// chromium is the test binary's one browser, started by the first test
// that needs it and stopped when the tests end (stopChromium).
var chromium struct {
	once sync.Once
	// browser is the context a tab's context derives from.
	browser context.Context
	stop    func()
	err     error
}

// needBrowser skips a test unless the browser tests are asked for and
// Chromium is installed.
func needBrowser(t *testing.T) {
	t.Helper()
	if os.Getenv("SERVICEGATE_BROWSER_TESTS") != "1" {
		t.Skip("browser test: set SERVICEGATE_BROWSER_TESTS=1 to run it")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("browser test: %s is not installed", chromiumPath)
	}
}

// startChromium starts the browser, once, and returns its context.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	chromium.once.Do(func() {
		root, cancel := context.WithCancel(context.Background())
		alloc, stopAlloc := chromedp.NewExecAllocator(root, chromiumFlags...)
		browser, stopBrowser := chromedp.NewContext(alloc)
		chromium.browser = browser
		chromium.stop = func() { stopBrowser(); stopAlloc(); cancel() }
		// The first run starts Chromium and ties it to browser for good,
		// so the budget cannot be a deadline on that context: a timer
		// cancels the start instead.
		late := time.AfterFunc(browserStartBudget, cancel)
		chromium.err = chromedp.Do(browser)
		if !late.Stop() {
			chromium.err = fmt.Errorf("Chromium did not start within %v: %w", browserStartBudget, chromium.err)
		}
	})
	if chromium.err != nil {
		t.Fatalf("starting Chromium: %v", chromium.err)
	}
	return chromium.browser
}

// stopChromium stops the browser and the helpers it started, and removes
// its profile; TestMain calls it.
func stopChromium() {
	if chromium.stop != nil {
		chromium.stop()
	}
}

// cdpPage is one tab of the browser.
type cdpPage struct {
	ctx context.Context
	// problems are the console errors, exceptions and browser errors the
	// page logged, as they arrived.
	mu       sync.Mutex
	problems []string
	// allowNetworkErrors lets the browser log failed requests without
	// failing the test (a dropped event stream does).
	allowNetworkErrors atomic.Bool
}

// newTab skips the test unless the browser tests run, and opens a tab
// for it: 1400x900, console and log watched. When the test ends the tab
// is closed, after a screenshot if the test failed; an error the page
// logged fails the test.
func newTab(t *testing.T) *cdpPage {
	t.Helper()
	needBrowser(t)
	p := &cdpPage{}
	// chromedp enables the Runtime and Log domains as it opens the tab;
	// the listener sees every event from the first.
	ctx, closeTab := chromedp.NewContext(startChromium(t), chromedp.WithListener(p.noteEvent))
	p.ctx = ctx
	t.Cleanup(func() {
		p.eval(t, "1") // the events the page sent before it have arrived
		p.mu.Lock()
		problems := p.problems
		p.mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
		}
		if t.Failed() {
			p.screenshot(t, filepath.Join(os.TempDir(), "servicegate-browser-tests", screenshotName(t.Name())))
		}
		closeTab()
	})
	// The tab's first run opens it and ties it to ctx, so its budget is a
	// timer too.
	late := time.AfterFunc(browserStepBudget, closeTab)
	err := chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900))
	if !late.Stop() {
		err = fmt.Errorf("the tab did not open within %v: %w", browserStepBudget, err)
	}
	if err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return p
}

func screenshotName(test string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(test, "_") + ".png"
}

// do runs chromedp actions in the tab, each step within its budget.
func (p *cdpPage) do(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.ctx, browserStepBudget)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// resize sets the tab's viewport.
func (p *cdpPage) resize(t *testing.T, width, height int64) {
	t.Helper()
	if err := p.do(chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
}

// screenshot writes a PNG of the tab's viewport to path.
func (p *cdpPage) screenshot(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepBudget)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// navigate loads url in the tab.
func (p *cdpPage) navigate(t *testing.T, url string) {
	t.Helper()
	if err := p.do(chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
}

// setFile puts a file in a file input, as choosing it does.
func (p *cdpPage) setFile(t *testing.T, selector, path string) {
	t.Helper()
	if err := p.do(chromedp.SetUploadFiles(chromedp.CSS(selector), []string{path})); err != nil {
		t.Fatalf("%s: %v", selector, err)
	}
}

// noteEvent keeps what a DevTools event says went wrong in the page. It
// runs on the goroutine that reads the tab's messages.
func (p *cdpPage) noteEvent(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			problem = "console." + string(ev.Type) + ":"
			for _, a := range ev.Args {
				if len(a.Value) > 0 {
					problem += " " + string(a.Value)
				} else {
					problem += " " + a.Description
				}
			}
		}
	case *runtime.EventExceptionThrown:
		problem = "exception: " + ev.ExceptionDetails.Text
		if e := ev.ExceptionDetails.Exception; e != nil {
			problem += " " + e.Description
		}
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level == log.EntryLevelError && !(p.allowNetworkErrors.Load() && e.Source == log.EntrySourceNetwork) {
			problem = "browser (" + string(e.Source) + "): " + e.Text + " " + e.URL
		}
	}
	if problem != "" {
		p.mu.Lock()
		p.problems = append(p.problems, problem)
		p.mu.Unlock()
	}
}

// eval evaluates a JavaScript expression in the page and returns its value
// as a string ("" when it throws).
func (p *cdpPage) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepBudget)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("String("+expr+")"))
	if exception := new(chromedp.ExceptionError); errors.As(err, &exception) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor waits until a JavaScript condition holds in the page: the page
// checks it on each frame it draws. A condition that throws does not hold
// yet. A navigation ends a wait with the browser's answer that the page
// is gone; the wait goes on in the next page.
func (p *cdpPage) waitFor(t *testing.T, what, cond string) {
	t.Helper()
	check := `(() => { try { return String(` + cond + `) === "true" } catch { return false } })()`
	ctx, cancel := context.WithTimeout(p.ctx, browserStepBudget)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](check, chromedp.WithPollingTimeout(0)))
		if err == nil {
			return
		}
		if answer := new(cdproto.Error); !errors.As(err, &answer) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v; the page is at %s showing %.600q", what, err, p.eval(t, "location.href"),
				p.eval(t, "document.body ? document.body.innerText : ''"))
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
