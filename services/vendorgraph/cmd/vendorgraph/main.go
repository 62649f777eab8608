// Command vendorgraph runs the vendorgraph gRPC service.
package main

import (
	"context"
	"fmt"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

func main() {
	var db pg.Config
	var cfg server.Config
	grpcserver.Main(grpcserver.Spec{
		Name: "vendorgraph",
		Defaults: grpcserver.Defaults{
			GRPCAddr:           ":50052",
			MetricsAddr:        ":9092",
			RequireCredentials: true,
		},
		Configure: func(env *config.Reader) {
			db = pg.LoadConfig(env)
			cfg = server.LoadConfig(env)
		},
		Options: []grpcserver.Option{grpcserver.WithClassifier(pg.ClassifyError)},
		Start: func(ctx context.Context, srv *grpcserver.Server) (func(), error) {
			pool, err := migrations.ConnectService(ctx, db, migrations.VendorGraph, srv.Logger())
			if err != nil {
				return nil, err
			}
			// Dialled lazily: search may start after vendorgraph; an import
			// while it is down is refused and rolled back.
			conn, err := grpcclient.Dial(cfg.SearchAddr, cfg.SearchToken)
			if err != nil {
				pool.Close()
				return nil, fmt.Errorf("search client: %w", err)
			}
			svc := server.New(pool, cfg, searchv1.NewSearchServiceClient(conn))
			// Ends with ctx (SIGTERM), before the pool is closed.
			go svc.WatchChanges(ctx, srv.Logger())
			vendorgraphv1.RegisterVendorGraphServiceServer(srv.GRPC(), svc)
			// Health name bmcis.database reports PostgreSQL; ends with ctx (SIGTERM).
			go srv.WatchDatabase(ctx, pool)
			srv.Logger().Info("vendorgraph configured", "cache_size", cfg.CacheSize,
				"cache_ttl", cfg.CacheTTL.String(), "match_threshold", cfg.MatchThreshold,
				"import_max_lines", cfg.MaxImportLines, "search_addr", cfg.SearchAddr)
			return func() { _ = conn.Close(); pool.Close() }, nil
		},
	})
}
