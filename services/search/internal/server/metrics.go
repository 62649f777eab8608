package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/snapshot"
	"github.com/bmcis/knowledge/services/search/internal/sources"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

type metrics struct {
	cache        *prometheus.CounterVec
	ingestDocs   *prometheus.CounterVec
	ingestChunks prometheus.Counter
	embedded     prometheus.Counter
	trainings    *prometheus.CounterVec
	syncs        *prometheus.CounterVec
	sourceRuns   *prometheus.CounterVec
	feedApplied  prometheus.Counter
	indexDocs    prometheus.Gauge
	indexChunks  prometheus.Gauge
	indexTerms   prometheus.Gauge
	indexBytes   *prometheus.GaugeVec
	generation   prometheus.Gauge
	stage        *prometheus.HistogramVec
	vectorPath   *prometheus.CounterVec
	startSeconds *prometheus.GaugeVec
	startGen     prometheus.Gauge
	snapshot     snapshot.Metrics
}

// engineGauges are the engine's sizes, read at each scrape.
type engineGauges interface {
	CachedLists() int
	HeldClassVectors() int
	MirroredVectors() int
	MirrorBuilding() bool
	MirrorCodesOnly() bool
}

func newMetrics(reg prometheus.Registerer, eng func() engineGauges) *metrics {
	gauge := func(f func(engineGauges) int) func() float64 { return func() float64 { return float64(f(eng())) } }
	flag := func(f func(engineGauges) bool) func() float64 {
		return func() float64 {
			if f(eng()) {
				return 1
			}
			return 0
		}
	}
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
		trainings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_embedder_trainings_total",
			Help: "Builtin embedder trainings run by this process, by result (new model, or unchanged: the active model again).",
		}, []string{"result"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_source_syncs_total",
			Help: "Source syncs (bmcisctl sync) this replica received, by result (completed; partial: completed with documents it could not ingest; failed: the sync ended in an error and was not recorded).",
		}, []string{"result"}),
		sourceRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_source_runs_total",
			Help: "Runs of scheduled sources (git, web, folder) by this replica, by kind and result (ok, failed: nothing was deleted; see ListSources' last_error).",
		}, []string{"kind", "result"}),
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
			Help:    "Time spent in each stage of an uncached search (bm25, embed, feedback, vector, dedup_vectors, dedup).",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .004, .008, .016, .032, .064, .128, .5, 2},
		}, []string{"stage"}),
		vectorPath: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_search_vector_path_total",
			Help: "Vector sides of uncached searches by the path that ran: mirror (the in-memory graph), held (restricted callers' held vectors) or pgvector.",
		}, []string{"path"}),
		startSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bmcis_search_index_start_seconds",
			Help: "Time this replica took to build its index at start, by source (snapshot: loaded from an index snapshot and caught up; database: analysed from the chunks).",
		}, []string{"source"}),
		startGen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_search_index_start_snapshot_generation",
			Help: "Generation of the index snapshot this replica started from (0: built from the chunks).",
		}),
		snapshot: snapshot.Metrics{
			Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "bmcis_search_snapshot_writes_total",
				Help: "Index snapshots this replica wrote, by result (written, failed).",
			}, []string{"result"}),
			LastBytes: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "bmcis_search_snapshot_last_bytes", Help: "Size of the last index snapshot this replica wrote.",
			}),
			LastSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "bmcis_search_snapshot_last_write_seconds", Help: "Time the last index snapshot this replica wrote took.",
			}),
		},
	}
	reg.MustRegister(m.cache, m.ingestDocs, m.ingestChunks, m.embedded, m.trainings, m.syncs, m.sourceRuns, m.feedApplied, m.indexDocs, m.indexChunks,
		m.indexTerms, m.indexBytes, m.generation, m.stage, m.vectorPath, m.startSeconds, m.startGen,
		m.snapshot.Writes, m.snapshot.LastBytes, m.snapshot.LastSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_cache_entries", Help: "Ranked lists held in the cache.",
		}, gauge(engineGauges.CachedLists)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_class_vectors",
			Help: "Vectors held for restricted callers' exact scans (BMCIS_SEARCH_CLASS_VECTORS_MB).",
		}, gauge(engineGauges.HeldClassVectors)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_mirrored_vectors",
			Help: "Vectors in this replica's in-memory HNSW graph (BMCIS_SEARCH_VECTOR_MIRROR_MB; 0 while it is off or being built).",
		}, gauge(engineGauges.MirroredVectors)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_mirror_building",
			Help: "1 while this replica reads and builds a whole vector mirror graph (at start-up, after a new model, past a quarter deleted).",
		}, flag(engineGauges.MirrorBuilding)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bmcis_search_mirror_codes_only",
			Help: "1 while this replica's vector mirror keeps int8 codes only (its float32 vectors would not fit BMCIS_SEARCH_VECTOR_MIRROR_MB): scores from codes.",
		}, flag(engineGauges.MirrorCodesOnly)))
	for _, r := range []string{"hit", "miss"} {
		m.cache.WithLabelValues(r)
	}
	for _, p := range []string{"mirror", "held", "pgvector"} {
		m.vectorPath.WithLabelValues(p)
	}
	for _, r := range []string{"written", "unchanged", "failed"} {
		m.ingestDocs.WithLabelValues(r)
	}
	for _, r := range []string{"new", "unchanged"} {
		m.trainings.WithLabelValues(r)
	}
	for _, r := range []string{"written", "failed"} {
		m.snapshot.Writes.WithLabelValues(r)
	}
	for _, r := range []string{syncCompleted, syncPartial, syncFailed} {
		m.syncs.WithLabelValues(r)
	}
	for _, k := range sources.Names() {
		for _, r := range []string{runOK, runFailed} {
			m.sourceRuns.WithLabelValues(k, r)
		}
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

func (m *metrics) setStart(s snapshot.Started, took time.Duration) {
	source := "database"
	if s.FromSnapshot {
		source = "snapshot"
		m.startGen.Set(float64(s.Snapshot.Generation))
	}
	m.startSeconds.WithLabelValues(source).Set(took.Seconds())
}

// Results of bmcis_search_source_syncs_total.
const (
	syncCompleted = "completed"
	syncPartial   = "partial"
	syncFailed    = "failed"
)

// recordSync counts one sync stream: recorded tells whether it completed
// (its counts were stored), failed how many documents it could not ingest.
func (m *metrics) recordSync(recorded bool, failed int32) {
	switch {
	case !recorded:
		m.syncs.WithLabelValues(syncFailed).Inc()
	case failed > 0:
		m.syncs.WithLabelValues(syncPartial).Inc()
	default:
		m.syncs.WithLabelValues(syncCompleted).Inc()
	}
}

var (
	modelCreatedDesc = prometheus.NewDesc("bmcis_search_embedder_model_created_timestamp_seconds",
		"When the embedding model this replica embeds queries with was registered (Unix seconds), by provider; absent while no model is active. Its age says whether the builtin model is still being retrained.",
		[]string{"provider"}, nil)
	modelUnusableDesc = prometheus.NewDesc("bmcis_search_embedder_model_unusable",
		"1 while this replica cannot load the active embedding model (it then serves keyword-only results), 0 otherwise.",
		nil, nil)
	sourceLastSyncDesc = prometheus.NewDesc("bmcis_search_source_last_sync_timestamp_seconds",
		"When each source's last sync completed (Unix seconds), from the sources table; absent until one completes.",
		[]string{"source"}, nil)
	sourceLastFailedDesc = prometheus.NewDesc("bmcis_search_source_last_sync_failed_documents",
		"Documents each source's last completed sync could not ingest, from the sources table.",
		[]string{"source"}, nil)
)

// stateCollector reads, at scrape time, facts that live outside this
// process's counters: the active model (shared by every replica through
// the database) and each source's last sync (written by whichever replica
// received it). A failed read of the sources is left out of the scrape, not
// an error: bmcis_database_up already reports an outage, and the rest of the
// scrape must still arrive.
type stateCollector struct {
	emb     *embedding.Manager
	st      *store.Store
	timeout time.Duration
	log     *slog.Logger
}

func registerStateMetrics(reg prometheus.Registerer, emb *embedding.Manager, st *store.Store, timeout time.Duration, log *slog.Logger) error {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return reg.Register(&stateCollector{emb: emb, st: st, timeout: timeout, log: log})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- modelCreatedDesc
	ch <- modelUnusableDesc
	ch <- sourceLastSyncDesc
	ch <- sourceLastFailedDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if a := c.emb.Current(); a != nil && !a.TrainedAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(modelCreatedDesc, prometheus.GaugeValue,
			float64(a.TrainedAt.UnixMilli())/1e3, a.Provider)
	}
	unusable := 0.0
	if c.emb.Unusable() != "" {
		unusable = 1
	}
	ch <- prometheus.MustNewConstMetric(modelUnusableDesc, prometheus.GaugeValue, unusable)

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	states, err := c.st.SyncStates(ctx)
	if err != nil {
		c.log.Warn("metrics: source sync states left out of this scrape", "error", err.Error())
		return
	}
	for _, s := range states {
		if !s.LastSyncAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(sourceLastSyncDesc, prometheus.GaugeValue,
				float64(s.LastSyncAt.UnixMilli())/1e3, s.Name)
		}
		ch <- prometheus.MustNewConstMetric(sourceLastFailedDesc, prometheus.GaugeValue, float64(s.Failed), s.Name)
	}
}
