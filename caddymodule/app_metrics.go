package caddymodule

import "github.com/prometheus/client_golang/prometheus"

// appDescriptorReady is 1 while service_app routes its site from the
// descriptor, and 0 while the descriptor (an address that did not answer
// at load) is still awaited and the site answers 503.
var appDescriptorReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "servicegate",
	Name:      "app_descriptor_ready",
	Help:      "Whether service_app has read its app descriptor and serves the site (1), or still awaits it and answers 503 (0), by descriptor.",
}, []string{"descriptor"})
