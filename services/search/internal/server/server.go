// Package server implements searchv1.SearchService: it validates requests,
// maps them onto the parts of a replica and maps their answers to protos.
// The parts: ingestion into PostgreSQL (ingest, store), the change-feed
// follower that keeps the in-memory index fresh (follower), the query
// engine (engine), and the embedding-sweep scheduler (embedding). Open wires
// them. See docs/SEARCH.md for the design and ../../README.md for the flow.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/engine"
	"github.com/bmcis/knowledge/services/search/internal/follower"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/snapshot"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Server answers SearchService calls.
type Server struct {
	searchv1.UnimplementedSearchServiceServer

	cfg    Config
	st     *store.Store
	ix     *index.Index
	emb    *embedding.Manager
	ck     *chunker.Chunker
	engine ranker
	feed   replicaFeed
	texts  *textSource
	sweeps *embedding.Scheduler
	keeper *snapshot.Keeper
	m      *metrics
	// versions is the index version WatchIndex streams push.
	versions *versionFeed
	// settings is cfg.rankingSettings(), in every version published.
	settings string
	// sourcesKick wakes the scheduled-sources runner.
	sourcesKick chan struct{}
	log         *slog.Logger
}

// ranker is what the gRPC layer asks of the engine.
type ranker interface {
	Search(ctx context.Context, q engine.Query) (rk *engine.Ranked, cacheHit bool, dbTime time.Duration, err error)
	// Run keeps its background work until ctx ends.
	Run(ctx context.Context)
}

// replicaFeed is what the gRPC layer asks of the change-feed follower.
type replicaFeed interface {
	Run(ctx context.Context)
	Sync(ctx context.Context) (bool, error)
	WaitApplied(ctx context.Context, gen int64) error
	Listening() bool
	VectorsGeneration() int64
}

// Open checks that stored vectors fit the configured embedder (refusing to
// start otherwise, naming the fix), loads the active model and builds the
// in-memory index from PostgreSQL.
func Open(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	st := store.New(pool)
	an := analysis.NewEnglish()
	emb, err := embedding.New(st, cfg.Embedding, an, log)
	if err != nil {
		return nil, err
	}
	if err := emb.CheckCompatible(ctx); err != nil {
		if !errors.Is(err, embedding.ErrIncompatible) {
			return nil, err
		}
		// Start anyway, vector side off (the change feed finds the active
		// model unusable; sweeps write nothing): the fix is a Reindex
		// call on a replica with the new configuration, this one.
		log.Error("stored embeddings do not match this replica's embedder: vector search is off until a reindex", "error", err.Error())
	}
	ck, err := chunker.NewDefault()
	if err != nil {
		return nil, fmt.Errorf("chunker: %w", err)
	}
	if cfg.Candidates < 100 {
		cfg.Candidates = 100
	}
	cfg.EfSearch = max(cfg.EfSearch, cfg.Candidates)
	t0 := time.Now()
	params, ixOpts := bm25.DefaultParams(), index.Options{TextInDatabase: cfg.TextInDatabase}
	ix, started := snapshot.Load(ctx, st, an, params, ixOpts, cfg.Snapshot)
	if ix == nil {
		if cfg.Snapshot.Mode != snapshot.ModeOff {
			log.Info("index snapshot not used; building the index from the chunks", "reason", started.Reason)
		}
		ix = index.NewWithOptions(an, params, ixOpts)
	}
	s := &Server{cfg: cfg, st: st, emb: emb, ck: ck, texts: newTextSource(st, cfg.TextCacheChunks), ix: ix,
		sourcesKick: make(chan struct{}, 1), log: log, versions: newVersionFeed(), settings: cfg.rankingSettings()}
	var eng *engine.Engine
	s.m = newMetrics(reg, func() engineGauges { return eng })
	if err := registerStateMetrics(reg, emb, st, cfg.DBTimeout, log); err != nil {
		return nil, err
	}
	// The follower calls the engine only once it syncs, below.
	fl := follower.New(follower.Config{Index: s.ix, Store: st, Embedding: emb, Log: log,
		PollInterval: cfg.PollInterval, Applied: s.m.feedApplied,
		VectorsRead: func(gen int64) { eng.VectorsRead(gen) },
		Changed: func(st index.Stats) {
			eng.Invalidate()
			// After the invalidation: a watcher told of the change
			// never reads a ranking cached before it.
			s.publishVersion()
			s.m.setIndex(st)
		}})
	s.feed = fl
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "bmcis_search_feed_listening",
		Help: "1 while this replica's change-feed listener is connected to PostgreSQL; the vector mirror answers only then.",
	}, func() float64 {
		if fl.Listening() {
			return 1
		}
		return 0
	})); err != nil {
		return nil, err
	}
	ecfg := cfg.engine()
	ecfg.Log = log
	ecfg.FeedLive = fl.Listening
	eng = engine.New(ecfg, s.ix, st, emb, engine.Metrics{Stage: s.m.stage, Cache: s.m.cache, VectorPath: s.m.vectorPath})
	s.engine = eng
	s.keeper = snapshot.NewKeeper(cfg.Snapshot, st, s.ix, fl.Freeze, log, s.m.snapshot)
	s.sweeps = embedding.NewScheduler(emb, cfg.SweepInterval, cfg.DBTimeout, s.m.embedded, s.m.trainings, func(ctx context.Context) error {
		_, err := s.feed.Sync(ctx)
		return err
	}, log)
	s.sweeps.WatchFreshness(s.ix)

	// From a snapshot this catches up on the changes after its generation;
	// otherwise it is the full load.
	if _, err := s.feed.Sync(ctx); err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	if started.FromSnapshot && s.ix.Generation() > started.Snapshot.Generation {
		s.ix.Trim()
	}
	// The first sync calls Changed only when it changed something.
	s.publishVersion()
	// The load's row buffers and analyzed terms are garbage now.
	debug.FreeOSMemory()
	took := time.Since(t0)
	stats := s.ix.Stats()
	s.m.setIndex(stats)
	s.m.setStart(started, took)
	provider, model, dims := emb.Describe()
	attrs := []any{"documents", stats.Documents, "chunks", stats.Chunks, "terms", stats.Terms,
		"generation", stats.Generation, "bm25_bytes", stats.BM25Bytes, "text_bytes", stats.TextBytes,
		"seconds", took.Seconds(), "embedder", provider, "model", model, "dimensions", dims}
	if started.FromSnapshot {
		attrs = append(attrs, "source", "snapshot", "snapshot_generation", started.Snapshot.Generation,
			"snapshot_bytes", started.Snapshot.Bytes, "snapshot_read_seconds", started.Read.Seconds(), "text_fill_seconds", started.Text.Seconds())
	} else {
		attrs = append(attrs, "source", "database")
	}
	log.Info("index built", attrs...)
	return s, nil
}

// Run follows the change feed, embeds chunks left without a vector and,
// when configured, runs scheduled sources, until ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(6)
	go func() {
		defer wg.Done()
		s.engine.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.keeper.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.runSources(ctx)
	}()
	go func() {
		defer wg.Done()
		s.refreshMatcher(ctx)
	}()
	go func() {
		defer wg.Done()
		s.feed.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.sweeps.Run(ctx)
	}()
	wg.Wait()
}

// matcherRefresh is how often the name matcher checks the graph version
// (one row read) besides the graph's notifications: the bound on how long a
// missed notification leaves mentions a graph version behind.
const matcherRefresh = 5 * time.Second

// refreshMatcher builds the name matcher at start and keeps it in step with
// the graph, so a query's vendors never wait for a build.
func (s *Server) refreshMatcher(ctx context.Context) {
	t := time.NewTicker(matcherRefresh)
	defer t.Stop()
	for {
		if err := s.st.RefreshMatcher(ctx); err != nil && ctx.Err() == nil {
			logging.FromContext(ctx).WarnContext(ctx, "name matcher not refreshed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.st.GraphChanged():
		}
	}
}

// Listening reports whether the change-feed listener is connected.
func (s *Server) Listening() bool { return s.feed.Listening() }

// Reads counts the store's per-answer lookups (chunk text, mentions): what
// a request's read mask spares.
func (s *Server) Reads() *store.ReadCounts { return s.st.Reads() }

// dbCtx bounds one database call of a request.
func (s *Server) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.DBTimeout)
}

// dbError turns a database call's failure into what the caller should see
// (see pg.CallError).
func dbError(ctx context.Context, err error) error { return pg.CallError(ctx, err) }
