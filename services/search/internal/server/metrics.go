package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/services/search/internal/index"
)

type metrics struct {
	cache        *prometheus.CounterVec
	ingestDocs   *prometheus.CounterVec
	ingestChunks prometheus.Counter
	embedded     prometheus.Counter
	feedApplied  prometheus.Counter
	indexDocs    prometheus.Gauge
	indexChunks  prometheus.Gauge
	indexTerms   prometheus.Gauge
	indexBytes   *prometheus.GaugeVec
	generation   prometheus.Gauge
	stage        *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, cacheLen func() float64) *metrics {
	m := &metrics{
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_cache_requests_total",
			Help: "Searches that consulted the ranked-list cache, by result (hit or miss).",
		}, []string{"result"}),
		ingestDocs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_ingest_documents_total",
			Help: "Documents received by IngestDocuments, by result (written, unchanged, failed).",
		}, []string{"result"}),
		ingestChunks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_search_ingest_chunks_total",
			Help: "Chunks written by IngestDocuments.",
		}),
		embedded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_search_embedded_chunks_total",
			Help: "Chunks given a vector by this process's embedding sweeps.",
		}),
		feedApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_search_feed_documents_applied_total",
			Help: "Document changes (writes and deletions) applied to the in-memory index from the change feed.",
		}),
		indexDocs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_search_index_documents", Help: "Documents in this replica's in-memory index.",
		}),
		indexChunks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_search_index_chunks", Help: "Chunks in this replica's in-memory index.",
		}),
		indexTerms: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_search_index_terms", Help: "Distinct analyzed terms in the BM25 index.",
		}),
		indexBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bmcis_search_index_bytes",
			Help: "Approximate heap of the in-memory index, by part (bm25 postings and tables, text of chunks).",
		}, []string{"part"}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_search_index_generation", Help: "Change-feed generation this replica has applied.",
		}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bmcis_search_stage_seconds",
			Help:    "Time spent in each stage of an uncached search (bm25, embed, vector, dedup).",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .004, .008, .016, .032, .064, .128, .5, 2},
		}, []string{"stage"}),
	}
	reg.MustRegister(m.cache, m.ingestDocs, m.ingestChunks, m.embedded, m.feedApplied, m.indexDocs, m.indexChunks,
		m.indexTerms, m.indexBytes, m.generation, m.stage,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_cache_entries", Help: "Ranked lists held in the cache.",
		}, cacheLen))
	for _, r := range []string{"hit", "miss"} {
		m.cache.WithLabelValues(r)
	}
	for _, r := range []string{"written", "unchanged", "failed"} {
		m.ingestDocs.WithLabelValues(r)
	}
	return m
}

func (m *metrics) setIndex(s index.Stats) {
	m.indexDocs.Set(float64(s.Documents))
	m.indexChunks.Set(float64(s.Chunks))
	m.indexTerms.Set(float64(s.Terms))
	m.indexBytes.WithLabelValues("bm25").Set(float64(s.BM25Bytes))
	m.indexBytes.WithLabelValues("text").Set(float64(s.TextBytes))
	m.generation.Set(float64(s.Generation))
}
