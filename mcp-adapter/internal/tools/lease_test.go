package tools_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	adapterconfig "github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// allowedChecks reads bmcis_auth_checks_total{result="allowed"} from an
// auth process's metrics.
func allowedChecks(t *testing.T, authSvc *stacktest.Service) float64 {
	t.Helper()
	resp, err := http.Get(authSvc.MetricsURL())
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, `bmcis_auth_checks_total{result="allowed"}`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			return v
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// leaseHarness is the tools against the demo stack's search and
// vendorgraph and an auth process of their own (no key cache: a revocation
// applies at its next check), with the adapter's credential, so auth
// grants the leases the adapter asks for. The answer cache is off: with it
// the leased calls would replay the first, checked call's answer, and
// comparing them would prove nothing about the leased calls' own reads.
func leaseHarness(t *testing.T, key, lease string) (*harness, *allowcache.Cache, *stacktest.Service) {
	t.Helper()
	s := demoStack(t)
	authSvc := s.StartService(t, stacktest.Auth, map[string]string{"BMCIS_AUTH_KEY_CACHE_TTL": "0"})
	var cache *allowcache.Cache
	h := newRealWithClient(t, nil,
		[]realOpt{
			withAddr(stacktest.Auth, authSvc.Addr()),
			withServiceToken(stacktest.AdapterToken),
			withConfig("BMCIS_MCP_KEY_LEASE", lease, adapterconfig.EnvAnswerCacheTTL, "0"),
		},
		[]harnessOpt{withKey(key), func(o *tools.Options) { cache = o.AllowCache }})
	return h, cache, authSvc
}

var leaseQuery = map[string]any{"query": "incident severity levels", "response_mode": "full", "page_size": 5}

// TestLeasedBurst: a busy key's calls mostly spend units auth prepaid
// instead of waiting for a check, answer what checked calls answer, and
// once the leases are given back the key has been charged exactly one
// unit per call.
func TestLeasedBurst(t *testing.T) {
	// The hour tier regains a unit every 36 s: well after this test, so
	// its count is exact.
	key := demoStack(t).CreateKey(t, stacktest.Key{Name: "lease-burst", PerMinute: 100, PerHour: 100, PerDay: 1000})
	h, cache, authSvc := leaseHarness(t, key, "1s")
	const n = 40
	checked := h.call(tools.ToolSemanticSearch, leaseQuery)
	require.Equal(t, "success", checked.status(), "%v", checked.env["error"])
	require.NotEmpty(t, checked.results())
	for i := 1; i < n; i++ {
		a := h.call(tools.ToolSemanticSearch, leaseQuery)
		require.Equal(t, "success", a.status(), "call %d: %v", i, a.env["error"])
		require.Equal(t, checked.results(), a.results(), "call %d answers as a checked call", i)
	}
	checks := allowedChecks(t, authSvc)
	st := cache.Stats()
	require.Equal(t, float64(n), checks+float64(st.Leased), "every call was checked or leased")
	require.Less(t, checks, float64(n)/3, "far fewer checks than calls (leased: %d)", st.Leased)
	t.Logf("%d calls: %.0f checked, %d leased", n, checks, st.Leased)

	cache.Close() // gives every lease back, as when the adapter stops
	require.Zero(t, cache.Stats().Lost)
	resp, err := h.clients.Check(context.Background(), key, tools.ToolSemanticSearch)
	require.NoError(t, err)
	require.True(t, resp.GetAllowed())
	require.Nil(t, resp.GetLease(), "not asked for")
	for _, tier := range resp.GetRemaining().GetTiers() {
		if tier.GetTier() == "hour" {
			require.Equal(t, int64(100-n-1), tier.GetValue(), "charged one unit per call, the unspent ones refunded")
		}
	}
}

// TestLeasesKeepLimits: a key limited to 10 calls a minute gets exactly 10
// of 30 rapid calls with leases on.
func TestLeasesKeepLimits(t *testing.T) {
	key := demoStack(t).CreateKey(t, stacktest.Key{Name: "lease-small", PerMinute: 10, PerHour: 1000, PerDay: 1000})
	h, cache, _ := leaseHarness(t, key, "1s")
	allowed := 0
	for range 30 {
		a := h.call(tools.ToolSemanticSearch, leaseQuery)
		if a.status() == "success" {
			allowed++
		} else {
			require.Equal(t, "RATE_LIMIT", a.errCode())
		}
	}
	require.Equal(t, 10, allowed)
	require.Positive(t, cache.Stats().Leased, "some of them on a lease")
}

// TestLeaseRevocation: a key revoked in the middle of a burst is refused
// once its lease ends, then on every call. A short lease, and bounds that
// hold on a loaded 2-core machine: the refusal comes at all (within a
// generous wait), and no call made after the revocation plus the lease plus
// leaseSlack (a check's time, in seconds) passes.
func TestLeaseRevocation(t *testing.T) {
	s := demoStack(t)
	key := s.CreateKey(t, stacktest.Key{Name: "lease-revoked", PerMinute: 100_000, PerHour: 1_000_000, PerDay: 10_000_000})
	const (
		lease      = 300 * time.Millisecond
		leaseSlack = 5 * time.Second
	)
	h, cache, _ := leaseHarness(t, key, lease.String())
	for range 20 {
		require.Equal(t, "success", h.call(tools.ToolSemanticSearch, leaseQuery).status())
	}
	require.Positive(t, cache.Stats().Leased)
	s.RevokeKey(t, key)
	revoked := time.Now()
	var refusedAfter time.Duration
	for refusedAfter == 0 {
		made := time.Since(revoked)
		a := h.call(tools.ToolSemanticSearch, leaseQuery)
		if a.status() == "success" {
			require.Less(t, made, lease+leaseSlack, "a call made after the lease ended and a check passes")
			continue
		}
		require.Equal(t, "AUTH_INVALID", a.errCode())
		refusedAfter = time.Since(revoked)
	}
	t.Logf("refused %s after the revocation; %d calls were leased", refusedAfter, cache.Stats().Leased)
	for range 5 {
		require.Equal(t, "AUTH_INVALID", h.call(tools.ToolSemanticSearch, leaseQuery).errCode())
	}
}

// TestLeasesOffChecksEveryCall: BMCIS_MCP_KEY_LEASE=0 asks for no lease:
// every call is checked, as before leases.
func TestLeasesOffChecksEveryCall(t *testing.T) {
	key := demoStack(t).CreateKey(t, stacktest.Key{Name: "lease-off", PerMinute: 1000, PerHour: 10_000, PerDay: 100_000})
	h, cache, authSvc := leaseHarness(t, key, "0")
	for range 10 {
		require.Equal(t, "success", h.call(tools.ToolSemanticSearch, leaseQuery).status())
	}
	require.Equal(t, float64(10), allowedChecks(t, authSvc))
	require.Zero(t, cache.Stats().Leased)
}
