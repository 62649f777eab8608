// Package procmetrics registers what every BMCIS binary's /metrics says about
// its process: the Go runtime and process collectors
// (process_start_time_seconds among them) and bmcis_build_info{service,
// version}. The gateway's dashboard reads a server's uptime and version from
// these (docs/GATEWAY.md), so services, the MCP adapter and the gateway
// register them here, alike.
package procmetrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/platform/version"
)

// BuildInfo is the build-info gauge's name.
const BuildInfo = "bmcis_build_info"

// Register adds the Go and process collectors and bmcis_build_info for
// service to reg.
func Register(reg prometheus.Registerer, service string) error {
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: BuildInfo,
		Help: "Always 1; labels say which build is running.",
	}, []string{"service", "version"})
	buildInfo.WithLabelValues(service, version.Version).Set(1)
	for _, c := range []prometheus.Collector{
		// The collectors come from the prometheus package itself, not its
		// collectors package (which wraps the same ones): that one links
		// database/sql, which the adapter and gateway must not
		// (internal/lightdeps).
		prometheus.NewGoCollector(),                                       //nolint:staticcheck // see above
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), //nolint:staticcheck // see above
		buildInfo,
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the process metrics: %w", err)
		}
	}
	return nil
}
