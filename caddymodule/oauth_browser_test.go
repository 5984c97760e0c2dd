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
	"strings"
	"syscall"
	"testing"
	"time"
)

// chromiumPath is where Debian's chromium package puts the browser.
const chromiumPath = "/usr/bin/chromium"

// TestServiceOAuthBrowserE2E signs in with a real browser: headless
// Chromium loads a page behind service_oauth, is sent to the emulator's
// consent page, clicks Approve, and ends on the app's answer. It runs only
// with SERVICEGATE_BROWSER_TESTS=1 and Chromium installed.
func TestServiceOAuthBrowserE2E(t *testing.T) {
	if os.Getenv("SERVICEGATE_BROWSER_TESTS") != "1" {
		t.Skip("browser test: set SERVICEGATE_BROWSER_TESTS=1 to run it")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("browser test: %s is not installed", chromiumPath)
	}
	rig := newOAuthRig(t)
	startCaddy(t, rig.site(""))

	page := startChromium(t)
	target := e2eURL("/dashboard?tab=2")
	if _, err := page.call("Page.navigate", map[string]any{"url": target}); err != nil {
		t.Fatal(err)
	}
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

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// cdpPage is one page of a browser driven over the DevTools protocol.
type cdpPage struct {
	ws     *wsConn
	nextID int
}

// startChromium starts headless Chromium with a fresh profile and returns
// its first page. The browser is stopped when the test ends.
func startChromium(t *testing.T) *cdpPage {
	t.Helper()
	profile := t.TempDir()
	cmd := exec.Command(chromiumPath,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--remote-debugging-port=0", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	t.Cleanup(func() {
		// The browser and the helpers it started share its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})

	// Chromium writes the port it chose to DevToolsActivePort.
	var port string
	deadline := time.Now().Add(30 * time.Second)
	for port == "" {
		if raw, err := os.ReadFile(filepath.Join(profile, "DevToolsActivePort")); err == nil {
			port, _, _ = strings.Cut(string(raw), "\n")
		}
		if port == "" {
			if time.Now().After(deadline) {
				t.Fatal("Chromium did not open its DevTools port")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var targets []struct {
		Type string `json:"type"`
		URL  string `json:"webSocketDebuggerUrl"`
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		if target.Type == "page" {
			ws, err := dialWebSocket(target.URL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.conn.Close() })
			return &cdpPage{ws: ws}
		}
	}
	t.Fatal("Chromium has no page")
	return nil
}

// call sends one DevTools command and returns its result, skipping the
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
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &reply) != nil || reply.ID != id {
			continue
		}
		if reply.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, reply.Error.Message)
		}
		return reply.Result, nil
	}
}

// eval evaluates a JavaScript expression in the page and returns its value
// as a string.
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
			t.Fatalf("waiting for %s: the page is at %s showing %.300q", what, p.eval(t, "location.href"),
				p.eval(t, "document.body ? document.body.innerText : ''"))
		}
		time.Sleep(100 * time.Millisecond)
	}
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
