// Package gateway is the REST gateway and operator dashboard: grpc-gateway
// transcoding for every annotated RPC of the search, vendorgraph and auth
// services, API-key and admin-token checks through the auth service, one
// error mapping, the OpenAPI document, the dashboard's JSON endpoints and its
// static page.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protojson"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/tracing"
	"github.com/bmcis/knowledge/platform/version"
)

// Gateway states, as /api/health reports them.
const (
	StateStarting = "starting"
	StateReady    = "ready"
	StateStopped  = "stopped"
)

// Gateway serves REST and the dashboard. Build it with New, start its
// background checks with Start, serve Handler (or call Run), then Close.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	conns      map[string]*grpc.ClientConn
	authClient authv1.AuthServiceClient
	uploads    chan struct{} // slots of the upload route (maxUploads)
	rest       *runtime.ServeMux
	handler    http.Handler
	openapi    []byte

	monitor   *monitor
	collector *collector
	metrics   *gwMetrics

	stopped  atomic.Bool
	inflight atomic.Int64
}

type gwMetrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	denials  *prometheus.CounterVec
}

func newMetrics() *gwMetrics {
	reg := prometheus.NewRegistry()
	m := &gwMetrics{
		registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: mGWRequests, Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: mGWLatency, Help: "HTTP request latency, by route.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: mGWAuthDenials, Help: "Requests refused by the credential checks, by reason.",
		}, []string{"reason"}),
	}
	// Go and process metrics come from the prometheus package itself: its
	// collectors package links database/sql, which this binary must not.
	reg.MustRegister(m.requests, m.latency, m.denials,
		prometheus.NewGoCollector(),                                       //nolint:staticcheck // see above
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{})) //nolint:staticcheck // see above
	return m
}

// New dials the services (lazily: nothing needs to be up yet) and builds the
// handler.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{cfg: cfg, log: log, started: time.Now(), conns: map[string]*grpc.ClientConn{}, metrics: newMetrics(),
		uploads: make(chan struct{}, maxUploads)}
	for _, b := range cfg.Backends {
		conn, err := grpcclient.Dial(b.Addr, cfg.ServiceToken)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.conns[b.Name] = conn
	}
	for _, name := range []string{Search, VendorGraph, Auth} {
		if g.conns[name] == nil {
			g.Close()
			return nil, fmt.Errorf("no address configured for the %s service", name)
		}
	}
	g.authClient = authv1.NewAuthServiceClient(g.conns[Auth])

	g.rest = runtime.NewServeMux(
		runtime.WithErrorHandler(g.handleError),
		runtime.WithRoutingErrorHandler(g.handleRoutingError),
		runtime.WithMiddlewares(g.restAuth),
		// Nothing from the HTTP request reaches the services as metadata but
		// what the gateway puts there (request id, admin token on admin routes).
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{Marshaler: &strictJSONPb{runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}}),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
	)
	ctx := context.Background()
	if err := errors.Join(
		// The caller's read scope, then the documented defaults of omitted fields.
		searchv1.RegisterSearchServiceHandlerClient(ctx, g.rest, scopedSearch{searchDefaults{searchv1.NewSearchServiceClient(g.conns[Search])}}),
		vendorgraphv1.RegisterVendorGraphServiceHandlerClient(ctx, g.rest, scopedVendor{vendorgraphv1.NewVendorGraphServiceClient(g.conns[VendorGraph])}),
		authv1.RegisterAuthServiceHandlerClient(ctx, g.rest, g.authClient),
	); err != nil {
		g.Close()
		return nil, fmt.Errorf("register REST handlers: %w", err)
	}

	doc, err := openAPIDocument()
	if err != nil {
		g.Close()
		return nil, err
	}
	g.openapi = doc

	g.monitor = &monitor{interval: cfg.HealthInterval, timeout: cfg.HealthTimeout, ready: make(chan struct{})}
	for _, m := range serverMetas {
		p := &probe{meta: m, status: StatusConnecting}
		if m.name == MCPAdapter {
			if cfg.MCPHealthURL == "" {
				continue
			}
			p.url = cfg.MCPHealthURL
			p.http = &http.Client{Timeout: cfg.HealthTimeout}
		} else {
			p.conn = g.conns[m.name]
			p.hc = healthpb.NewHealthClient(p.conn)
		}
		g.monitor.probes = append(g.monitor.probes, p)
	}
	g.collector = &collector{g: g, client: &http.Client{Timeout: 5 * time.Second}, interval: cfg.StatsInterval, keep: cfg.StatsHistory}
	for _, b := range cfg.Backends {
		if b.MetricsURL != "" {
			g.collector.targets = append(g.collector.targets, struct{ name, url string }{b.Name, b.MetricsURL})
		}
	}
	if cfg.MCPMetricsURL != "" {
		g.collector.targets = append(g.collector.targets, struct{ name, url string }{MCPAdapter, cfg.MCPMetricsURL})
	}
	// Every request but probes gets a server span (platform/tracing).
	g.handler = tracing.HTTPHandler(g.routes(), "gateway")
	return g, nil
}

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Start runs the health checks and metrics scrapes until ctx ends.
func (g *Gateway) Start(ctx context.Context) {
	go g.monitor.run(ctx)
	go g.collector.run(ctx)
}

// Close closes the service connections.
func (g *Gateway) Close() {
	g.stopped.Store(true)
	for _, c := range g.conns {
		_ = c.Close()
	}
}

// restAuth runs on every matched REST route, before transcoding: it finds the
// route's access rule and checks the caller. A route the table does not
// classify is refused.
func (g *Gateway) restAuth(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		pat, _ := runtime.HTTPPattern(r.Context())
		rt, ok := routeFor(r.Method, pat.String())
		if !ok {
			g.handleError(r.Context(), g.rest, nil, w, r, newError(codes.PermissionDenied, "ROUTE_NOT_CLASSIFIED",
				"this route has no access rule in the gateway", nil).Err())
			return
		}
		if rec := recorderFrom(r.Context()); rec != nil {
			rec.route = rt.Method + " " + rt.Path
			rec.rt = &rt
		}
		r2, err := g.authorize(w, r, rt.Access, rt.Operation(), rt.ScopeTool(), rt.Service)
		if err != nil {
			g.handleError(r.Context(), g.rest, nil, w, r, err)
			return
		}
		next(w, r2, params)
	}
}

// Run serves on cfg.Addr (and the metrics address) until ctx ends, then
// drains requests in flight.
func (g *Gateway) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", g.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", g.cfg.Addr, err)
	}
	return g.Serve(ctx, lis)
}

// Serve is Run on a listener of the caller's.
func (g *Gateway) Serve(ctx context.Context, lis net.Listener) error {
	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Start(bg)
	srv := g.httpServer()
	var metricsSrv *http.Server
	if g.cfg.MetricsAddr != "" {
		ml, err := net.Listen("tcp", g.cfg.MetricsAddr)
		if err != nil {
			_ = lis.Close()
			return fmt.Errorf("listen for metrics on %s: %w", g.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(g.metrics.registry, promhttp.HandlerOpts{}))
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = metricsSrv.Serve(ml) }()
		g.log.Info("metrics listening", "addr", ml.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- g.cfg.Conns.Serve(srv, lis) }()
	g.log.Info("gateway listening", "addr", lis.Addr().String(), "version", version.Version, "config", g.cfg.String())
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	g.stopped.Store(true)
	g.log.Info("shutting down", "timeout", g.cfg.ShutdownTimeout.String())
	sctx, scancel := context.WithTimeout(context.Background(), g.cfg.ShutdownTimeout)
	defer scancel()
	err := srv.Shutdown(sctx)
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(sctx)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func (g *Gateway) httpServer() *http.Server {
	return &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: g.cfg.Conns.ReadHeaderTimeout,
		ReadTimeout:       g.cfg.ReadTimeout,
		WriteTimeout:      g.cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       g.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
}
