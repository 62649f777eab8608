// Command search runs the search gRPC service.
package main

import (
	"context"
	"fmt"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/search/internal/server"
)

func main() {
	var db pg.Config
	grpcserver.Main(grpcserver.Spec{
		Name: "search",
		Defaults: grpcserver.Defaults{
			GRPCAddr:            ":50051",
			MetricsAddr:         ":9091",
			RequireServiceToken: true,
		},
		Configure: func(env *config.Reader) { db = pg.LoadConfig(env) },
		Options:   []grpcserver.Option{grpcserver.WithClassifier(pg.ClassifyError)},
		Start: func(ctx context.Context, srv *grpcserver.Server) (func(), error) {
			pool, err := pg.Connect(ctx, db)
			if err != nil {
				return nil, err
			}
			if err := migrations.RequireCurrent(ctx, pool); err != nil {
				pool.Close()
				return nil, fmt.Errorf("check schema: %w", err)
			}
			searchv1.RegisterSearchServiceServer(srv.GRPC(), server.New(pool))
			return pool.Close, nil
		},
	})
}
