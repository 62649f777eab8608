package main

import (
	"context"
	"fmt"
	"io"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/bmcis/knowledge/platform/grpcclient"
)

func init() {
	commands["health"] = command{
		summary: "check gRPC health of services: health [-wait 30s] HOST:PORT...",
		run:     runHealth,
	}
}

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("health", stderr)
	wait := fs.Duration("wait", 0, "keep trying until every service is SERVING or this much time has passed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one HOST:PORT")
	}
	if *wait < 0 {
		return usageErrorf("-wait must be 0 (one try) or more, got %s", *wait)
	}
	deadline := time.Now().Add(*wait)
	for _, addr := range fs.Args() {
		for {
			st, err := checkHealth(ctx, addr)
			if err == nil && st == healthpb.HealthCheckResponse_SERVING {
				fmt.Fprintf(stdout, "%s SERVING\n", addr)
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					return fmt.Errorf("%s: %w", addr, err)
				}
				return fmt.Errorf("%s: %s", addr, st)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func checkHealth(ctx context.Context, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpcclient.Dial(addr, "")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}
