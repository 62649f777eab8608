// Command gateway serves the services' REST API (grpc-gateway), the OpenAPI
// document and the operator dashboard. Configuration comes from environment
// variables (see docs/GATEWAY.md); a bad value stops it with exit code 2,
// naming every bad variable. The pieces are built by internal/gateway (one
// file); this command serves them.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bmcis/knowledge/gateway/internal/gateway"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/tracing"
	"github.com/bmcis/knowledge/platform/version"
)

func main() {
	os.Exit(run())
}

func run() int {
	env := config.FromEnv()
	cfg := settings.Load(env)
	traceCfg := tracing.LoadConfig(env)
	if err := env.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "gateway: %v\n", err)
		return 2
	}
	log := logging.New(os.Stderr, "gateway", cfg.LogLevel)
	slog.SetDefault(log)
	stopTracing, err := tracing.Start(context.Background(), traceCfg, "gateway", log)
	if err != nil {
		log.Error("start failed", "error", err.Error())
		return 1
	}
	defer stopTracing()

	g, err := gateway.New(cfg, log)
	if err != nil {
		log.Error("start failed", "error", err.Error())
		return 1
	}
	defer g.Close()

	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("start failed", "error", fmt.Sprintf("listen on %s: %v", cfg.Addr, err))
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, g, cfg, lis, log); err != nil {
		log.Error("serve failed", "error", err.Error())
		return 1
	}
	log.Info("stopped")
	return 0
}

// serve runs the health checks and scrapes, the public server on lis and
// the metrics server on cfg.MetricsAddr until ctx ends, then drains
// requests in flight.
func serve(ctx context.Context, g *gateway.Gateway, cfg settings.Config, lis net.Listener, log *slog.Logger) error {
	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	g.Start(bg)
	srv := httpServer(cfg, g.Handler(), log)
	var metricsSrv *http.Server
	if cfg.MetricsAddr != "" {
		ml, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			_ = lis.Close()
			return fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", g.MetricsHandler())
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = metricsSrv.Serve(ml) }()
		log.Info("metrics listening", "addr", ml.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- cfg.Conns.Serve(srv, lis) }()
	log.Info("gateway listening", "addr", lis.Addr().String(), "version", version.Version, "config", cfg.String())
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	g.Stopping()
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, scancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
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

// httpServer is the one place the public HTTP server is configured: header,
// read, write and idle limits.
func httpServer(cfg settings.Config, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.Conns.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
