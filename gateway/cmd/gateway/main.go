// Command gateway serves the services' REST API (grpc-gateway), the OpenAPI
// document and the operator dashboard. Configuration comes from environment
// variables (see docs/GATEWAY.md); a bad value stops it with exit code 2,
// naming every bad variable.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/bmcis/knowledge/gateway/internal/gateway"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/tracing"
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

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := g.Run(ctx); err != nil {
		log.Error("serve failed", "error", err.Error())
		return 1
	}
	log.Info("stopped")
	return 0
}
