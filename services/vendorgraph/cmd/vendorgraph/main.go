// Command vendorgraph runs the vendorgraph gRPC service.
package main

import (
	"context"
	"fmt"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

func main() {
	var db pg.Config
	grpcserver.Main(grpcserver.Spec{
		Name: "vendorgraph",
		Defaults: grpcserver.Defaults{
			GRPCAddr:            ":50052",
			MetricsAddr:         ":9092",
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
			vendorgraphv1.RegisterVendorGraphServiceServer(srv.GRPC(), server.New(pool))
			return pool.Close, nil
		},
	})
}
