package limiter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
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

// blackhole is a TCP proxy to the test Redis that, while hang is set,
// accepts connections and never answers on them, the way a Redis behind a
// dropped route looks.
type blackhole struct {
	hang     atomic.Bool
	upstream string
	ln       net.Listener
}

func newBlackhole(t *testing.T, upstream string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &blackhole{upstream: upstream, ln: ln}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) { mu.Lock(); open = append(open, c); mu.Unlock() }
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			if b.hang.Load() {
				conns.Go(func() { _, _ = io.Copy(io.Discard, c) })
				continue
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			track(up)
			conns.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			conns.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	}()
	return b
}

// A Redis that hangs is counted even when every caller's deadline is far
// shorter than the Redis timeout: each call is answered by the failure mode
// before the caller's deadline, the guard degrades, and it recovers by
// itself once Redis answers again.
func TestGuardCountsAHangingBackendBeforeTheCallersDeadline(t *testing.T) {
	opts, err := redis.ParseURL(os.Getenv("BMCIS_TEST_REDIS_URL"))
	require.NoError(t, err, "BMCIS_TEST_REDIS_URL")
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("open=%v", failOpen), func(t *testing.T) {
			hole := newBlackhole(t, opts.Addr)
			hole.hang.Store(true)
			o := *opts
			o.Addr = hole.ln.Addr().String()
			// As the auth service configures it, with the longest Redis timeout.
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 10*time.Second, 10*time.Second, 10*time.Second
			o.MaxRetries, o.ContextTimeoutEnabled = -1, true
			client := redis.NewClient(&o)
			t.Cleanup(func() { _ = client.Close() })
			g, err := limiter.NewGuard(limiter.NewRedis(client, "guardtest:"+randomHex()+":"), limiter.GuardConfig{
				FailOpen: failOpen, Timeout: 10 * time.Second, RetryInterval: 100 * time.Millisecond,
				Log: slog.New(slog.DiscardHandler),
			})
			require.NoError(t, err)
			lim := limiter.Limits{100, 1000, 10000}

			for i := range 10 {
				// A 150 ms budget, above the guard's 50 ms floor, leaving the
				// answer 50 ms before the caller's deadline on a busy machine.
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				d, err := g.Allow(ctx, "k", lim)
				cancel()
				require.NoError(t, err, "call %d is answered before the caller's deadline", i)
				require.True(t, d.Degraded)
				require.Equal(t, failOpen, d.Allowed)
			}
			require.True(t, g.Degraded(), "a Redis that hangs counts as down")

			hole.hang.Store(false)
			require.Eventually(t, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				d, err := g.Allow(ctx, "k", lim)
				return err == nil && !d.Degraded && d.Allowed
			}, 5*time.Second, 20*time.Millisecond, "recovers by itself once Redis answers")
			require.False(t, g.Degraded())
		})
	}
}

// A call that spends its whole budget waiting for a free connection says
// nothing about Redis: it is ErrBusy, and the guard stays healthy.
func TestGuardWaitingForAConnectionIsBusyNotDown(t *testing.T) {
	opts, err := redis.ParseURL(os.Getenv("BMCIS_TEST_REDIS_URL"))
	require.NoError(t, err, "BMCIS_TEST_REDIS_URL")
	opts.PoolSize, opts.MaxRetries, opts.ContextTimeoutEnabled = 1, -1, true
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	held := client.Conn() // takes the only connection until closed
	require.NoError(t, held.Ping(context.Background()).Err())
	g, err := limiter.NewGuard(limiter.NewRedis(client, "guardtest:"+randomHex()+":"), limiter.GuardConfig{
		Timeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	lim := limiter.Limits{100, 1000, 10000}
	for range 5 {
		// A 75 ms budget, above the guard's floor: busy because of the pool.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := g.Allow(ctx, "k", lim)
		cancel()
		require.ErrorIs(t, err, limiter.ErrBusy)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.False(t, g.Degraded(), "local overload is not an unreachable Redis")

	require.NoError(t, held.Close())
	d, err := g.Allow(context.Background(), "k", lim)
	require.NoError(t, err)
	require.False(t, d.Degraded)
	require.True(t, d.Allowed)
}

// stalled answers nothing until the call's context ends.
type stalled struct{}

func (stalled) Allow(ctx context.Context, _ string, _ limiter.Limits) (limiter.Decision, error) {
	<-ctx.Done()
	return limiter.Decision{}, ctx.Err()
}

// A call that runs out of a budget below the guard's floor (a quarter of the
// Redis timeout, at most 50 ms) says nothing about the backend: it is
// ErrBusy and not counted. A longer budget, or a failure before the budget
// ends, counts.
func TestGuardShortBudgetTimeoutIsBusy(t *testing.T) {
	withDeadline := func(g *limiter.Guard, d time.Duration) (limiter.Decision, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return g.Allow(ctx, "k", limiter.Limits{1, 1, 1})
	}
	// Timeout 400 ms: the floor is 50 ms. The long call's budget is the
	// timeout, leaving its caller 3.6 s to be answered by the failure mode
	// however loaded the machine is.
	g, err := limiter.NewGuard(stalled{}, limiter.GuardConfig{Timeout: 400 * time.Millisecond, Threshold: 1, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	for range 3 {
		_, err := withDeadline(g, 40*time.Millisecond) // 30 ms budget
		require.ErrorIs(t, err, limiter.ErrBusy)
	}
	require.False(t, g.Degraded())
	d, err := withDeadline(g, 4*time.Second) // 400 ms budget
	require.NoError(t, err)
	require.True(t, d.Degraded, "a long enough budget counts the timeout")

	f := &flaky{}
	f.down.Store(true)
	g, err = limiter.NewGuard(f, limiter.GuardConfig{Timeout: time.Second, Threshold: 1, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	d, err = withDeadline(g, 40*time.Millisecond)
	require.NoError(t, err)
	require.True(t, d.Degraded, "a refused call counts whatever its budget")
}

// fullListener returns the address of a TCP listener whose accept queue is
// full and never drained: connects to it hang (the kernel drops their SYNs),
// as they do when Redis is partitioned away.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue (backlog 0 holds one connection on Linux), then check
	// that a further connect really hangs.
	for range 4 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			var netErr net.Error
			require.ErrorAs(t, err, &netErr)
			require.True(t, netErr.Timeout(), "connect to the full listener: %v", err)
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Fatal("connects to a listener with a full backlog do not hang")
	return ""
}

// When connects to Redis hang (go-redis then returns the caller's context
// error, or a dial timeout that matches context.DeadlineExceeded), the calls
// are Redis failures, not "busy": with or without a short caller deadline the
// guard degrades, the failure mode answers, and it recovers by itself once
// Redis is reachable again.
func TestGuardCountsHangingConnects(t *testing.T) {
	opts, err := redis.ParseURL(os.Getenv("BMCIS_TEST_REDIS_URL"))
	require.NoError(t, err, "BMCIS_TEST_REDIS_URL")
	hanging := fullListener(t)
	const redisTimeout = 200 * time.Millisecond
	for _, failOpen := range []bool{false, true} {
		// 200 ms: a 150 ms budget, cut from the Redis timeout by the caller.
		for _, deadline := range []time.Duration{0, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("open=%v/deadline=%v", failOpen, deadline), func(t *testing.T) {
				var target atomic.Value
				target.Store(hanging)
				o := *opts
				// As the auth service configures it (server.newLimiter).
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = redisTimeout, redisTimeout, redisTimeout
				o.MaxRetries, o.DialerRetries, o.PoolSize, o.ContextTimeoutEnabled = -1, 1, 64, true
				o.PoolTimeout = 2 * time.Second
				o.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, target.Load().(string))
				}
				client := redis.NewClient(&o)
				t.Cleanup(func() { _ = client.Close() })
				g, err := limiter.NewGuard(limiter.NewRedis(client, "guardtest:"+randomHex()+":"), limiter.GuardConfig{
					FailOpen: failOpen, Timeout: redisTimeout, RetryInterval: 100 * time.Millisecond,
					Log: slog.New(slog.DiscardHandler),
				})
				require.NoError(t, err)
				lim := limiter.Limits{100, 1000, 10000}
				allow := func() (limiter.Decision, error) {
					ctx := context.Background()
					if deadline > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, deadline)
						defer cancel()
					}
					return g.Allow(ctx, "k", lim)
				}

				for i := range 5 {
					d, err := allow()
					require.NoError(t, err, "call %d is answered by the failure mode, not busy", i)
					require.True(t, d.Degraded)
					require.Equal(t, failOpen, d.Allowed)
				}
				require.True(t, g.Degraded(), "hanging connects count as Redis down")

				target.Store(opts.Addr)
				require.Eventually(t, func() bool {
					d, err := allow()
					return err == nil && !d.Degraded && d.Allowed
				}, 5*time.Second, 20*time.Millisecond, "recovers by itself once Redis is reachable")
				require.False(t, g.Degraded())
			})
		}
	}
}

// With a real client on a Redis that hangs, a short-budget call is busy
// every time: the socket's read deadline is the budget's own instant, so
// its i/o timeout can come back before the context's timer has fired.
func TestGuardShortBudgetOnAHangingRedisIsBusy(t *testing.T) {
	opts, err := redis.ParseURL(os.Getenv("BMCIS_TEST_REDIS_URL"))
	require.NoError(t, err, "BMCIS_TEST_REDIS_URL")
	hole := newBlackhole(t, opts.Addr)
	hole.hang.Store(true)
	o := *opts
	o.Addr = hole.ln.Addr().String()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
	o.MaxRetries, o.ContextTimeoutEnabled = -1, true
	client := redis.NewClient(&o)
	t.Cleanup(func() { _ = client.Close() })
	g, err := limiter.NewGuard(limiter.NewRedis(client, "guardtest:"+randomHex()+":"), limiter.GuardConfig{
		Timeout: time.Second, Threshold: 1, Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond) // a 15 ms budget
		_, err := g.Allow(ctx, "k", limiter.Limits{100, 1000, 10000})
		cancel()
		require.ErrorIs(t, err, limiter.ErrBusy, "call %d", i)
	}
	require.False(t, g.Degraded(), "short budgets say nothing about Redis")
}

// A caller that leaves before its call's budget runs out says nothing
// about the backend: its error comes back and nothing is counted. One
// whose budget ran out is counted, and answered with the failure mode,
// even when its own deadline has passed by the time the guard looks.
func TestGuardCallerThatLeftEarlyIsNotCounted(t *testing.T) {
	g, err := limiter.NewGuard(stalled{}, limiter.GuardConfig{
		Timeout: 10 * time.Second, Threshold: 1, Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	lim := limiter.Limits{100, 1000, 10000}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = g.Allow(ctx, "k", lim)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, g.Degraded(), "the caller left; the backend was not judged")

	// The budget is 75% of the caller's 200 ms. The backend uses all of it
	// and returns 100 ms late, as a descheduled goroutine on a loaded
	// machine does: the caller's deadline has passed by then, and the
	// failure still counts.
	g, err = limiter.NewGuard(late{}, limiter.GuardConfig{
		Timeout: 10 * time.Second, Threshold: 1, Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	d, err := g.Allow(ctx, "k", lim)
	require.NoError(t, err)
	require.True(t, d.Degraded)
	require.True(t, g.Degraded())
}

// late answers 100 ms after the call's context ends.
type late struct{}

func (late) Allow(ctx context.Context, _ string, _ limiter.Limits) (limiter.Decision, error) {
	<-ctx.Done()
	time.Sleep(100 * time.Millisecond)
	return limiter.Decision{}, ctx.Err()
}
