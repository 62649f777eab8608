package server

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/version"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/engine"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/snapshot"
	"github.com/bmcis/knowledge/services/search/internal/sources"
)

// Config is the search service's own configuration.
type Config struct {
	// Embedding configures the embedder (BMCIS_EMBEDDER*, BMCIS_EMBEDDING_DIMENSIONS).
	Embedding embedding.Config
	// CacheSize and CacheTTL bound the ranked-list cache
	// (BMCIS_SEARCH_CACHE_SIZE, 0 disables; BMCIS_SEARCH_CACHE_TTL).
	CacheSize int
	CacheTTL  time.Duration
	// Candidates is how many chunks each retriever contributes
	// (BMCIS_SEARCH_CANDIDATES, at least 100).
	Candidates int
	// Fusion is the hybrid method and its parameters. Zero fields mean the
	// preset of the active provider: fusion.BuiltinOptions for builtin,
	// DefaultOptions for openai/ollama (BMCIS_SEARCH_FUSION rrf|convex,
	// BMCIS_SEARCH_RRF_K, BMCIS_SEARCH_BM25_WEIGHT,
	// BMCIS_SEARCH_VECTOR_WEIGHT, BMCIS_SEARCH_CONVEX_ALPHA,
	// BMCIS_SEARCH_VECTOR_FEEDBACK_CHUNKS override).
	Fusion fusion.Options
	// EfSearch is hnsw.ef_search (BMCIS_SEARCH_HNSW_EF_SEARCH); it is raised
	// to Candidates when lower, since the HNSW scan returns at most that many.
	EfSearch int
	// MaxScanTuples bounds filtered iterative scans (BMCIS_SEARCH_HNSW_MAX_SCAN_TUPLES).
	MaxScanTuples int
	// DBTimeout bounds each database call of a search, GetChunks or delete
	// (BMCIS_SEARCH_DB_TIMEOUT), so a dead database answers UNAVAILABLE fast.
	DBTimeout time.Duration
	// IngestTimeout bounds writing one document (BMCIS_SEARCH_INGEST_TIMEOUT).
	IngestTimeout time.Duration
	// IngestWorkers is how many documents of a stream are written at once
	// (BMCIS_SEARCH_INGEST_WORKERS).
	IngestWorkers int
	// MaxDocumentBytes rejects bigger documents (BMCIS_SEARCH_MAX_DOCUMENT_BYTES,
	// default 64 MiB). Documents over gRPC's 4 MiB message limit arrive in
	// parts (Document.content_size); it is also the stream's budget of
	// content received but not yet written.
	MaxDocumentBytes int
	// PollInterval is the change-feed poll period, the fallback when a
	// notification is lost (BMCIS_SEARCH_POLL_INTERVAL).
	PollInterval time.Duration
	// SweepInterval is how often a replica looks for chunks still without a
	// vector (BMCIS_SEARCH_SWEEP_INTERVAL).
	SweepInterval time.Duration
	// DedupWindow is how many top results are compared by embedding cosine;
	// identical content hashes are flagged over the whole list.
	DedupWindow int
	// TextInDatabase keeps chunk text out of the in-memory index
	// (BMCIS_SEARCH_CHUNK_TEXT=database; default memory): for corpora whose
	// text would not fit a replica's memory. Shown chunks are then read
	// from PostgreSQL through an LRU of TextCacheChunks texts
	// (BMCIS_SEARCH_TEXT_CACHE_CHUNKS), so GetChunks and pages not in it
	// need the database. See docs/SCALING.md.
	TextInDatabase  bool
	TextCacheChunks int
	// ExactVectorMaxRows: a category filter matching at most this many
	// chunks is answered by exact distances over those rows instead of an
	// HNSW iterative scan (BMCIS_SEARCH_EXACT_VECTOR_MAX_ROWS; 0: never).
	ExactVectorMaxRows int
	// ClassVectorsMB bounds the vectors a replica holds for restricted
	// callers' exact scans (BMCIS_SEARCH_CLASS_VECTORS_MB; 0: none, every
	// such scan reads PostgreSQL). docs/ACCESS.md, Cost.
	ClassVectorsMB int
	// VectorMirrorMB bounds the replica's in-memory HNSW graph of every
	// stored vector (BMCIS_SEARCH_VECTOR_MIRROR_MB; 0: none). While the
	// vectors fit, an unrestricted query's vector side walks memory
	// instead of pgvector's index; past it, pgvector as before.
	// docs/SEARCH.md, "The vector mirror".
	VectorMirrorMB int
	// Snapshot configures index snapshots (docs/SCALING.md, "Step 0"): a
	// replica starts from the newest stored copy of the index and catches
	// up on the change feed instead of analysing every chunk
	// (BMCIS_SEARCH_SNAPSHOT read-write|read|off, default read-write: also
	// write one when none is usable or when the feed has moved by
	// BMCIS_SEARCH_SNAPSHOT_CHANGE_FRACTION of the documents, default 0.1,
	// since the newest, once no change has committed for
	// BMCIS_SEARCH_SNAPSHOT_QUIET, default 1m; checked every
	// BMCIS_SEARCH_SNAPSHOT_CHECK_INTERVAL, default 1m).
	Snapshot snapshot.Config
	// SourcesRunner runs scheduled sources on this replica
	// (BMCIS_SEARCH_SOURCES_RUNNER=on; default off). Any replica answers
	// SyncSource; the lease rows keep one run per source at a time.
	SourcesRunner bool
	// SourcesPoll is how often the runner looks for due sources
	// (BMCIS_SEARCH_SOURCES_POLL).
	SourcesPoll time.Duration
	// SourceRunTimeout bounds one run and is its lease
	// (BMCIS_SEARCH_SOURCES_RUN_TIMEOUT).
	SourceRunTimeout time.Duration
	// Sources are the limits and address rules of every source
	// (BMCIS_SEARCH_SOURCES_MAX_FILE_BYTES, _MAX_TOTAL_BYTES, _MAX_FILES,
	// _MAX_DEPTH, _REQUEST_INTERVAL, _REQUEST_TIMEOUT, _ALLOW_PRIVATE,
	// _ALLOW_LOOPBACK, _FOLDER_ROOT); see docs/SOURCES.md.
	Sources sources.Env
}

// DefaultConfig is the configuration when no variable is set.
func DefaultConfig() Config {
	return Config{
		Embedding:  embedding.DefaultConfig(),
		CacheSize:  1000,
		CacheTTL:   30 * time.Second,
		Candidates: 100,
		EfSearch:   100, MaxScanTuples: 20000,
		DBTimeout:     1500 * time.Millisecond,
		IngestTimeout: 60 * time.Second, IngestWorkers: 4,
		MaxDocumentBytes: 64 << 20,
		PollInterval:     time.Second, SweepInterval: 10 * time.Second,
		DedupWindow: 50, TextCacheChunks: 20_000, ExactVectorMaxRows: 40_000, ClassVectorsMB: 64, VectorMirrorMB: 256,
		Snapshot:    snapshot.DefaultConfig(),
		SourcesPoll: 30 * time.Second, SourceRunTimeout: 30 * time.Minute,
		Sources: sources.Env{Limits: sources.DefaultLimits()},
	}
}

// LoadConfig reads the variables; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	d := DefaultConfig()
	c := Config{
		Embedding:          embedding.LoadConfig(env),
		CacheSize:          env.Int("BMCIS_SEARCH_CACHE_SIZE", d.CacheSize, 0, 1_000_000),
		CacheTTL:           env.Duration("BMCIS_SEARCH_CACHE_TTL", d.CacheTTL, time.Second, 24*time.Hour),
		Candidates:         env.Int("BMCIS_SEARCH_CANDIDATES", d.Candidates, 100, 1000),
		EfSearch:           env.Int("BMCIS_SEARCH_HNSW_EF_SEARCH", d.EfSearch, 10, 1000),
		MaxScanTuples:      env.Int("BMCIS_SEARCH_HNSW_MAX_SCAN_TUPLES", d.MaxScanTuples, 1000, 10_000_000),
		DBTimeout:          env.Duration("BMCIS_SEARCH_DB_TIMEOUT", d.DBTimeout, 50*time.Millisecond, time.Minute),
		IngestTimeout:      env.Duration("BMCIS_SEARCH_INGEST_TIMEOUT", d.IngestTimeout, time.Second, time.Hour),
		IngestWorkers:      env.Int("BMCIS_SEARCH_INGEST_WORKERS", d.IngestWorkers, 1, 64),
		MaxDocumentBytes:   env.Int("BMCIS_SEARCH_MAX_DOCUMENT_BYTES", d.MaxDocumentBytes, 1024, 1<<30),
		PollInterval:       env.Duration("BMCIS_SEARCH_POLL_INTERVAL", d.PollInterval, 50*time.Millisecond, time.Minute),
		SweepInterval:      env.Duration("BMCIS_SEARCH_SWEEP_INTERVAL", d.SweepInterval, time.Second, time.Hour),
		TextInDatabase:     env.Enum("BMCIS_SEARCH_CHUNK_TEXT", "memory", "memory", "database") == "database",
		TextCacheChunks:    env.Int("BMCIS_SEARCH_TEXT_CACHE_CHUNKS", d.TextCacheChunks, 0, 10_000_000),
		ExactVectorMaxRows: env.Int("BMCIS_SEARCH_EXACT_VECTOR_MAX_ROWS", d.ExactVectorMaxRows, 0, 100_000_000),
		ClassVectorsMB:     env.Int("BMCIS_SEARCH_CLASS_VECTORS_MB", d.ClassVectorsMB, 0, 1<<20),
		VectorMirrorMB:     env.Int("BMCIS_SEARCH_VECTOR_MIRROR_MB", d.VectorMirrorMB, 0, 1<<20),
		DedupWindow:        d.DedupWindow,
		Snapshot: snapshot.Config{
			Mode:           env.Enum("BMCIS_SEARCH_SNAPSHOT", d.Snapshot.Mode, snapshot.ModeReadWrite, snapshot.ModeRead, snapshot.ModeOff),
			ChangeFraction: env.Float("BMCIS_SEARCH_SNAPSHOT_CHANGE_FRACTION", d.Snapshot.ChangeFraction, 0, 1),
			Quiet:          env.Duration("BMCIS_SEARCH_SNAPSHOT_QUIET", d.Snapshot.Quiet, 0, 24*time.Hour),
			CheckInterval:  env.Duration("BMCIS_SEARCH_SNAPSHOT_CHECK_INTERVAL", d.Snapshot.CheckInterval, time.Second, 24*time.Hour),
		},
		SourcesRunner:    env.Enum("BMCIS_SEARCH_SOURCES_RUNNER", "off", "on", "off") == "on",
		SourcesPoll:      env.Duration("BMCIS_SEARCH_SOURCES_POLL", d.SourcesPoll, time.Second, time.Hour),
		SourceRunTimeout: env.Duration("BMCIS_SEARCH_SOURCES_RUN_TIMEOUT", d.SourceRunTimeout, 10*time.Second, 24*time.Hour),
		Sources: sources.Env{
			Limits: sources.Limits{
				MaxFileBytes:  int64(env.Int("BMCIS_SEARCH_SOURCES_MAX_FILE_BYTES", int(d.Sources.Limits.MaxFileBytes), 1024, 1<<30)),
				MaxTotalBytes: int64(env.Int("BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES", int(d.Sources.Limits.MaxTotalBytes), 1<<20, 1<<40)),
				MaxFiles:      env.Int("BMCIS_SEARCH_SOURCES_MAX_FILES", d.Sources.Limits.MaxFiles, 1, 10_000_000),
				MaxDepth:      env.Int("BMCIS_SEARCH_SOURCES_MAX_DEPTH", d.Sources.Limits.MaxDepth, 0, 100),
				RequestEvery:  env.Duration("BMCIS_SEARCH_SOURCES_REQUEST_INTERVAL", d.Sources.Limits.RequestEvery, 0, time.Minute),
				Timeout:       env.Duration("BMCIS_SEARCH_SOURCES_REQUEST_TIMEOUT", d.Sources.Limits.Timeout, time.Second, 10*time.Minute),
			},
			AllowPrivate:  env.Bool("BMCIS_SEARCH_SOURCES_ALLOW_PRIVATE", false),
			AllowLoopback: env.Bool("BMCIS_SEARCH_SOURCES_ALLOW_LOOPBACK", false),
			FolderRoot:    env.String("BMCIS_SEARCH_SOURCES_FOLDER_ROOT", ""),
			SecretsDir:    env.String("BMCIS_SEARCH_SOURCES_SECRETS_DIR", sources.DefaultSecretsDir),
		},
		Fusion: fusion.Options{
			K:            env.Float("BMCIS_SEARCH_RRF_K", 0, 1, 1000),
			BM25Weight:   env.Float("BMCIS_SEARCH_BM25_WEIGHT", 0, 0, 100),
			VectorWeight: env.Float("BMCIS_SEARCH_VECTOR_WEIGHT", 0, 0, 100),
			Method:       env.Enum("BMCIS_SEARCH_FUSION", "", fusion.MethodRRF, fusion.MethodConvex),
			Alpha:        env.Float("BMCIS_SEARCH_CONVEX_ALPHA", 0, 0, 1),
		},
	}
	// Unset keeps the preset (0 in Fusion); 0 turns feedback off (-1).
	switch fb := env.Int("BMCIS_SEARCH_VECTOR_FEEDBACK_CHUNKS", -1, 0, 50); fb {
	case -1:
	case 0:
		c.Fusion.FeedbackChunks = -1
	default:
		c.Fusion.FeedbackChunks = fb
	}
	return c
}

// engine is the ranking part of the configuration.
func (c Config) engine() engine.Config {
	return engine.Config{
		Candidates: c.Candidates, EfSearch: c.EfSearch, MaxScanTuples: c.MaxScanTuples, ExactVectorMaxRows: c.ExactVectorMaxRows,
		ClassVectorBytes: c.ClassVectorsMB << 20, VectorMirrorBytes: c.VectorMirrorMB << 20, DBTimeout: c.DBTimeout, DedupWindow: c.DedupWindow, Fusion: c.Fusion,
		Provider: c.Embedding.Provider, CacheSize: c.CacheSize, CacheTTL: c.CacheTTL,
	}
}

// rankingSettings is a short hash of what decides a search answer besides
// the data and the live model (IndexVersion.settings): the retrievers'
// depths, the vector paths' bounds (an approximate path may rank
// otherwise), the fusion and the dedup window. A redeploy that changes
// one is a new index version, so answers kept by the adapter under the old
// settings are not used again. So is the build's commit: code ranks too,
// and replicas of two builds during a rollout then keep fewer answers
// rather than replay the old build's. The model is in the version already;
// timeouts, cache sizes and text placement change no answer.
func (c Config) rankingSettings() string {
	e := c.engine()
	h := sha256.Sum256(fmt.Appendf(nil, "%d|%d|%d|%d|%d|%d|%d|%+v|%s|%s",
		e.Candidates, e.EfSearch, e.MaxScanTuples, e.ExactVectorMaxRows, e.ClassVectorBytes, e.VectorMirrorBytes,
		e.DedupWindow, e.Fusion, e.Provider, version.Commit))
	return hex.EncodeToString(h[:6])
}
