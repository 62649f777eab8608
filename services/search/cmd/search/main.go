// Command search runs the search gRPC service.
package main

import (
	"context"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

func main() {
	var db pg.Config
	var cfg server.Config
	grpcserver.Main(grpcserver.Spec{
		Name: "search",
		Defaults: grpcserver.Defaults{
			GRPCAddr:           ":50051",
			MetricsAddr:        ":9091",
			RequireCredentials: true,
		},
		Configure: func(env *config.Reader) {
			db = pg.LoadConfig(env)
			cfg = server.LoadConfig(env)
		},
		Options: []grpcserver.Option{grpcserver.WithClassifier(pg.ClassifyError)},
		Start: func(ctx context.Context, srv *grpcserver.Server) (func(), error) {
			pool, err := migrations.ConnectService(ctx, db, migrations.Search, srv.Logger())
			if err != nil {
				return nil, err
			}
			svc, err := server.Open(ctx, pool, cfg, srv.Logger(), srv.Registry())
			if err != nil {
				pool.Close()
				return nil, err
			}
			searchv1.RegisterSearchServiceServer(srv.GRPC(), svc)
			// Health name bmcis.database reports PostgreSQL; ends with ctx (SIGTERM).
			go srv.WatchDatabase(ctx, pool)
			runCtx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); svc.Run(runCtx) }()
			// WatchIndex streams never end by themselves: end them when
			// shutdown begins, or the graceful stop waits for them.
			go func() { <-ctx.Done(); svc.EndWatches() }()
			return func() {
				stop()
				<-done
				pool.Close()
			}, nil
		},
	})
}
