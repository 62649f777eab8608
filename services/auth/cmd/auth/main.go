// Command auth runs the auth gRPC service: API key verification and per-key
// rate limits, in memory or shared through Redis.
package main

import (
	"context"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

func main() {
	var (
		db  pg.Config
		cfg server.Config
	)
	grpcserver.Main(grpcserver.Spec{
		Name: "auth",
		Defaults: grpcserver.Defaults{
			GRPCAddr:    ":50053",
			MetricsAddr: ":9093",
			// Check is an oracle for key validity and spends a tenant's quota;
			// only the adapter and the gateway call it, and they hold the
			// service token, so auth is fenced like search and vendorgraph.
			RequireCredentials: true,
		},
		Configure: func(env *config.Reader) {
			db = pg.LoadConfig(env)
			cfg = server.LoadConfig(env)
		},
		Options: []grpcserver.Option{grpcserver.WithClassifier(pg.ClassifyError)},
		Start: func(ctx context.Context, srv *grpcserver.Server) (func(), error) {
			server.RouteRedisLogs(srv.Logger())
			pool, err := migrations.ConnectService(ctx, db, migrations.Auth, srv.Logger())
			if err != nil {
				return nil, err
			}
			stop, err := server.Start(ctx, cfg, pool, srv)
			if err != nil {
				pool.Close()
				return nil, err
			}
			// Health name bmcis.database reports PostgreSQL; ends with ctx (SIGTERM).
			go srv.WatchDatabase(ctx, pool)
			return func() {
				stop()
				pool.Close()
			}, nil
		},
	})
}
