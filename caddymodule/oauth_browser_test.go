package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestServiceOAuthBrowserE2E signs in with a real browser: headless
// Chromium loads a page behind service_oauth, is sent to the emulator's
// consent page, clicks Approve, and ends on the app's answer. It runs only
// with SERVICEGATE_BROWSER_TESTS=1 and Chromium installed.
func TestServiceOAuthBrowserE2E(t *testing.T) {
	page := newTab(t)
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))

	target := e2eURL("/dashboard?tab=2")
	page.navigate(t, target)
	page.waitFor(t, "the emulator's consent page", `document.querySelector('button[value=approve]') !== null`)
	if where := page.eval(t, `location.origin`); where != rig.svc.URL {
		t.Fatalf("the consent page is at %s, want the service at %s", where, rig.svc.URL)
	}
	page.eval(t, `document.querySelector('button[value=approve]').click(), "clicked"`)
	page.waitFor(t, "the app's answer", `location.href === `+jsString(target)+` && document.body !== null && document.body.innerText.includes('"authorization"')`)

	var echo appEcho
	if err := json.Unmarshal([]byte(page.eval(t, `document.body.innerText`)), &echo); err != nil {
		t.Fatalf("the page is not the app's answer: %v", err)
	}
	if echo.Path != "/dashboard?tab=2" || !strings.HasPrefix(echo.Authorization, "Bearer ey") ||
		echo.User != "7" || echo.Domain != "acme.example" || strings.Contains(echo.Cookie, "servicegate_session") {
		t.Fatalf("the app saw %+v", echo)
	}
	if cookies := page.eval(t, `document.cookie`); strings.Contains(cookies, "servicegate_session") {
		t.Fatalf("scripts can read the session cookie: %q", cookies)
	}
}
