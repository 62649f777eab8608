package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/bmcis/knowledge/platform/grpcclient"
)

func init() {
	commands["health"] = command{
		summary: "check gRPC health of services: health [-wait 30s] [-o FORMAT] HOST:PORT...",
		run:     runHealth,
	}
}

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("health", stderr)
	wait := fs.Duration("wait", 0, "keep trying until every service is SERVING or this much time has passed")
	output := outputFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("give at least one HOST:PORT")
	}
	if *wait < 0 {
		return usageErrorf("-wait must be 0 (one try) or more, got %s", *wait)
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	// One result per address, written as it is known (json: one object
	// per line; yaml: one list at the end).
	var list []any
	put := func(r healthResult) {
		if *output == outputYAML {
			list = append(list, r)
			return
		}
		_ = writeResult(stdout, *output, r, func(w io.Writer) error {
			if r.Status != healthpb.HealthCheckResponse_SERVING.String() {
				return nil // the error names it
			}
			_, err := fmt.Fprintf(w, "%s SERVING\n", r.Address)
			return err
		})
	}
	defer func() {
		if *output == outputYAML {
			_ = writeResultList(stdout, *output, list, nil)
		}
	}()
	deadline := time.Now().Add(*wait)
	for _, addr := range fs.Args() {
		for {
			st, err := checkHealth(ctx, addr)
			if err == nil && st == healthpb.HealthCheckResponse_SERVING {
				put(healthResult{Address: addr, Status: st.String()})
				break
			}
			// A wrong address stays wrong: no waiting for it.
			permanent := errors.Is(err, grpcclient.ErrBadAddress) || grpcclient.NotGRPC(err)
			if time.Now().After(deadline) || permanent {
				if err != nil {
					msg := err.Error()
					if grpcclient.NotGRPC(err) {
						msg = notGRPCMessage(err)
					}
					put(healthResult{Address: addr, Status: "UNREACHABLE", Error: msg})
					return fmt.Errorf("%s: %w", addr, err)
				}
				put(healthResult{Address: addr, Status: st.String()})
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

// healthResult is one service's health, as -o json|yaml shows it.
type healthResult struct {
	Address string `json:"address"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
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
