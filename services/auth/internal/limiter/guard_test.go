package limiter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

// flaky fails while down is set and counts calls.
type flaky struct {
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flaky) Allow(ctx context.Context, _ string, _ limiter.Limits) (limiter.Decision, error) {
	f.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return limiter.Decision{}, err
	}
	if f.down.Load() {
		return limiter.Decision{}, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	return limiter.Decision{Allowed: true, Remaining: limiter.Limits{1, 1, 1}}, nil
}

func TestGuard(t *testing.T) {
	lim := limiter.Limits{1, 1, 1}
	for _, failOpen := range []bool{true, false} {
		name := "closed"
		if failOpen {
			name = "open"
		}
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			backend := &flaky{}
			reg := prometheus.NewRegistry()
			var logs bytes.Buffer
			g, err := limiter.NewGuard(backend, limiter.GuardConfig{
				FailOpen: failOpen, RetryInterval: time.Second, Clock: clk.Now,
				Log: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: reg,
			})
			require.NoError(t, err)
			ctx := context.Background()

			d, err := g.Allow(ctx, "k", lim)
			require.NoError(t, err)
			require.False(t, d.Degraded)

			backend.down.Store(true)
			for range 10 {
				d, err = g.Allow(ctx, "k", lim)
				require.NoError(t, err)
				require.True(t, d.Degraded)
				require.Equal(t, failOpen, d.Allowed)
			}
			require.Equal(t, int64(4), backend.calls.Load(), "three failures in a row, then the backend is bypassed")
			require.True(t, g.Degraded())
			require.Equal(t, float64(1), gauge(t, reg, "bmcis_auth_limiter_degraded"))
			require.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("rate limiter degraded")), "logged once, not per call")

			clk.Advance(time.Second) // a probe is due: one call tries, fails
			_, _ = g.Allow(ctx, "k", lim)
			_, _ = g.Allow(ctx, "k", lim)
			require.Equal(t, int64(5), backend.calls.Load())

			backend.down.Store(false)
			clk.Advance(time.Second)
			d, err = g.Allow(ctx, "k", lim)
			require.NoError(t, err)
			require.False(t, d.Degraded)
			require.False(t, g.Degraded())
			require.Equal(t, float64(0), gauge(t, reg, "bmcis_auth_limiter_degraded"))
			require.Contains(t, logs.String(), "rate limiter recovered")

			// A caller that gave up is not a backend failure.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err = g.Allow(cctx, "k", lim)
			require.ErrorIs(t, err, context.Canceled)
			require.False(t, g.Degraded())
		})
	}
}

func TestGuardToleratesIsolatedFailures(t *testing.T) {
	backend := &flaky{}
	g, err := limiter.NewGuard(backend, limiter.GuardConfig{Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	lim := limiter.Limits{1, 1, 1}
	for range 5 {
		backend.down.Store(true)
		for range 2 {
			d, err := g.Allow(context.Background(), "k", lim)
			require.NoError(t, err)
			require.True(t, d.Degraded, "the failed call itself is answered by the failure mode")
		}
		backend.down.Store(false)
		d, err := g.Allow(context.Background(), "k", lim)
		require.NoError(t, err)
		require.False(t, d.Degraded)
		require.False(t, g.Degraded(), "two failures between successes never bypass the backend")
	}
}

// busy is a backend with no free connection.
type busy struct{}

func (busy) Allow(context.Context, string, limiter.Limits) (limiter.Decision, error) {
	return limiter.Decision{}, fmt.Errorf("%w: redis: connection pool timeout", limiter.ErrBusy)
}

func TestGuardPassesBusyOn(t *testing.T) {
	g, err := limiter.NewGuard(busy{}, limiter.GuardConfig{Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	for range 5 {
		_, err := g.Allow(context.Background(), "k", limiter.Limits{1, 1, 1})
		require.ErrorIs(t, err, limiter.ErrBusy)
	}
	require.False(t, g.Degraded(), "local overload is not an unreachable backend")
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
