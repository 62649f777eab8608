// Package edgemetrics is the gateway's own Prometheus metrics: what the REST
// edge counts per request and per denial, served on
// BMCIS_GATEWAY_METRICS_ADDR and read back by the stats collector for the
// dashboard's route table and REST latency.
package edgemetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/platform/procmetrics"
)

// Metric names; the stats collector reads them from Registry.
const (
	Requests    = "bmcis_gateway_http_requests_total"  // {route, code}
	Latency     = "bmcis_gateway_http_request_seconds" // histogram {route}
	AuthDenials = "bmcis_gateway_auth_denials_total"   // {reason}
)

// Metrics are the gateway's own metrics and the registry holding them.
type Metrics struct {
	Registry *prometheus.Registry
	Requests *prometheus.CounterVec
	Latency  *prometheus.HistogramVec
	Denials  *prometheus.CounterVec
}

// New registers the gateway's metrics, and the process metrics every binary
// serves (platform/procmetrics), in a registry of their own.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: Requests, Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: Latency, Help: "HTTP request latency, by route.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		Denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: AuthDenials, Help: "Requests refused by the credential checks, by reason.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.Requests, m.Latency, m.Denials)
	// A fresh registry holds nothing of procmetrics': registering cannot collide.
	if err := procmetrics.Register(reg, "gateway"); err != nil {
		panic(err)
	}
	return m
}
