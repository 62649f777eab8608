package tools

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
)

// Metric names of the call path's caches (docs/OPERATIONS.md, "MCP call
// path"): the answer cache, the index watch it follows, and key leases.
const (
	MetricAnswerCacheRequests  = "bmcis_mcp_answer_cache_requests_total"
	MetricAnswerCacheStores    = "bmcis_mcp_answer_cache_stores_total"
	MetricAnswerCacheNotStored = "bmcis_mcp_answer_cache_not_stored_total"
	MetricAnswerCacheEvictions = "bmcis_mcp_answer_cache_evictions_total"
	MetricAnswerCacheBytes     = "bmcis_mcp_answer_cache_bytes"
	MetricAnswerCacheEntries   = "bmcis_mcp_answer_cache_entries"
	MetricIndexWatchCurrent    = "bmcis_mcp_index_watch_current"
	MetricIndexWatchReconnects = "bmcis_mcp_index_watch_reconnects_total"
	MetricKeyLeaseCalls        = "bmcis_mcp_key_lease_calls_total"
	MetricKeyLeaseUnits        = "bmcis_mcp_key_lease_units_total"
	MetricEarlyStarts          = "bmcis_mcp_early_starts_total"
)

// indexReconnects is what the index watcher (indexwatch.Watcher) tells
// beyond its epoch: how many times a stream was reopened.
type indexReconnects interface{ Reconnects() int64 }

// RegisterCacheMetrics registers with reg the metrics of what o's call
// path keeps: key leases and early starts (o.AllowCache; zero while the
// allow cache or leases are off), and,
// when they run, the answer cache (o.Answers) and the index watch
// (o.Index). They are read from the parts' own counts at scrape time, so
// a call pays nothing for them.
func RegisterCacheMetrics(reg prometheus.Registerer, o Options) error {
	cs := []prometheus.Collector{allowCacheCollector{o.AllowCache}}
	if o.Answers != nil {
		cs = append(cs, answerCacheCollector{o.Answers})
	}
	if o.Index != nil {
		index := o.Index
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricIndexWatchCurrent,
			Help: "1 while the index watch stream is open and heard from within 3 s, else 0 (the answer cache is then bypassed).",
		}, func() float64 {
			if _, _, current := index.Epoch(); current {
				return 1
			}
			return 0
		}))
		if r, ok := index.(indexReconnects); ok {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: MetricIndexWatchReconnects,
				Help: "Index watch streams opened again (attempts) after one ended or failed.",
			}, func() float64 { return float64(r.Reconnects()) }))
		}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the call path cache metrics: %w", err)
		}
	}
	return nil
}

var (
	answerRequestsDesc = prometheus.NewDesc(MetricAnswerCacheRequests,
		"Answer cache lookups, by result: hit (answered from the cache) or miss.", []string{"result"}, nil)
	answerStoresDesc = prometheus.NewDesc(MetricAnswerCacheStores,
		"Answers put in the answer cache.", nil, nil)
	answerNotStoredDesc = prometheus.NewDesc(MetricAnswerCacheNotStored,
		"Answers the answer cache would have kept but did not, by reason: other_version (search computed it at another index version than the watched one) or no_version (search did not say: an older release).",
		[]string{"reason"}, nil)
	answerEvictionsDesc = prometheus.NewDesc(MetricAnswerCacheEvictions,
		"Answers evicted from the answer cache to stay within BMCIS_MCP_ANSWER_CACHE_BYTES.", nil, nil)
	answerBytesDesc = prometheus.NewDesc(MetricAnswerCacheBytes,
		"Bytes the answer cache holds.", nil, nil)
	answerEntriesDesc = prometheus.NewDesc(MetricAnswerCacheEntries,
		"Answers the answer cache holds.", nil, nil)
	leaseCallsDesc = prometheus.NewDesc(MetricKeyLeaseCalls,
		"Tool calls that spent a unit auth leased instead of waiting for a check.", nil, nil)
	leaseUnitsDesc = prometheus.NewDesc(MetricKeyLeaseUnits,
		"Leased units not spent, by fate: released (given back to auth) or lost (the release failed or was dropped: charged to the key until its tiers refill).",
		[]string{"fate"}, nil)
	earlyStartsDesc = prometheus.NewDesc(MetricEarlyStarts,
		"Backend work started before the call's auth check answered (the allow cache), by event: started, then kept (the check allowed the same scope: it answered the call) or discarded (a denial, an error or another scope).",
		[]string{"event"}, nil)
)

// answerCacheCollector reads one snapshot of the cache's counts a scrape.
type answerCacheCollector struct{ c *AnswerCache }

func (a answerCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{answerRequestsDesc, answerStoresDesc, answerNotStoredDesc, answerEvictionsDesc, answerBytesDesc, answerEntriesDesc} {
		ch <- d
	}
}

func (a answerCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := a.c.Stats()
	ch <- prometheus.MustNewConstMetric(answerRequestsDesc, prometheus.CounterValue, float64(st.Hits), "hit")
	ch <- prometheus.MustNewConstMetric(answerRequestsDesc, prometheus.CounterValue, float64(st.Misses), "miss")
	ch <- prometheus.MustNewConstMetric(answerStoresDesc, prometheus.CounterValue, float64(st.Stores))
	for r, n := range st.NotStored {
		ch <- prometheus.MustNewConstMetric(answerNotStoredDesc, prometheus.CounterValue, float64(n), answercache.Reasons[r])
	}
	ch <- prometheus.MustNewConstMetric(answerEvictionsDesc, prometheus.CounterValue, float64(st.Evictions))
	ch <- prometheus.MustNewConstMetric(answerBytesDesc, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(answerEntriesDesc, prometheus.GaugeValue, float64(st.Entries))
}

// allowCacheCollector reads the allow cache's lease and early start
// counts (a nil cache: zeros).
type allowCacheCollector struct{ c *allowcache.Cache }

func (l allowCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leaseCallsDesc
	ch <- leaseUnitsDesc
	ch <- earlyStartsDesc
}

func (l allowCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := l.c.Stats()
	ch <- prometheus.MustNewConstMetric(earlyStartsDesc, prometheus.CounterValue, float64(st.Started), "started")
	ch <- prometheus.MustNewConstMetric(earlyStartsDesc, prometheus.CounterValue, float64(st.Kept), "kept")
	ch <- prometheus.MustNewConstMetric(earlyStartsDesc, prometheus.CounterValue, float64(st.Discarded), "discarded")
	ch <- prometheus.MustNewConstMetric(leaseCallsDesc, prometheus.CounterValue, float64(st.Leased))
	ch <- prometheus.MustNewConstMetric(leaseUnitsDesc, prometheus.CounterValue, float64(st.Released), "released")
	ch <- prometheus.MustNewConstMetric(leaseUnitsDesc, prometheus.CounterValue, float64(st.Lost), "lost")
}
