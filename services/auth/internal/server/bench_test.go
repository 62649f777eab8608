package server_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
)

// BenchmarkCheck measures Check through a real gRPC server on loopback, one
// call at a time (latency, not throughput), with a verified key in the cache
// and limits high enough that every call is allowed. It reports P50/P90/P99
// in microseconds.
//
//	go test -run '^$' -bench BenchmarkCheck -benchtime 20000x ./internal/server/
func BenchmarkCheck(b *testing.B) {
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			cfg := authtest.Config()
			if backend == "redis" {
				cfg = authtest.WithRedis(b, cfg)
			}
			in := authtest.Start(b, cfg, authtest.NewDB(b), authtest.LogTo(io.Discard, "info"))
			full, _ := in.CreateKey(b, &authv1.CreateKeyRequest{Name: "bench",
				Limits: authtest.Limits("minute", 100_000_000, "hour", 100_000_000, "day", 100_000_000)})
			req := &authv1.CheckRequest{ApiKey: full, Operation: "bench"}
			ctx := context.Background()
			for range 200 { // warm up connection, cache, script
				_, err := in.Client.Check(ctx, req)
				require.NoError(b, err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				resp, err := in.Client.Check(ctx, req)
				lat = append(lat, time.Since(t0))
				if err != nil || !resp.GetAllowed() || resp.GetLimiterDegraded() {
					b.Fatalf("check: %v %v", err, resp)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			for _, p := range []int{50, 90, 99} {
				v := lat[(len(lat)-1)*p/100]
				b.ReportMetric(float64(v.Nanoseconds())/1e3, fmt.Sprintf("p%d-µs", p))
			}
		})
	}
}
