package caddymodule

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The browser tests drive Debian's headless Chromium over the DevTools
// protocol with the small WebSocket client below: one browser for the
// whole test binary, a tab of its own for each test. Any console error,
// uncaught exception or error the browser logs (a Content-Security-Policy
// violation, say) fails the test; a failed test leaves a screenshot of
// its tab. They run only with SERVICEGATE_BROWSER_TESTS=1 and Chromium
// installed, and wait on the page's own markers (data-testid, data-state,
// data-live), never for a while.

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// browserStartBudget bounds Chromium's start on a loaded machine.
const browserStartBudget = 90 * time.Second

// chromium is the test binary's one browser, started by the first test
// that needs it and stopped when the tests end (stopChromium).
var chromium struct {
	once    sync.Once
	cmd     *exec.Cmd
	profile string
	port    string
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

// startChromium starts headless Chromium with a fresh profile, once, and
// returns its DevTools port.
func startChromium(t *testing.T) string {
	t.Helper()
	chromium.once.Do(func() {
		chromium.profile, chromium.err = os.MkdirTemp("", "servicegate-chromium-")
		if chromium.err != nil {
			return
		}
		cmd := exec.Command(chromiumPath,
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--hide-scrollbars", "--force-color-profile=srgb",
			"--user-data-dir="+chromium.profile, "--remote-debugging-port=0", "about:blank")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if chromium.err = cmd.Start(); chromium.err != nil {
			return
		}
		chromium.cmd = cmd
		// Chromium writes the port it chose to DevToolsActivePort.
		deadline := time.Now().Add(browserStartBudget)
		for chromium.port == "" {
			if raw, err := os.ReadFile(filepath.Join(chromium.profile, "DevToolsActivePort")); err == nil {
				chromium.port, _, _ = strings.Cut(string(raw), "\n")
			}
			if chromium.port == "" {
				if time.Now().After(deadline) {
					chromium.err = errors.New("Chromium did not open its DevTools port")
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	if chromium.err != nil {
		t.Fatalf("starting Chromium: %v", chromium.err)
	}
	return chromium.port
}

// stopChromium stops the browser and the helpers it started (they share
// its process group) and removes its profile; TestMain calls it.
func stopChromium() {
	if chromium.cmd != nil {
		_ = syscall.Kill(-chromium.cmd.Process.Pid, syscall.SIGKILL)
		_ = chromium.cmd.Wait()
	}
	if chromium.profile != "" {
		os.RemoveAll(chromium.profile)
	}
}

// devtools asks the browser's DevTools HTTP endpoint.
func devtools(method, path string, out any) error {
	req, err := http.NewRequest(method, "http://127.0.0.1:"+chromium.port+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// cdpPage is one tab of the browser driven over the DevTools protocol.
type cdpPage struct {
	ws     *wsConn
	nextID int
	// problems are the console errors, exceptions and browser errors the
	// page logged, as they were read.
	mu       sync.Mutex
	problems []string
	// allowNetworkErrors lets the browser log failed requests without
	// failing the test (a dropped event stream does).
	allowNetworkErrors bool
}

// newTab skips the test unless the browser tests run, and opens a tab
// for it: 1400x900, console and log watched. When the test ends the tab
// is closed, after a screenshot if the test failed; an error the page
// logged fails the test.
func newTab(t *testing.T) *cdpPage {
	t.Helper()
	needBrowser(t)
	startChromium(t)
	var target struct {
		ID string `json:"id"`
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := devtools(http.MethodPut, "/json/new?about:blank", &target); err != nil {
		t.Fatal(err)
	}
	ws, err := dialWebSocket(target.WS)
	if err != nil {
		t.Fatal(err)
	}
	p := &cdpPage{ws: ws}
	t.Cleanup(func() {
		p.eval(t, "1") // reads what the page logged last
		p.mu.Lock()
		problems := p.problems
		p.mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
		}
		if t.Failed() {
			p.screenshot(t, filepath.Join(os.TempDir(), "servicegate-browser-tests", screenshotName(t.Name())))
		}
		ws.conn.Close()
		_ = devtools(http.MethodGet, "/json/close/"+target.ID, nil)
	})
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if _, err := p.call(m, map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": false}); err != nil {
		t.Fatal(err)
	}
	return p
}

func screenshotName(test string) string {
	return regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(test, "_") + ".png"
}

// screenshot writes a PNG of the tab's viewport to path.
func (p *cdpPage) screenshot(t *testing.T, path string) {
	t.Helper()
	raw, err := p.call("Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	var shot struct {
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal(raw, &shot); err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	if err := os.WriteFile(path, shot.Data, 0o644); err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// navigate loads url in the tab.
func (p *cdpPage) navigate(t *testing.T, url string) {
	t.Helper()
	if _, err := p.call("Page.navigate", map[string]any{"url": url}); err != nil {
		t.Fatal(err)
	}
}

// noteEvent keeps what a DevTools event says went wrong in the page.
func (p *cdpPage) noteEvent(raw []byte) {
	var ev struct {
		Method string `json:"method"`
		Params struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	var problem string
	switch ev.Method {
	case "Runtime.consoleAPICalled":
		if ev.Params.Type == "error" || ev.Params.Type == "assert" {
			problem = "console." + ev.Params.Type + ":"
			for _, a := range ev.Params.Args {
				problem += fmt.Sprintf(" %v%s", a.Value, a.Description)
			}
		}
	case "Runtime.exceptionThrown":
		problem = "exception: " + ev.Params.ExceptionDetails.Text + " " + ev.Params.ExceptionDetails.Exception.Description
	case "Log.entryAdded":
		e := ev.Params.Entry
		if e.Level == "error" && !(p.allowNetworkErrors && e.Source == "network") {
			problem = "browser (" + e.Source + "): " + e.Text + " " + e.URL
		}
	}
	if problem != "" {
		p.mu.Lock()
		p.problems = append(p.problems, problem)
		p.mu.Unlock()
	}
}

// call sends one DevTools command and returns its result, noting the
// events that arrive meanwhile.
func (p *cdpPage) call(method string, params any) (json.RawMessage, error) {
	p.nextID++
	id := p.nextID
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if err := p.ws.writeText(msg); err != nil {
		return nil, err
	}
	_ = p.ws.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		raw, err := p.ws.readMessage()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var reply struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &reply) != nil {
			continue
		}
		if reply.Method != "" {
			p.noteEvent(raw)
			continue
		}
		if reply.ID != id {
			continue
		}
		if reply.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, reply.Error.Message)
		}
		return reply.Result, nil
	}
}

// eval evaluates a JavaScript expression in the page and returns its value
// as a string ("" when it throws).
func (p *cdpPage) eval(t *testing.T, expr string) string {
	t.Helper()
	raw, err := p.call("Runtime.evaluate", map[string]any{"expression": "String(" + expr + ")", "returnByValue": true})
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.ExceptionDetails != nil {
		return ""
	}
	return res.Result.Value
}

// waitFor polls until a JavaScript condition holds in the page.
func (p *cdpPage) waitFor(t *testing.T, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for p.eval(t, cond) != "true" {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: the page is at %s showing %.600q", what, p.eval(t, "location.href"),
				p.eval(t, "document.body ? document.body.innerText : ''"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// wsConn is the client end of a WebSocket (RFC 6455), enough for the
// DevTools protocol: masked text frames out; text, continuation, ping and
// close frames in.
type wsConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialWebSocket(rawURL string) (*wsConn, error) {
	rest, ok := strings.CutPrefix(rawURL, "ws://")
	if !ok {
		return nil, fmt.Errorf("not a ws:// address: %s", rawURL)
	}
	host, path, _ := strings.Cut(rest, "/")
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	fmt.Fprintf(conn, "GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, host, base64.StdEncoding.EncodeToString(key[:]))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake answered %s", resp.Status)
	}
	return &wsConn{conn: conn, r: r}, nil
}

func (c *wsConn) writeFrame(opcode byte, payload []byte) error {
	header := []byte{0x80 | opcode}
	switch n := len(payload); {
	case n < 126:
		header = append(header, 0x80|byte(n))
	case n <= 0xffff:
		header = append(header, 0x80|126)
		header = binary.BigEndian.AppendUint16(header, uint16(n))
	default:
		header = append(header, 0x80|127)
		header = binary.BigEndian.AppendUint64(header, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	header = append(header, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_, err := c.conn.Write(append(header, masked...))
	return err
}

func (c *wsConn) writeText(payload []byte) error { return c.writeFrame(0x1, payload) }

// readMessage returns the next complete text message.
func (c *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var head [2]byte
		if _, err := io.ReadFull(c.r, head[:]); err != nil {
			return nil, err
		}
		fin, opcode := head[0]&0x80 != 0, head[0]&0x0f
		n := uint64(head[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		if n > 64<<20 {
			return nil, errors.New("websocket frame larger than 64 MiB")
		}
		var mask [4]byte
		masked := head[1]&0x80 != 0
		if masked {
			if _, err := io.ReadFull(c.r, mask[:]); err != nil {
				return nil, err
			}
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c.r, payload); err != nil {
			return nil, err
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch opcode {
		case 0x8:
			return nil, errors.New("the browser closed the DevTools connection")
		case 0x9:
			if err := c.writeFrame(0xA, payload); err != nil {
				return nil, err
			}
			continue
		case 0xA:
			continue
		}
		msg = append(msg, payload...)
		if fin {
			return msg, nil
		}
	}
}
