// Command mcp-adapter is the MCP server Claude Desktop talks to. It is
// stateless and fans tool calls out to the search, vendorgraph and auth
// services.
//
// With BMCIS_MCP_URL set it runs as a bridge (what Claude Desktop uses): MCP
// over stdio, forwarded with the user's BMCIS_API_KEY to the deployed
// streamable-HTTP endpoint; it then needs no service credential and no
// backend address. Without it (direct mode, for operators and tests) it
// talks gRPC to the services.
//
// Direct mode speaks MCP over stdio by default (Claude Desktop starts it; the API key
// comes from BMCIS_API_KEY) or over streamable HTTP with
// BMCIS_MCP_TRANSPORT=http (the key comes with each request). Configuration
// is read from the environment; an invalid value exits with status 2 and a
// message naming the variable. See docs/MCP.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/origin"
	"github.com/bmcis/knowledge/platform/procmetrics"
	"github.com/bmcis/knowledge/platform/tracing"
	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/bridge"
	adapterconfig "github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/indexwatch"
	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
)

// gcPercent is the adapter's GOGC unless the environment sets one. A call
// allocates a few hundred KB (mcp-go's JSON, the envelope) against a small
// live heap, so at Go's default of 100 the collector ran many times a
// second and its work landed on the calls; at 400 it runs a quarter as
// often (docs/BENCHMARKS.md, "The adapter's collector").
const gcPercent = 400

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) > 1 && (os.Args[1] == "version" || os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(version.Version)
		return 0
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	env := config.FromEnv()
	cfg := adapterconfig.Load(env)
	traceCfg := tracing.LoadConfig(env)
	if err := env.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-adapter:", err)
		return 2
	}
	// stdout carries the protocol on stdio: logs always go to stderr.
	logger := logging.New(os.Stderr, "mcp-adapter", cfg.LogLevel)
	slog.SetDefault(logger)
	stopTracing, err := tracing.Start(context.Background(), traceCfg, "mcp-adapter", logger)
	if err != nil {
		logger.Error("tracing", "error", err.Error())
		return 1
	}
	defer stopTracing()

	if err := tokens.Init(); err != nil {
		logger.Error("tokenizer", "error", err.Error())
		return 1
	}
	if cfg.Mode == adapterconfig.ModeBridge {
		return runBridge(cfg, logger)
	}
	clients, err := backend.Dial(backend.Addrs{
		Search: cfg.SearchAddr, VendorGraph: cfg.VendorGraphAddr, Auth: cfg.AuthAddr,
	}, cfg.ServiceToken, backend.Timeouts{
		Search: cfg.SearchTimeout, VendorGraph: cfg.VendorGraphTimeout, Auth: cfg.AuthTimeout,
	})
	if err != nil {
		logger.Error("dial backends", "error", err.Error())
		return 1
	}
	defer clients.Close()
	codec, err := cursor.New(cfg.CursorSecret)
	if err != nil {
		logger.Error("cursor secret", "error", err.Error())
		return 1
	}
	if cfg.CursorSecretGenerated {
		logger.Info("BMCIS_CURSOR_SECRET not set: cursors are signed with a per-process secret and die with the process")
	}

	// Every tool call and resource read goes to the audit trail, through a
	// buffer that never holds a call up (platform/auditlog).
	reg := prometheus.NewRegistry()
	cfg.Audit.Registerer, cfg.Audit.Logger = reg, logger
	recorder, err := cfg.Audit.Start(clients.Auth)
	if err != nil {
		logger.Error("audit", "error", err.Error())
		return 1
	}
	defer func() {
		// Send what the buffer holds before exiting (docs/AUDIT.md).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recorder.Close(ctx)
	}()
	// Per-tool calls and latency, read by the gateway's /api/stats
	// (BMCIS_MCP_METRICS_URL) and Prometheus.
	toolMetrics, err := tools.NewMetrics(reg)
	if err != nil {
		logger.Error("metrics", "error", err.Error())
		return 1
	}
	// Uptime and version for the dashboard's adapter card, as every binary.
	if err := procmetrics.Register(reg, "mcp-adapter"); err != nil {
		logger.Error("metrics", "error", err.Error())
		return 1
	}
	if cfg.MetricsAddr != "" {
		go serveMetrics(cfg.MetricsAddr, reg, logger)
	}

	// The answer cache follows the search index (indexwatch): without a
	// current epoch it is bypassed, so the watcher runs whenever it is on,
	// and stops before the connections close.
	answers := tools.NewAnswerCache(cfg.AnswerCacheTTL, int64(cfg.AnswerCacheBytes), nil)
	var index tools.IndexEpoch
	if answers != nil {
		w, stopWatch := indexwatch.Start(clients.Search, logger)
		defer stopWatch()
		index = w
	}

	opts := tools.Options{
		Clients:             clients,
		Cursors:             codec,
		Thresholds:          cfg.Thresholds,
		DefaultResponseMode: cfg.DefaultResponseMode,
		DefaultFormat:       cfg.DefaultFormat,
		Desktop:             cfg.Desktop,
		Signals:             cfg.Signals,
		ValidateOutput:      cfg.ValidateOutput,
		// Leases are given back when the process stops (Close, deferred
		// below), in bounded time.
		AllowCache: allowcache.New(cfg.AllowCacheTTL, allowcache.DefaultMaxEntries).
			WithLeases(cfg.KeyLease, clients.ReleaseLease),
		Answers: answers,
		Index:   index,
		Logger:  logger,
		Audit:   recorder,
		Metrics: toolMetrics,
	}

	defer opts.AllowCache.Close()
	// Leases, the answer cache and the index watch, read from their own
	// counts at scrape time (docs/OPERATIONS.md).
	if err := tools.RegisterCacheMetrics(reg, opts); err != nil {
		logger.Error("metrics", "error", err.Error())
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cfg.Transport {
	case adapterconfig.TransportHTTP:
		opts.Key = tools.APIKeyFromContext
		opts.KeyHint = transport.HTTPKeyHint
		h := transport.HTTPHandler(tools.New(opts), clients, logger, int64(cfg.HTTPMaxBodyBytes), tools.NewListScope(opts))
		if cfg.OAuth.Issuer != "" {
			v := oauth.New(oauth.Config{Issuer: cfg.OAuth.Issuer, Resource: cfg.OAuth.Resource, JWKSURL: cfg.OAuth.JWKSURL, Scopes: cfg.OAuth.Scopes,
				KeyRefreshInterval: cfg.OAuth.KeyRefreshInterval, AcceptUntypedTokens: cfg.OAuth.AcceptUntypedTokens,
				GroupsClaim: cfg.OAuth.GroupsClaim})
			h = transport.WithOAuth(v, h, logger, recorder)
			logger.Info("OAuth resource server", "issuer", cfg.OAuth.Issuer, "resource", cfg.OAuth.Resource, "metadata", v.MetadataURL())
		}
		h = transport.CheckOrigin(origin.New(cfg.HTTPAddr, cfg.AllowedOrigins...), h)
		h = tracing.HTTPHandler(h, "mcp-adapter")
		// Outermost: the OAuth refusals' audit entries name the client too.
		h = cfg.TrustedProxies.Handler(h)
		to := transport.ServerLimits{Read: cfg.HTTPReadTimeout, Idle: cfg.HTTPIdleTimeout, Conns: cfg.HTTPConns}
		if err := transport.ServeHTTP(ctx, cfg.HTTPAddr, h, to, logger); err != nil {
			logger.Error("http", "error", err.Error())
			return 1
		}
	default:
		key := cfg.APIKey
		if key == "" {
			logger.Warn("BMCIS_API_KEY is not set: every tool call will answer AUTH_REQUIRED")
		}
		opts.Key = func(context.Context) string { return key }
		opts.KeyHint = transport.StdioKeyHint
		logger.Info("serving MCP over stdio", "version", version.Version)
		if err := transport.ServeStdio(ctx, tools.New(opts), os.Stdin, os.Stdout, logger); err != nil {
			logger.Error("stdio", "error", err.Error())
			return 1
		}
	}
	return 0
}

// serveMetrics serves the adapter's metrics until the process ends.
func serveMetrics(addr string, reg *prometheus.Registry, logger *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("metrics", "addr", addr)
	if err := srv.ListenAndServe(); err != nil {
		logger.Error("metrics", "error", err.Error())
	}
}

// runBridge serves stdio and forwards to the remote endpoint (bridge mode).
func runBridge(cfg adapterconfig.Config, logger *slog.Logger) int {
	if cfg.APIKey == "" {
		logger.Warn("BMCIS_API_KEY is not set: every tool call will answer AUTH_REQUIRED")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := bridge.New(bridge.Options{
		URL: cfg.MCPURL, APIKey: cfg.APIKey, KeyHint: transport.StdioKeyHint, Timeout: cfg.MCPTimeout, Logger: logger,
	})
	defer b.Close()
	logger.Info("serving MCP over stdio, bridged to the remote endpoint", "version", version.Version, "url", cfg.MCPURL)
	if err := transport.ServeStdio(ctx, b.Server(), os.Stdin, os.Stdout, logger); err != nil {
		logger.Error("stdio", "error", err.Error())
		return 1
	}
	return 0
}
