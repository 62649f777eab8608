package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/services/auth/internal/audit"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

// Start builds the service from cfg on pool and registers it on srv. The
// returned cleanup, run after the server has drained, writes the last
// last-use times and closes Redis.
func Start(ctx context.Context, cfg Config, pool *pgxpool.Pool, srv *grpcserver.Server) (cleanup func(), err error) {
	log := srv.Logger()
	if cfg.LastUsedFlush <= 0 {
		cfg.LastUsedFlush = 15 * time.Second
	}
	if cfg.RedisTimeout <= 0 {
		cfg.RedisTimeout = time.Second
	}
	store := keys.NewStore(pool)
	verifier, err := keys.NewVerifier(store, keys.VerifierConfig{
		CacheTTL: cfg.CacheTTL, CacheSize: cfg.CacheSize, Clock: cfg.Clock, Registerer: srv.Registry(),
		StaleFor: cfg.StaleKeyMaxAge,
	})
	if err != nil {
		return nil, err
	}
	lim, closeLimiter, err := newLimiter(cfg, srv)
	if err != nil {
		return nil, err
	}
	usage := keys.NewUsageRecorder(store, log)
	auditStore := audit.NewStore(pool)
	s, err := New(Deps{
		Verifier:    verifier,
		Manager:     keys.NewManager(store, cfg.Clock, verifier.Forget),
		Usage:       usage,
		Limiter:     lim,
		Defaults:    cfg.Defaults,
		KeyLifetime: cfg.KeyLifetime,
		LeaseMax:    cfg.LeaseMax,
		Clock:       cfg.Clock,
		Registerer:  srv.Registry(),

		OAuthIssuers:          cfg.OAuthIssuers,
		OAuthGroupMap:         cfg.OAuthGroupMap,
		FailedChecksPerClient: cfg.FailedChecksPerClient,
		FailedChecksWindow:    cfg.FailedChecksWindow,
		Audit:                 auditStore,
	})
	if err != nil {
		closeLimiter()
		return nil, err
	}
	authv1.RegisterAuthServiceServer(srv.GRPC(), s)

	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { usage.Run(flushCtx, cfg.LastUsedFlush) })
	wg.Go(func() { auditStore.RunRetention(flushCtx, cfg.AuditRetention, auditPruneInterval, log) })
	if _, ok := srv.Credentials()[rpcauth.Admin]; !ok {
		log.Warn("no admin credential is configured (BMCIS_ADMIN_TOKEN_SHA256): key administration is refused to every caller")
	}
	return func() {
		stopFlush()
		wg.Wait()
		closeLimiter()
	}, nil
}

// auditPruneInterval is how often the audit trail is pruned: retention is
// counted in days, so an hour late is nothing.
const auditPruneInterval = time.Hour

// newLimiter returns the in-memory limiter, or the Redis one behind the
// failure-mode guard when REDIS_URL is set.
func newLimiter(cfg Config, srv *grpcserver.Server) (limiter.Limiter, func(), error) {
	log := srv.Logger()
	if cfg.RedisURL == "" {
		log.Info("rate limiter: in memory (counts are per replica; set REDIS_URL to share them)")
		return limiter.NewMemory(cfg.Clock), func() {}, nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("REDIS_URL: not a valid redis URL")
	}
	// Short network timeouts and no retries: a retried script whose first
	// reply was lost would charge a call twice, and a dead Redis must turn
	// into the failure mode quickly rather than into slow checks. The wait for
	// a free connection is separate (PoolTimeout) and not a Redis failure: a
	// burst queues instead of tripping the failure mode.
	opts.DialTimeout = cfg.RedisTimeout
	opts.ReadTimeout = cfg.RedisTimeout
	opts.WriteTimeout = cfg.RedisTimeout
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.PoolSize = max(opts.PoolSize, 64)
	opts.PoolTimeout = max(opts.PoolTimeout, 2*time.Second)
	if cfg.RedisPoolWait > 0 {
		opts.PoolTimeout = cfg.RedisPoolWait
	}
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	// Spans for the limiter's commands (platform/tracing): the command name
	// only, never its keys or arguments, and no per-command stack walk.
	if err := redisotel.InstrumentTracing(client, redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("trace Redis calls: %w", err)
	}
	var ropts []limiter.RedisOption
	if cfg.RedisTestClock != nil {
		ropts = append(ropts, limiter.WithTestClock(cfg.RedisTestClock))
	}
	mode := "closed"
	if cfg.FailOpen {
		mode = "open"
	}
	g, err := limiter.NewGuard(limiter.NewRedis(client, cfg.RedisPrefix, ropts...), limiter.GuardConfig{
		FailOpen: cfg.FailOpen, Timeout: cfg.RedisTimeout, RetryInterval: cfg.RedisRetry, Log: log, Registerer: srv.Registry(),
	})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	log.Info("rate limiter: Redis", "addr", opts.Addr, "db", opts.DB, "on_failure", mode)
	pingCtx, cancel := context.WithTimeout(context.Background(), cfg.RedisTimeout)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		// Not fatal: the guard applies the failure mode until Redis answers.
		log.Warn("Redis does not answer yet; the failure mode applies until it does", "error", err.Error())
	}
	return g, func() { _ = client.Close() }, nil
}

// RouteRedisLogs sends the Redis client's own log lines (reconnect noise) to
// log at debug level instead of stderr. It is process-wide.
func RouteRedisLogs(log *slog.Logger) { redis.SetLogger(redisLog{log}) }

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client", "message", fmt.Sprintf(format, v...))
}
