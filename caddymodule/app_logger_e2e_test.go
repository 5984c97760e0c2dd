package caddymodule

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The handlers service_app runs log under their own names, as they do in
// a site of their own, whether the descriptor was read when the config
// loaded or later, once the app answered: a site's log filters that name
// http.handlers.service_auth see the same lines either way.
func TestServiceAppHandlersLogUnderTheirNames(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := map[bool]string{false: "descriptor read at load", true: "descriptor read later"}[late]
		t.Run(name, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "caddy.log")
			port := freePort()
			addr := fmt.Sprintf("http://127.0.0.1:%d/manifest.json?logs=%d", port, time.Now().UnixNano())
			listen := func() {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					t.Skipf("the app's port was taken meanwhile: %v", err)
				}
				newAppUpstreamOn(t, ln)
			}
			if !late {
				listen()
			}
			startCaddyWithGlobal(t, fmt.Sprintf("\tlog {\n\t\toutput file %s\n\t\tlevel DEBUG\n\t}", logFile),
				appSites(addr, fmt.Sprintf("127.0.0.1:%d", port)))
			if late {
				listen()
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				status, _ := rawRequest(t, "GET", "/api/none", nil, "")
				if status == http.StatusUnauthorized {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("GET /api/none without a token: %d, want 401", status)
				}
			}
			var loggers []string
			for deadline := time.Now().Add(5 * time.Second); len(loggers) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				raw, _ := os.ReadFile(logFile)
				for _, line := range strings.Split(string(raw), "\n") {
					var e struct{ Logger, Msg string }
					if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "bearer token refused" {
						loggers = append(loggers, e.Logger)
					}
				}
			}
			if len(loggers) == 0 {
				t.Fatal("no DEBUG line for the refused request")
			}
			for _, l := range loggers {
				if l != "http.handlers.service_auth" {
					t.Errorf("the refusal is logged by %q, want http.handlers.service_auth", l)
				}
			}
		})
	}
}
