// Package gateway wires the gateway's pieces together, in this one file:
// the connections to the services, the REST edge (rest), the upload route
// (upload), the health monitor (health), the metrics collector (stats) and
// the dashboard (dashboard). cmd/gateway builds it and serves its Handler;
// the tests here and in ../../e2e serve the same assembly against scripted
// and real services. The data flow and how to extend it are in
// gateway/README.md.
package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/dashboard"
	"github.com/bmcis/knowledge/gateway/internal/edgemetrics"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	"github.com/bmcis/knowledge/gateway/internal/stats"
	"github.com/bmcis/knowledge/gateway/internal/upload"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
)

// Gateway is the assembled gateway. Build it with New, start its background
// checks with Start, serve Handler, then Close.
type Gateway struct {
	cfg settings.Config
	log *slog.Logger

	conns     map[string]*grpc.ClientConn // one per service, by backends name
	metrics   *edgemetrics.Metrics
	edge      *rest.Edge
	upload    *upload.Handler
	monitor   *health.Monitor
	collector *stats.Collector
	dashboard *dashboard.Dashboard

	stopped atomic.Bool
}

// New dials the services (lazily: nothing needs to be up yet) and builds
// the pieces.
func New(cfg settings.Config, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{cfg: cfg, log: log, conns: map[string]*grpc.ClientConn{}, metrics: edgemetrics.New()}
	for _, b := range cfg.Backends {
		conn, err := grpcclient.Dial(b.Addr, cfg.ServiceToken)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.conns[b.Name] = conn
	}

	edge, err := rest.New(cfg, log, g.metrics, g.conns)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.edge = edge

	g.upload = upload.New(searchv1.NewSearchServiceClient(g.conns[backends.Search]), cfg.MaxUploadBytes, edge.WriteError)
	if rt, ok := rest.RouteFor(http.MethodPost, rest.UploadPath); ok {
		edge.HandleRPC(rt, g.upload.ServeHTTP)
	}

	var probes []*health.Probe
	for _, name := range []string{backends.Search, backends.VendorGraph, backends.Auth} {
		probes = append(probes, health.NewGRPCProbe(name, backends.GRPCServices[name], g.conns[name]))
	}
	if cfg.MCPHealthURL != "" {
		probes = append(probes, health.NewHTTPProbe(backends.MCPAdapter, cfg.MCPHealthURL, cfg.HealthTimeout))
	}
	g.monitor = health.NewMonitor(cfg.HealthInterval, cfg.HealthTimeout, probes...)

	var targets []stats.Target
	for _, b := range cfg.Backends {
		if b.MetricsURL != "" {
			targets = append(targets, stats.Target{Name: b.Name, URL: b.MetricsURL})
		}
	}
	if cfg.MCPMetricsURL != "" {
		targets = append(targets, stats.Target{Name: backends.MCPAdapter, URL: cfg.MCPMetricsURL})
	}
	g.collector = stats.NewCollector(g.metrics.Registry, cfg.StatsInterval, cfg.StatsHistory, targets...)

	g.dashboard = dashboard.New(dashboard.Sources{
		Monitor: g.monitor, Stats: g.collector, ServerID: cfg.ServerID,
		Config:        func() map[string]any { return cfg.Effective(rest.PublicRoutes(), rest.AdminRoutes()) },
		ActiveClients: edge.ActiveClients,
		Stopped:       g.stopped.Load,
	})
	g.dashboard.Mount(edge)
	return g, nil
}

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.edge.Handler() }

// Start runs the health checks and metrics scrapes until ctx ends.
func (g *Gateway) Start(ctx context.Context) {
	go g.monitor.Run(ctx)
	go g.collector.Run(ctx)
}

// Close sends the audit entries still buffered (for up to 5 s), then
// closes the service connections.
func (g *Gateway) Close() {
	g.stopped.Store(true)
	if g.edge != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		g.edge.CloseAudit(ctx)
		cancel()
	}
	for _, c := range g.conns {
		_ = c.Close()
	}
}

// Health returns what /api/health shows.
func (g *Gateway) Health() dashboard.HealthResponse { return g.dashboard.Health() }

// Stats returns what /api/stats shows, scraping first when the last scrape is stale.
func (g *Gateway) Stats(ctx context.Context) stats.Response { return g.collector.Stats(ctx) }

// Tools returns what /api/tools shows.
func (g *Gateway) Tools() []dashboard.ToolSummary { return g.dashboard.Tools() }

// MetricsHandler serves the gateway's own metrics (edgemetrics) for
// BMCIS_GATEWAY_METRICS_ADDR.
func (g *Gateway) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(g.metrics.Registry, promhttp.HandlerOpts{})
}

// Stopping marks the gateway as shutting down: /api/health says "stopped"
// while requests in flight drain.
func (g *Gateway) Stopping() { g.stopped.Store(true) }
