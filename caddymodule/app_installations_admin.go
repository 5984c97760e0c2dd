package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/servicegate/servicegate/installations"
)

func init() {
	caddy.RegisterModule(InstallationsAdmin{})
}

// InstallationsAdmin is the admin API of service_app's installations. No
// answer holds an app secret; only the token endpoint gives a token.
//
//	POST   /service/installations/token  {"organization": "<domain or id>"} → {"access_token", "expires_at"}
//	GET    /service/installations        every installation: organization id, domain, baseUrl, times
//	DELETE /service/installations?organization=<domain or id>
type InstallationsAdmin struct{}

// CaddyModule returns the Caddy module information.
func (InstallationsAdmin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.service_installations",
		New: func() caddy.Module { return new(InstallationsAdmin) },
	}
}

// Routes returns the admin routes of the module.
func (InstallationsAdmin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/service/installations", Handler: installationsAdminRoute((*installations.Books).ServeInstallations)},
		{Pattern: "/service/installations/token", Handler: installationsAdminRoute((*installations.Books).ServeToken)},
	}
}

// installationBooks holds the books of the loaded configs, by store: the
// latest config's book of each.
var installationBooks installations.Books

// installationsHeld is the number of installations held by the loaded
// configs.
var installationsHeld = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
	Namespace: "servicegate", Subsystem: "installations", Name: "held",
	Help: "Installations of the app held by service_app (organizations that installed it).",
}, func() float64 { return float64(installationBooks.Len()) })

// installationRecords counts the stored installation records of the
// loaded configs by the key they are sealed under.
var installationRecords = newKeyStateGauge()

// installationsUnreadable counts the installation records found not to
// open (each once per organization and config).
var installationsUnreadable = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "servicegate", Subsystem: "installations", Name: "unreadable_total",
	Help: "Installation records that did not open (damaged, sealed under no configured key, or another app's) and were skipped.",
})

// keyStateGauge reports installationBooks.KeyStates at each scrape.
type keyStateGauge struct{ desc *prometheus.Desc }

func newKeyStateGauge() keyStateGauge {
	return keyStateGauge{prometheus.NewDesc("servicegate_installations_records",
		"Installation records of the app held by service_app, by the key they are sealed under: current, retired (to be sealed again; a retired key may go when this is 0 on every instance), unreadable (skipped).",
		[]string{"key"}, nil)}
}

// Describe implements prometheus.Collector.
func (g keyStateGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g keyStateGauge) Collect(ch chan<- prometheus.Metric) {
	states := installationBooks.KeyStates()
	for k, n := range states {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(n), installations.KeyState(k).String())
	}
}

// installationsAdminRoute is an admin route over installationBooks, its
// refusals as the admin API's errors.
func installationsAdminRoute(serve func(*installations.Books, http.ResponseWriter, *http.Request) error) caddy.AdminHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		err := serve(&installationBooks, w, r)
		var refused *installations.AdminError
		if errors.As(err, &refused) {
			return caddy.APIError{HTTPStatus: refused.Status, Err: refused.Err}
		}
		return err
	}
}

// Interface guard.
var _ caddy.AdminRouter = (*InstallationsAdmin)(nil)
