// Package engine ranks a query: BM25 over this replica's in-memory index and
// the nearest vectors (from the replica's vector mirror or held class
// vectors while they are complete, otherwise pgvector), fusion of the two,
// and the whole ranked list cached so later pages cost no database work;
// near duplicates are flagged for the page cut from it (Ranked.Duplicates).
// It knows nothing of gRPC: the server
// validates requests, resolves categories and maps the list to protos.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/lrucache"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Mode is which retrievers rank a query.
type Mode int

// The retrieval modes.
const (
	Hybrid Mode = iota
	BM25
	Vector
)

// Errors of a vector-mode query; the server gives them their status codes.
var (
	// ErrEmbedderUnavailable: the query could not be embedded (hybrid
	// queries degrade to BM25 instead).
	ErrEmbedderUnavailable = errors.New("the embedding provider is unavailable")
	// ErrNoModel: no embedding model is active yet.
	ErrNoModel = errors.New("no embedding model is active yet")
	// ErrModelChanging: another model became active and this replica has
	// not loaded it within a short wait; retryable.
	ErrModelChanging = errors.New("the embedding model is being switched")
)

// ModelUnusableError: a model is active but this replica cannot load it;
// Reason says why in words fit for any caller (QueryEmbedder.Unusable).
type ModelUnusableError struct{ Reason string }

func (e *ModelUnusableError) Error() string {
	return "vector search is off on this replica: the active embedding model " + e.Reason
}

// Config is what ranking needs of the service configuration.
type Config struct {
	// Candidates is how many chunks each retriever contributes.
	Candidates int
	// EfSearch and MaxScanTuples tune the HNSW scan (store.VectorQuery).
	EfSearch      int
	MaxScanTuples int
	// ExactVectorMaxRows: category filters matching at most this many
	// chunks are scored exactly over their rows (0: never).
	ExactVectorMaxRows int
	// ClassVectorBytes bounds the vectors held for restricted callers'
	// exact scans (classVectors; 0: none are held).
	ClassVectorBytes int
	// VectorMirrorBytes bounds the in-memory HNSW graph of every stored
	// vector (vectorMirror; 0: none, every query walks pgvector's index).
	VectorMirrorBytes int
	// FeedLive reports whether the change feed's listener is connected
	// (nil: always). The vector mirror answers only then: it is as fresh as
	// the feed tells the engine, and a feed that cannot hear notifications
	// tells it late.
	FeedLive func() bool
	// Log receives the mirror's background reports (nil: slog.Default).
	Log *slog.Logger
	// DBTimeout bounds each database call of a search.
	DBTimeout time.Duration
	// DedupWindow is how many top results are compared by embedding cosine.
	DedupWindow int
	// Fusion overrides the active provider's RRF preset field by field
	// (zero fields keep the preset).
	Fusion fusion.Options
	// Provider is the configured embedder, the preset used while no model
	// has answered a query yet.
	Provider string
	// CacheSize (0 disables) and CacheTTL bound the ranked-list cache.
	CacheSize int
	CacheTTL  time.Duration
}

// Metrics are the engine's instruments, registered by the caller.
type Metrics struct {
	// Stage observes seconds per stage (bm25, embed, feedback, vector, dedup_vectors, dedup).
	Stage *prometheus.HistogramVec
	// Cache counts cache lookups by result (hit, miss).
	Cache *prometheus.CounterVec
	// VectorPath counts vector sides by what answered them: mirror (the
	// in-memory graph), held (restricted callers' held vectors) or
	// pgvector.
	VectorPath *prometheus.CounterVec
}

// Vectors is the database side of ranking (store.Store).
type Vectors interface {
	VectorSearch(ctx context.Context, q store.VectorQuery) ([]store.VectorHit, error)
	QueuedSearch(ctx context.Context, q store.VectorQuery) ([]store.VectorHit, int64, error)
	ClassVectors(ctx context.Context, classes []store.Class) (store.ClassVectorsRead, error)
	Embeddings(ctx context.Context, ids []int64) (map[int64][]float32, error)
	MirrorStore
}

// QueryEmbedder embeds queries with the active model (embedding.Manager).
type QueryEmbedder interface {
	EmbedQuery(ctx context.Context, q string) ([]float32, *embedding.Active, error)
	Current() *embedding.Active
	// Changed is closed when the model in use next changes.
	Changed() <-chan struct{}
	// Unusable says why the active model could not be loaded, for callers
	// ("": it was, or none is active).
	Unusable() string
}

// Engine is safe for concurrent use.
type Engine struct {
	cfg     Config
	ix      *index.Index
	st      Vectors
	emb     QueryEmbedder
	cache   *lrucache.Cache[string, *Ranked]
	classes *classVectors // nil: none held
	mirror  *vectorMirror // nil: off
	m       Metrics
}

// New returns an engine over a replica's index, the stored vectors and the
// query embedder.
func New(cfg Config, ix *index.Index, st Vectors, emb QueryEmbedder, m Metrics) *Engine {
	return &Engine{cfg: cfg, ix: ix, st: st, emb: emb, m: m, classes: newClassVectors(cfg.ClassVectorBytes),
		mirror: newVectorMirror(st, cfg.VectorMirrorBytes, ix.LiveChunks, cfg.Log), cache: lrucache.New[string, *Ranked](cfg.CacheSize, cfg.CacheTTL)}
}

// Query is one validated search.
type Query struct {
	// Text is the query after analysis.NormalizeQuery.
	Text string
	Mode Mode
	// Categories are stored category names, sorted and distinct; empty
	// means all.
	Categories []string
	// NoCache ranks afresh and stores nothing.
	NoCache bool
	// Owner partitions the cache by caller (platform/cacheowner): a hit is
	// always one this caller's own search filled.
	Owner string
	// Access is the caller's access set (platform/access), sorted; nil
	// means every document. Both retrievers filter on it while they
	// collect candidates, and it is part of the cache key: a list ranked
	// for one set is never served to another.
	Access []string
}

// Ranked is a query's whole ranked candidate list: everything a page
// needs, chunk records included, so a page is cut without database work.
type Ranked struct {
	// QueryTerms are the query's words as typed, lower-cased.
	QueryTerms []string
	Results    []Result
	// degraded marks a hybrid list ranked by BM25 alone because the query
	// could not be embedded, or the model changed under it (vectorRetrying);
	// it is never cached, so recovery shows at once.
	degraded bool
	// qts is what MatchedWords maps matched terms back to words with: a
	// list holds what both retrievers returned (up to twice Candidates)
	// and a page shows a few, so the words are found for those only.
	qts []analysis.QueryTerm
	// dups flag near-duplicates for the results a page shows only
	// (Duplicates): a page shows a few of a list's results, and every
	// pair of the window was compared for all of them.
	dups fusion.Duplicates
}

// Result is one ranked chunk: the replica's record (not a copy) with its
// scores.
type Result struct {
	Chunk *index.Chunk
	fusion.Result
	// terms are the analyzed query terms that occur in the chunk, found
	// when the list was ranked (BM25's own, or the index's for a chunk
	// BM25 did not return), so every page of a kept list reads them as
	// of its ranking.
	terms []string
}

// MatchedWords returns the query words, as typed, that occur in result i's
// chunk.
func (rk *Ranked) MatchedWords(i int) []string {
	return analysis.OriginalWords(rk.qts, rk.Results[i].terms)
}

// Duplicates returns whether result i duplicates a higher-ranked result
// of the list, and those results' chunk ids in ranked order
// (fusion.Duplicates). Concurrent pages of one list may call it.
func (rk *Ranked) Duplicates(i int) (isDuplicate bool, similar []int64) {
	return rk.dups.Of(i, func(j int) fusion.DupKey {
		c := rk.Results[j].Chunk
		return fusion.DupKey{ChunkID: c.ChunkID, Hash: c.Hash}
	})
}

// Search returns the ranked list of q, from the cache when it holds it,
// and how long the database calls of an uncached ranking took.
func (e *Engine) Search(ctx context.Context, q Query) (rk *Ranked, cacheHit bool, dbTime time.Duration, err error) {
	set := "*" // unrestricted: no set is spelled so
	if q.Access != nil {
		set = access.Key(q.Access)
	}
	key := q.Owner + "\x00" + set + "\x00" + strconv.Itoa(int(q.Mode)) + "\x00" + strings.Join(q.Categories, "\x01") + "\x00" + q.Text
	epoch := e.cache.Epoch()
	if !q.NoCache {
		if rk, ok := e.cache.Get(key); ok {
			e.m.Cache.WithLabelValues("hit").Inc()
			return rk, true, 0, nil
		}
		e.m.Cache.WithLabelValues("miss").Inc()
	}
	rk, dbTime, err = e.rank(ctx, q)
	if err != nil {
		return nil, false, dbTime, err
	}
	if !q.NoCache && !rk.degraded {
		e.cache.Put(key, rk, epoch)
	}
	return rk, false, dbTime, nil
}

// VectorsRead records a vectors generation the change feed read: the
// vector mirror does not answer while it is older.
func (e *Engine) VectorsRead(generation int64) {
	if e.mirror != nil {
		e.mirror.saw(generation)
	}
}

// Invalidate drops every cached list; the replica calls it whenever
// anything a ranking depends on changed (documents, vectors, the model).
func (e *Engine) Invalidate() {
	e.cache.Invalidate()
	if e.classes != nil {
		e.classes.invalidate()
	}
	if e.mirror != nil {
		// Documents deleted or rewritten leave the graph; a new model
		// starts a new one before its first query.
		dims := 0
		if cur := e.emb.Current(); cur != nil {
			dims = cur.Dims
		}
		e.mirror.kick(dims)
	}
}

// Run keeps the engine's background work (the vector mirror's catch-ups)
// until ctx ends, then stops it and waits for it.
func (e *Engine) Run(ctx context.Context) {
	<-ctx.Done()
	if e.mirror != nil {
		e.mirror.close()
	}
}

// MirrorBuilding reports whether the vector mirror is reading or building
// a whole graph.
func (e *Engine) MirrorBuilding() bool { return e.mirror != nil && e.mirror.building.Load() }

// MirrorCodesOnly reports whether the graph queries use keeps int8 codes
// only (hnsw.Config.CodesOnly).
func (e *Engine) MirrorCodesOnly() bool {
	if e.mirror == nil {
		return false
	}
	v := e.mirror.view.Load()
	return v != nil && v.g.CodesOnly()
}

// MirroredVectors is the number of vectors the in-memory graph holds.
func (e *Engine) MirroredVectors() int {
	if e.mirror == nil {
		return 0
	}
	return e.mirror.held()
}

// readScope is how a query's retrievers filter what a caller may read.
type readScope struct {
	cats []string
	// access is the caller's set, or nil when it hides nothing in scope.
	access []string
	// classes, with exact and access, are the access keys the caller may
	// read (store.VectorQuery.Classes), within cats.
	classes []string
	// pairs are the readable (category, access key) classes, holding
	// rows chunks.
	pairs []store.Class
	rows  int
	exact bool
	// none: the caller may read nothing in scope.
	none bool
}

// maxExactClasses bounds the (category, access class) pairs an exact
// scan looks up in chunks_category_vectors: one index descent each.
const maxExactClasses = 256

// readScope decides, from what this replica has loaded, how the
// retrievers filter for the access set (nil: unrestricted) within the
// stored categories cats (all when empty). When the set hides nothing
// there, no filter is applied at all: an always-true filter would still
// send the HNSW query down pgvector's slower iterative scan. When it may
// read few chunks, the vector side scores exactly those, found by class.
// Rows the database holds that this replica has not loaded, or whose list
// changed since its last poll, may be read or skipped by the retrievers
// either way: rank tests every candidate against the loaded records, so
// neither can show.
func (e *Engine) readScope(cats, set []string) readScope {
	s := readScope{cats: cats, access: set}
	if set != nil {
		r := e.ix.Readable(cats, set)
		switch {
		case r.Chunks == r.InScope:
			s.access = nil
		case r.Chunks == 0:
			s.none = true
			return s
		case e.cfg.ExactVectorMaxRows > 0 && r.Chunks <= e.cfg.ExactVectorMaxRows &&
			len(r.Categories)*len(r.Keys) <= maxExactClasses:
			s.cats, s.classes, s.pairs, s.rows, s.exact = r.Categories, r.Keys, r.Classes, r.Chunks, true
			return s
		default:
			return s
		}
	}
	s.exact = e.exactScan(s.cats)
	return s
}

// exactScan chooses exact distances over a filter's rows when it selects
// few enough chunks: their cost grows with the rows matched, while an HNSW
// iterative scan's grows as the filter gets more selective (it walks the
// graph past every row the filter rejects). Measured in docs/BENCHMARKS.md.
func (e *Engine) exactScan(cats []string) bool {
	if len(cats) == 0 || e.cfg.ExactVectorMaxRows <= 0 {
		return false
	}
	in, _ := e.ix.ChunksIn(cats)
	return in <= e.cfg.ExactVectorMaxRows
}

// HeldClassVectors is the number of vectors held for restricted callers.
func (e *Engine) HeldClassVectors() int {
	if e.classes == nil {
		return 0
	}
	return e.classes.held()
}

// CachedLists is the number of ranked lists held.
func (e *Engine) CachedLists() int { return e.cache.Len() }

// fusionFor returns the fusion options for the active model's provider:
// its preset (for builtin, the fine-tuned or the plain LSA one, from the
// active model), with any configured field overriding it.
func (c Config) fusionFor(provider string, active *embedding.Active) fusion.Options {
	o := fusion.DefaultOptions()
	if provider == embedding.ProviderBuiltin {
		o = fusion.BuiltinOptions()
		if active != nil && active.Builtin != nil && !active.Builtin.FineTuned() {
			o = fusion.BuiltinLSAOptions()
		}
	}
	if c.Fusion.K > 0 {
		o.K = c.Fusion.K
	}
	if c.Fusion.BM25Weight > 0 {
		o.BM25Weight = c.Fusion.BM25Weight
	}
	if c.Fusion.VectorWeight > 0 {
		o.VectorWeight = c.Fusion.VectorWeight
	}
	if c.Fusion.Method != "" {
		o.Method = c.Fusion.Method
	}
	if c.Fusion.Alpha > 0 {
		o.Alpha = c.Fusion.Alpha
	}
	if c.Fusion.FeedbackChunks != 0 {
		// Negative: configured off.
		o.FeedbackChunks = max(c.Fusion.FeedbackChunks, 0)
	}
	if c.Fusion.FeedbackWeight > 0 {
		o.FeedbackWeight = c.Fusion.FeedbackWeight
	}
	return o
}
