// Package authtest starts real auth gRPC servers for tests: built with
// grpcserver.New so the whole interceptor chain runs, on a loopback port,
// over a per-test PostgreSQL database, with the in-memory or a real Redis
// limiter. It also runs private redis-server processes for tests that kill
// Redis, and offers a controllable clock.
package authtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

// Credentials of test servers: the read role (the gateway's), the adapter
// role (the MCP adapter's: may present OAuth subjects) and the admin role
// (key management).
const (
	ServiceToken = "test-read-credential-0123456789abcdef"
	AdapterToken = "test-adapter-credential-0123456789abcdef"
	AdminToken   = "test-admin-credential-0123456789abcdef"
)

// EnvRedisURL names the variable with the shared test Redis (`make test`
// sets it).
const EnvRedisURL = "BMCIS_TEST_REDIS_URL"

// RedisURL returns the shared test Redis or fails the test with the fix.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvRedisURL)
	if u == "" {
		t.Fatalf("%s is not set: run `make test`, or start Redis with `deploy/local/redis.sh start` "+
			"and export %s=$(deploy/local/redis.sh url)", EnvRedisURL, EnvRedisURL)
	}
	return u
}

// Config returns a service configuration for tests: default limits,
// in-memory limiter, fast last-use flushes.
func Config() server.Config {
	return server.Config{
		Defaults:       limiter.Defaults(),
		RedisPrefix:    "bmcis:test:",
		RedisTimeout:   time.Second,
		FailOpen:       true,
		RedisRetry:     100 * time.Millisecond,
		CacheTTL:       30 * time.Second,
		CacheSize:      1_000,
		StaleKeyMaxAge: 10 * time.Minute,
		LastUsedFlush:  50 * time.Millisecond,
		KeyLifetime:    server.DefaultKeyLifetime,
		LeaseMax:       server.DefaultLeaseMax,
	}
}

// WithRedis points cfg at the shared test Redis under a prefix of its own,
// whose keys are deleted when the test ends.
func WithRedis(t testing.TB, cfg server.Config) server.Config {
	t.Helper()
	cfg.RedisURL = RedisURL(t)
	cfg.RedisPrefix = "bmcis:test:" + randomHex(6) + ":"
	opts, err := redis.ParseURL(cfg.RedisURL)
	require.NoError(t, err)
	prefix := cfg.RedisPrefix
	t.Cleanup(func() {
		c := redis.NewClient(opts)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return cfg
}

// Instance is one running auth server and a client connected to it.
type Instance struct {
	Addr     string
	Client   authv1.AuthServiceClient
	Conn     *grpc.ClientConn
	Logs     *Buffer
	Registry prometheus.Gatherer
	stop     func()
}

// Stop drains the server and runs the service's cleanup (final last-use
// flush); the test's end does it too.
func (in *Instance) Stop() { in.stop() }

// NewDB returns a fresh migrated database for the test.
func NewDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := testdb.New(t)
	return pool
}

// Option adjusts a test server.
type Option func(*options)

type options struct {
	logLevel string
	logOut   io.Writer
}

// LogTo sends the server's logs to w at level instead of to Instance.Logs at
// debug level (benchmarks log like production, to io.Discard).
func LogTo(w io.Writer, level string) Option {
	return func(o *options) { o.logOut, o.logLevel = w, level }
}

// Start runs an auth server with cfg over pool until the test ends.
func Start(t testing.TB, cfg server.Config, pool *pgxpool.Pool, opts ...Option) *Instance {
	t.Helper()
	logs := &Buffer{}
	o := options{logLevel: "debug", logOut: logs}
	for _, opt := range opts {
		opt(&o)
	}
	srv := grpcserver.New(grpcserver.Settings{
		Name:     "auth",
		LogLevel: o.logLevel,
		Credentials: rpcauth.Credentials{
			rpcauth.Read:    rpcauth.DigestOf(ServiceToken),
			rpcauth.Adapter: rpcauth.DigestOf(AdapterToken),
			rpcauth.Admin:   rpcauth.DigestOf(AdminToken),
		},
		ShutdownTimeout: 5 * time.Second,
	}, grpcserver.WithLogOutput(o.logOut), grpcserver.WithClassifier(pg.ClassifyError))
	ctx, cancel := context.WithCancel(context.Background())
	cleanup, err := server.Start(ctx, cfg, pool, srv)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	conn, err := grpcclient.Dial(lis.Addr().String(), ServiceToken)
	require.NoError(t, err)
	stop := sync.OnceFunc(func() {
		_ = conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("server did not stop")
		}
		cleanup()
	})
	t.Cleanup(stop)
	reg, _ := srv.Registry().(prometheus.Gatherer)
	return &Instance{Addr: lis.Addr().String(), Client: authv1.NewAuthServiceClient(conn), Conn: conn,
		Logs: logs, Registry: reg, stop: stop}
}

// Limits builds per-tier limits for a request: Limits("minute", 5, "day", 50).
func Limits(kv ...any) *authv1.RateLimits {
	out := &authv1.RateLimits{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Tiers = append(out.Tiers, &authv1.TierLimit{Tier: kv[i].(string), Value: int64(kv[i+1].(int))})
	}
	return out
}

// Tier returns one tier's value of l (0 when absent).
func Tier(l *authv1.RateLimits, name string) int64 {
	for _, t := range l.GetTiers() {
		if t.GetTier() == name {
			return t.GetValue()
		}
	}
	return 0
}

// Admin returns a context whose calls carry the admin credential.
func Admin(ctx context.Context) context.Context { return grpcclient.WithCredential(ctx, AdminToken) }

// Adapter returns ctx carrying the adapter's credential (OAuth subjects).
func Adapter(ctx context.Context) context.Context {
	return grpcclient.WithCredential(ctx, AdapterToken)
}

// CreateKey creates a key through the admin RPC and returns the full key and
// its description.
func (in *Instance) CreateKey(t testing.TB, req *authv1.CreateKeyRequest) (string, *authv1.ApiKey) {
	t.Helper()
	resp, err := in.Client.CreateKey(Admin(context.Background()), req)
	require.NoError(t, err)
	return resp.GetApiKey(), resp.GetKey()
}

// Check calls Check with key.
func (in *Instance) Check(t testing.TB, key string) *authv1.CheckResponse {
	t.Helper()
	resp, err := in.Client.Check(context.Background(), &authv1.CheckRequest{ApiKey: key, Operation: "test"})
	require.NoError(t, err)
	return resp
}

// Metric returns the value of a gauge or counter (summed over label values
// matching labels).
func (in *Instance) Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := in.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			switch {
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Buffer collects log output safely from many goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Contains reports whether the logs contain s.
func (b *Buffer) Contains(s string) bool { return strings.Contains(b.String(), s) }

// Clock is a controllable clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock frozen at a fixed, realistic instant (the
// microsecond values the limiter stores must look like real timestamps).
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
