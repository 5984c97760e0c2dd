package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/servicegate/servicegate/version"
)

// scrapeMetrics reads Caddy's metrics from the admin endpoint, as a
// Prometheus scraping it would.
func scrapeMetrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://localhost:%d/metrics", e2eAdminPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// TestBuildInfoMetricE2E: a Caddy running any servicegate handler reports
// servicegate_build_info with the version of the binary.
func TestBuildInfoMetricE2E(t *testing.T) {
	startCaddy(t, `
localhost:{port} {
	service_auth {
		hs256_secret demo-client-secret
	}
	respond "ok"
}
`)
	want := fmt.Sprintf("servicegate_build_info{version=%q} 1\n", version.Get())
	if got := scrapeMetrics(t); !strings.Contains(got, want) {
		t.Errorf("the metrics lack %q", want)
	}
	if v := version.Get(); v == "" || v == "unknown" {
		t.Errorf("version.Get() = %q", v)
	}
}
