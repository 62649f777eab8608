package tools_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// gathered is the value of the series of reg named name with labels (name,
// value pairs); 0 when absent.
func gathered(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// scraped is the value of the series (its name and labels as exposed) on
// a process's /metrics at url; 0 when absent.
func scraped(t *testing.T, url, series string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, series+" ") {
			v, err := strconv.ParseFloat(line[len(series)+1:], 64)
			require.NoError(t, err, line)
			return v
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// TestCacheMetrics: the call path's metrics (RegisterCacheMetrics) follow
// what the answer cache, the index watch and key leases do, against a
// search and an auth process of the test's own (search is stopped) with
// the adapter's credential, as main registers them.
func TestCacheMetrics(t *testing.T) {
	s := demoStack(t)
	searchSvc := s.StartService(t, stacktest.Search, nil)
	authSvc := s.StartService(t, stacktest.Auth, map[string]string{"BMCIS_AUTH_KEY_CACHE_TTL": "0"})
	key := s.CreateKey(t, stacktest.Key{Name: "cache-metrics", PerMinute: 100_000, PerHour: 1_000_000, PerDay: 10_000_000})
	var leases *allowcache.Cache
	var answers *tools.AnswerCache
	h := newRealWithClient(t, nil,
		[]realOpt{
			withAddr(stacktest.Search, searchSvc.Addr()),
			withAddr(stacktest.Auth, authSvc.Addr()),
			withServiceToken(stacktest.AdapterToken),
			withConfig("BMCIS_MCP_KEY_LEASE", "1s", "BMCIS_MCP_ANSWER_CACHE_TTL", "1m"),
		},
		[]harnessOpt{withKey(key), func(o *tools.Options) { leases, answers = o.AllowCache, o.Answers }})
	require.NotNil(t, answers)
	reg := prometheus.NewRegistry()
	require.NoError(t, tools.RegisterCacheMetrics(reg, tools.Options{AllowCache: leases, Answers: answers, Index: h.index}))

	t.Run("the watch is current with search up", func(t *testing.T) {
		h.waitIndexCurrent()
		require.Equal(t, 1.0, gathered(t, reg, tools.MetricIndexWatchCurrent))
	})

	t.Run("a repeated call is a hit", func(t *testing.T) {
		q := map[string]any{"query": "vendor escalation contacts", "page_size": 3}
		hits := gathered(t, reg, tools.MetricAnswerCacheRequests, "result", "hit")
		misses := gathered(t, reg, tools.MetricAnswerCacheRequests, "result", "miss")
		stores := gathered(t, reg, tools.MetricAnswerCacheStores)
		first := h.call(tools.ToolSemanticSearch, q)
		require.Equal(t, "success", first.status(), "%v", first.env["error"])
		require.Equal(t, misses+1, gathered(t, reg, tools.MetricAnswerCacheRequests, "result", "miss"))
		require.Equal(t, stores+1, gathered(t, reg, tools.MetricAnswerCacheStores))
		again := h.call(tools.ToolSemanticSearch, q)
		require.Equal(t, first.results(), again.results())
		require.Equal(t, hits+1, gathered(t, reg, tools.MetricAnswerCacheRequests, "result", "hit"))
		st := answers.Stats()
		require.Equal(t, float64(st.Bytes), gathered(t, reg, tools.MetricAnswerCacheBytes))
		require.Positive(t, gathered(t, reg, tools.MetricAnswerCacheBytes))
		require.Equal(t, float64(st.Entries), gathered(t, reg, tools.MetricAnswerCacheEntries))
		require.Equal(t, float64(st.Evictions), gathered(t, reg, tools.MetricAnswerCacheEvictions))
	})

	t.Run("early starts", func(t *testing.T) {
		early := func(event string) float64 { return gathered(t, reg, tools.MetricEarlyStarts, "event", event) }
		started, kept := early("started"), early("kept")
		// A key just allowed starts its next call's search while that
		// call is checked; the check allows the same scope: kept.
		for _, q := range []string{"early start one", "early start two"} {
			a := h.call(tools.ToolSemanticSearch, map[string]any{"query": q, "page_size": 1})
			require.Equal(t, "success", a.status(), "%v", a.env["error"])
		}
		require.Greater(t, early("started"), started)
		require.Equal(t, early("started")-started, early("kept")-kept, "each settled as kept")
		require.Zero(t, early("discarded"))
		st := leases.Stats()
		require.Equal(t, []float64{float64(st.Started), float64(st.Kept), float64(st.Discarded)},
			[]float64{early("started"), early("kept"), early("discarded")})
	})

	t.Run("a leased burst", func(t *testing.T) {
		before := gathered(t, reg, tools.MetricKeyLeaseCalls)
		for range 30 {
			a := h.call(tools.ToolSemanticSearch, leaseQuery)
			require.Equal(t, "success", a.status(), "%v", a.env["error"])
		}
		leased := gathered(t, reg, tools.MetricKeyLeaseCalls)
		require.Greater(t, leased, before, "some calls spent leased units")
		require.Equal(t, float64(leases.Stats().Leased), leased)

		leases.Close() // gives every lease back, as when the adapter stops
		released := gathered(t, reg, tools.MetricKeyLeaseUnits, "fate", "released")
		require.Positive(t, released, "a burst's last lease has units left")
		require.Zero(t, gathered(t, reg, tools.MetricKeyLeaseUnits, "fate", "lost"))
		// Every unit auth granted was spent by a call or given back, and
		// auth counted each refund.
		granted := scraped(t, authSvc.MetricsURL(), `bmcis_auth_lease_units_total{event="granted"}`)
		require.Equal(t, leased+released, granted)
		require.Equal(t, released, scraped(t, authSvc.MetricsURL(), `bmcis_auth_lease_units_total{event="refunded"}`))
	})

	t.Run("with search stopped the watch is not current", func(t *testing.T) {
		reconnects := gathered(t, reg, tools.MetricIndexWatchReconnects)
		searchSvc.Stop(t)
		require.Eventually(t, func() bool { return gathered(t, reg, tools.MetricIndexWatchCurrent) == 0 }, 5*time.Second, 5*time.Millisecond)
		require.Eventually(t, func() bool { return gathered(t, reg, tools.MetricIndexWatchReconnects) > reconnects },
			5*time.Second, 10*time.Millisecond, "the watcher keeps trying")
		searchSvc.Start(t)
		h.waitIndexCurrent()
		require.Equal(t, 1.0, gathered(t, reg, tools.MetricIndexWatchCurrent))
	})
}

// TestCacheMetricsOff: with the answer cache off (and so no index watch)
// only the allow cache's series (leases, early starts) are registered, at
// zero without a cache.
func TestCacheMetricsOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, tools.RegisterCacheMetrics(reg, tools.Options{}))
	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	require.Equal(t, []string{tools.MetricEarlyStarts, tools.MetricKeyLeaseCalls, tools.MetricKeyLeaseUnits}, names)
	require.Zero(t, gathered(t, reg, tools.MetricKeyLeaseUnits, "fate", "lost"))
	require.Zero(t, gathered(t, reg, tools.MetricEarlyStarts, "event", "started"))
}
