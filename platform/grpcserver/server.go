// Package grpcserver is the one way a BMCIS service starts: a gRPC server with
// health checks, reflection, request ids, JSON logs, Prometheus metrics, panic
// recovery, per-role credential checks (platform/rpcauth) and error mapping in a single interceptor,
// and a drain on SIGTERM.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/dbhealth"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/origin"
	"github.com/bmcis/knowledge/platform/procmetrics"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/tracing"
)

// streamWorkers is how many calls at once run on reused goroutines
// (grpc.NumStreamWorkers): enough for the concurrency a replica serves
// without queueing (a search at concurrency 16), few enough that their
// grown stacks cost little memory.
const streamWorkers = 32

// Flow-control windows of every connection a service accepts, fixed (no
// bandwidth-delay probe). A caller sends at most a window a round trip on a
// stream: 1 MiB per round trip is 10 GiB/s from a neighbour (0.1 ms) and
// 20 MiB/s from across a continent (50 ms), more than an ingestion stream
// needs; gRPC's default starts at 64 KiB and grows only by probing.
//
// gRPC credits a connection's window as data arrives, so what a caller can
// make a service buffer unread is the stream window times its streams at
// once, which maxStreams bounds (256 MiB a connection); a caller past it
// waits for a stream to end (gRPC's clients queue, they do not fail).
const (
	streamWindow = 1 << 20
	connWindow   = 8 << 20
	maxStreams   = 256
)

// Server is a configured gRPC server that is not listening yet.
type Server struct {
	settings Settings
	log      *slog.Logger
	grpc     *grpc.Server
	health   *health.Server
	registry *prometheus.Registry
}

// Option adjusts a Server.
type Option func(*options)

type options struct {
	classify Classifier
	logOut   io.Writer
	table    rpcauth.Table
}

// WithClassifier maps domain errors (a lost database, say) to statuses.
func WithClassifier(c Classifier) Option { return func(o *options) { o.classify = c } }

// WithAccessTable replaces the product's RPC table (platform/rpcauth): for
// tests of the server mechanism with services outside the product.
func WithAccessTable(t rpcauth.Table) Option { return func(o *options) { o.table = t } }

// WithLogOutput sends logs to w instead of stderr.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// New builds a server from settings. Register services on GRPC() before Run.
func New(s Settings, opts ...Option) *Server {
	o := options{logOut: os.Stderr}
	for _, opt := range opts {
		opt(&o)
	}
	log := logging.New(o.logOut, s.Name, s.LogLevel)
	reg := prometheus.NewRegistry()
	// A fresh registry holds nothing yet: registering cannot collide.
	if err := procmetrics.Register(reg, s.Name); err != nil {
		panic(err)
	}
	access := rpcauth.NewVerifier(s.Credentials)
	if o.table != nil {
		access = access.WithTable(o.table)
	}
	e := &edge{log: log, access: access, classify: o.classify, metrics: newMetrics(reg, s.Name)}
	serverOpts := []grpc.ServerOption{}
	if s.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(s.TLS)))
	}
	gs := grpc.NewServer(append(serverOpts,
		// Spans start before the interceptors run, so the request's log
		// lines carry its trace id.
		grpc.StatsHandler(tracing.ServerHandler()),
		grpc.ChainUnaryInterceptor(e.unary),
		grpc.ChainStreamInterceptor(e.stream),
		// Calls run on long-lived worker goroutines whose stacks have
		// already grown to what a handler needs: a goroutine per call
		// started at 8 KiB and copied its stack as it grew, about a tenth of
		// a cached call's CPU in auth and search (issue 32). Past this many
		// calls at once, gRPC starts a goroutine per call as before.
		grpc.NumStreamWorkers(streamWorkers),
		// Fixed flow-control windows: gRPC's default sizes them by probing
		// the bandwidth-delay product, a PING after the data of each call
		// it receives, which its caller reads and acknowledges: one more
		// write and read per call on both ends (issue 32). The MCP adapter
		// fixes its side the same way (mcp-adapter/internal/backend).
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// Clients hold one HTTP/2 connection per service; ending connections
		// after a while makes them reconnect, so replicas added by an
		// autoscaler start receiving calls. The grace is long because it is
		// what a stream already under way may still take: a first load of a
		// million chunks is one ingestion stream of tens of minutes, which a
		// short grace cut off (new calls go to a new connection regardless).
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 5 * time.Minute, MaxConnectionAgeGrace: 2 * time.Hour}),
	)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	// Until Run is told the service is ready, probes see NOT_SERVING.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return &Server{settings: s, log: log, grpc: gs, health: hs, registry: reg}
}

// GRPC returns the underlying server, to register services on.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Credentials returns the caller credentials the server accepts.
func (s *Server) Credentials() rpcauth.Credentials { return s.settings.Credentials }

// Logger returns the service logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Registry returns the Prometheus registry served at /metrics.
func (s *Server) Registry() prometheus.Registerer { return s.registry }

// SetServing marks the whole server and every registered service as serving
// or not, for the gRPC health protocol.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, st)
	}
}

// DatabaseHealthService is the gRPC health service name that reports the
// service's database: NOT_SERVING while PostgreSQL does not answer (with
// platform/dbhealth's hysteresis), SERVING otherwise. The overall status
// ("") and the services' own names stay SERVING in a database outage, so
// Kubernetes neither restarts the pods nor takes them out of the Service:
// they keep serving what needs no database, and answer the rest with a
// typed, retryable UNAVAILABLE.
const DatabaseHealthService = dbhealth.HealthService

// WatchDatabase pings db until ctx ends and publishes the outcome as the
// health of DatabaseHealthService and the gauge bmcis_database_up; it logs
// each change. It blocks: run it in a goroutine.
func (s *Server) WatchDatabase(ctx context.Context, db dbhealth.Pinger) {
	up := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bmcis_database_up",
		Help: "1 while the service's PostgreSQL answers, 0 during an outage (after the health hysteresis).",
	})
	if err := s.registry.Register(up); err != nil {
		s.log.Error("register bmcis_database_up", "error", err.Error())
	}
	first := true
	dbhealth.Watch(ctx, db, dbhealth.DefaultOptions(), func(ok bool) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if ok {
			st = healthpb.HealthCheckResponse_SERVING
			up.Set(1)
			if !first {
				s.log.Info("database reachable again: health " + DatabaseHealthService + " SERVING")
			}
		} else {
			up.Set(0)
			s.log.Warn("database unreachable: health " + DatabaseHealthService + " NOT_SERVING")
		}
		first = false
		if ctx.Err() == nil {
			s.health.SetServingStatus(DatabaseHealthService, st)
		}
	})
}

// Serve listens on lis and serves until ctx ends, then drains: health turns
// NOT_SERVING, the server waits DrainDelay, stops taking calls, and waits up to
// ShutdownTimeout for calls in flight.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	var metricsSrv *http.Server
	if s.settings.MetricsAddr != "" {
		ml, err := net.Listen("tcp", s.settings.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", s.settings.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		if s.settings.Profiling {
			// Registered here, not by importing net/http/pprof, which
			// would add them to http.DefaultServeMux for every listener;
			// not /cmdline, which shows the process's arguments.
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		// Browsers' pages (DNS rebinding included) may not read it either.
		policy := origin.New(ml.Addr().String())
		checked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !policy.AllowsRequest(r) {
				http.Error(w, "origin not allowed", http.StatusForbidden)
				return
			}
			mux.ServeHTTP(w, r)
		})
		metricsSrv = &http.Server{Handler: checked, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := metricsSrv.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("metrics server stopped", "error", err.Error())
			}
		}()
		s.log.Info("metrics listening", "addr", ml.Addr().String())
	}

	s.SetServing(true)
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.grpc.Serve(lis) }()
	s.log.Info("grpc listening", "addr", lis.Addr().String())

	var err error
	select {
	case err = <-serveErr:
		err = fmt.Errorf("grpc server: %w", err)
	case <-ctx.Done():
		s.log.Info("shutting down", "drain", s.settings.DrainDelay.String())
		s.health.Shutdown()
		time.Sleep(s.settings.DrainDelay)
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(s.settings.ShutdownTimeout):
			s.log.Warn("shutdown timeout: cancelling calls in flight")
			s.grpc.Stop()
		}
	}
	if metricsSrv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = metricsSrv.Shutdown(shutdownCtx)
	}
	return err
}

// Spec describes a service binary for Main.
type Spec struct {
	// Name is the service name ("search").
	Name string
	// Defaults are the service's default addresses and token requirement.
	Defaults Defaults
	// Configure reads the service's own variables; problems go into env.
	Configure func(env *config.Reader)
	// Start connects dependencies and registers services on srv. The returned
	// cleanup runs after the server has drained.
	Start func(ctx context.Context, srv *Server) (cleanup func(), err error)
	// Options are passed to New.
	Options []Option
}

// Main runs a service binary: validate configuration (exit 2 naming every bad
// variable), start, serve until SIGINT or SIGTERM, drain, exit.
func Main(spec Spec) {
	os.Exit(run(spec))
}

func run(spec Spec) int {
	env := config.FromEnv()
	settings := LoadSettings(env, spec.Name, spec.Defaults)
	if spec.Configure != nil {
		spec.Configure(env)
	}
	if err := env.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Name, err)
		return 2
	}
	srv := New(settings, spec.Options...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopTracing, err := tracing.Start(ctx, settings.Tracing, spec.Name, srv.log)
	if err != nil {
		srv.log.Error("start failed", "error", err.Error())
		return 1
	}
	defer stopTracing()

	cleanup, err := spec.Start(ctx, srv)
	if err != nil {
		srv.log.Error("start failed", "error", err.Error())
		return 1
	}
	if cleanup != nil {
		defer cleanup()
	}
	lis, err := net.Listen("tcp", settings.GRPCAddr)
	if err != nil {
		srv.log.Error("listen failed", "addr", settings.GRPCAddr, "error", err.Error())
		return 1
	}
	if err := srv.Serve(ctx, lis); err != nil {
		srv.log.Error("serve failed", "error", err.Error())
		return 1
	}
	srv.log.Info("stopped")
	return 0
}
