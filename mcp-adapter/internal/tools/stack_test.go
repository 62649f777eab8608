package tools_test

// The real stack: the search, vendorgraph and auth binaries built from this
// repository (platform/stacktest) on a fresh migrated PostgreSQL, with the
// the demo documents ingested and the demo vendor graph imported, plus one
// synthetic vendor bigger than the full mode's caps. One stack serves the
// whole package; tests that stop or break a service start processes of
// their own.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/deadaddr"
	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	adapterconfig "github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/mcp-adapter/internal/indexwatch"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// BigVendor is a synthetic vendor imported next to the demo graph, with more
// entities and relationships than full mode lists (100 and 500).
const (
	BigVendor        = "Megacorp Holdings"
	bigEntities      = 130
	bigRelationships = 620
)

// demoStack is the package's shared stack with the demo data.
func demoStack(t testing.TB) *stacktest.Stack {
	t.Helper()
	return stacktest.Shared(t, "demo", stacktest.Options{}, func(t testing.TB, s *stacktest.Stack) {
		s.IngestDemoDocs(t)
		s.ImportDemoGraph(t)
		s.ImportGraphLines(t, bigVendorGraph())
	})
}

// bigVendorGraph is BigVendor's neighbourhood: products linked to the vendor
// and to each other (distinct pairs), so it has more relationships than
// full mode lists.
func bigVendorGraph() []string {
	lines := []string{`{"kind":"entity","id":"megacorp","name":"Megacorp Holdings","entity_type":"COMPANY","confidence":0.99,"is_vendor":true,"snippet":"Synthetic conglomerate with a very large product graph.","aliases":["Megacorp"]}`}
	for i := 1; i < bigEntities; i++ {
		lines = append(lines, fmt.Sprintf(`{"kind":"entity","id":"mega-p%d","name":"Megacorp Product %d","entity_type":"PRODUCT","confidence":%.2f,"snippet":"Product line %d of Megacorp."}`, i, i, 0.5+float64(i%50)/100, i))
		lines = append(lines, fmt.Sprintf(`{"kind":"relationship","id":"mega-r%d","source_id":"megacorp","target_id":"mega-p%d","relationship_type":"PRODUCES","confidence":0.9,"metadata":{"line":%d}}`, i, i, i))
	}
	// Edges between two neighbours belong to the neighbourhood too.
	n := bigEntities - 1
	for k := 1; len(lines) < bigEntities+bigRelationships; k++ {
		for i := 1; i <= n && len(lines) < bigEntities+bigRelationships; i++ {
			j := 1 + (i-1+k)%n
			lines = append(lines, fmt.Sprintf(`{"kind":"relationship","id":"mega-x%d-%d","source_id":"mega-p%d","target_id":"mega-p%d","relationship_type":"COMPATIBLE_WITH","confidence":0.7,"metadata":{"k":%d}}`, k, i, i, j, k))
		}
	}
	return lines
}

var realKeys struct {
	sync.Mutex
	main string
}

// mainKey is an API key with limits no test reaches.
func mainKey(t testing.TB) string {
	t.Helper()
	s := demoStack(t)
	realKeys.Lock()
	defer realKeys.Unlock()
	if realKeys.main == "" {
		realKeys.main = s.CreateKey(t, stacktest.Key{Name: "mcp-tests", Owner: "mcp-tests", PerMinute: 1_000_000, PerHour: 10_000_000, PerDay: 100_000_000})
	}
	return realKeys.main
}

// realOpts changes how a real harness reaches the services.
type realOpts struct {
	addrs backend.Addrs
	token string
	env   map[string]string // adapter configuration (MAX_TOKENS_PER_RESPONSE, ...)
}

type realOpt func(*realOpts)

func withAddr(service, addr string) realOpt {
	return func(o *realOpts) {
		switch service {
		case stacktest.Search:
			o.addrs.Search = addr
		case stacktest.VendorGraph:
			o.addrs.VendorGraph = addr
		case stacktest.Auth:
			o.addrs.Auth = addr
		}
	}
}

func withServiceToken(tok string) realOpt { return func(o *realOpts) { o.token = tok } }

// withConfig sets adapter environment variables, read by the adapter's own
// configuration loader.
func withConfig(kv ...string) realOpt {
	return func(o *realOpts) {
		for i := 0; i+1 < len(kv); i += 2 {
			o.env[kv[i]] = kv[i+1]
		}
	}
}

// newReal drives the tools, configured as the binary configures them, over
// gRPC to the real services of the demo stack, with the main key.
func newReal(t testing.TB, ro ...realOpt) *harness {
	return newRealWithClient(t, nil, ro, nil)
}

func newRealWithClient(t testing.TB, clientOpts []client.ClientOption, ro []realOpt, opts []harnessOpt) *harness {
	t.Helper()
	s := demoStack(t)
	key := mainKey(t)
	r := realOpts{
		addrs: backend.Addrs{Search: s.Addr(stacktest.Search), VendorGraph: s.Addr(stacktest.VendorGraph), Auth: s.Addr(stacktest.Auth)},
		token: stacktest.ServiceToken,
		env:   map[string]string{},
	}
	for _, f := range ro {
		f(&r)
	}
	vars := map[string]string{
		adapterconfig.EnvServiceToken: r.token,
		adapterconfig.EnvCursorSecret: "test-cursor-secret-0123456789abcdef0123456789",
		// The stack's credentials are published ones (platform/stacktest).
		config.EnvAllowInsecureSecrets: "true",
	}
	// The answer cache's TTL may be set for a whole run (0 runs every
	// test without the cache, as before it existed).
	if v, ok := os.LookupEnv(adapterconfig.EnvAnswerCacheTTL); ok {
		vars[adapterconfig.EnvAnswerCacheTTL] = v
	}
	for k, v := range r.env {
		vars[k] = v
	}
	env := config.FromMap(vars)
	cfg := adapterconfig.Load(env)
	require.NoError(t, env.Err())
	clients, err := backend.Dial(r.addrs, cfg.ServiceToken, backend.Timeouts{
		Search: cfg.SearchTimeout, VendorGraph: cfg.VendorGraphTimeout, Auth: cfg.AuthTimeout,
	})
	require.NoError(t, err)
	t.Cleanup(clients.Close)
	o := tools.Options{
		Clients:             clients,
		Key:                 func(context.Context) string { return key },
		KeyHint:             "Set BMCIS_API_KEY.",
		Thresholds:          cfg.Thresholds,
		DefaultResponseMode: cfg.DefaultResponseMode,
		DefaultFormat:       cfg.DefaultFormat,
		Desktop:             cfg.Desktop,
		Signals:             cfg.Signals,
		// As main builds it: leases are asked for only with the adapter's
		// credential (withServiceToken(stacktest.AdapterToken)).
		AllowCache: allowcache.New(cfg.AllowCacheTTL, allowcache.DefaultMaxEntries).
			WithLeases(cfg.KeyLease, clients.ReleaseLease),
		Answers: tools.NewAnswerCache(cfg.AnswerCacheTTL, int64(cfg.AnswerCacheBytes), nil),
	}
	// As main: the index watcher runs whenever the answer cache is on (a
	// test's own options may turn it on: so after them), and stops before
	// the connections close (cleanups run last first). It is refused
	// unless the harness holds the adapter's credential
	// (withServiceToken(stacktest.AdapterToken)): then the cache is
	// bypassed, as the binary's would be.
	var index tools.IndexEpoch
	opts = append(slices.Clone(opts), func(o *tools.Options) {
		if o.Answers != nil && o.Index == nil {
			w, stopWatch := indexwatch.Start(o.Clients.Search, nil)
			t.Cleanup(stopWatch)
			o.Index = w
		}
		index = o.Index
	})
	t.Cleanup(o.AllowCache.Close) // before clients.Close: cleanups run last first
	h := startHarness(t, o, clientOpts, opts...)
	h.stack = s
	h.key = key
	h.clients = clients
	h.index = index
	return h
}

// deadAddr is a loopback address that refuses connections (platform/deadaddr).
func deadAddr(t testing.TB) string { return deadaddr.Loopback(t) }

var degradedAuth struct {
	sync.Once
	addr string
}

// degradedAuthAddr is a second auth process on the demo stack's database
// whose Redis is a dead port, with RATE_LIMIT_ON_REDIS_FAILURE=open: it
// allows calls and reports its limiter degraded.
func degradedAuthAddr(t testing.TB) string {
	t.Helper()
	s := demoStack(t)
	degradedAuth.Do(func() {
		// The process outlives this test, so its dead Redis port stays held
		// until the test process ends.
		redisAddr, _, err := deadaddr.Hold()
		require.NoError(t, err)
		svc := s.StartService(t, stacktest.Auth, map[string]string{
			"REDIS_URL":                      "redis://" + redisAddr + "/0",
			"RATE_LIMIT_ON_REDIS_FAILURE":    "open",
			"BMCIS_RATE_LIMIT_REDIS_TIMEOUT": "100ms",
		})
		degradedAuth.addr = svc.Addr()
	})
	require.NotEmpty(t, degradedAuth.addr, "the degraded auth did not start")
	return degradedAuth.addr
}

// waitFor polls f until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, f func() bool, msg string) {
	t.Helper()
	require.Eventually(t, f, d, 50*time.Millisecond, msg)
}
