// Package server implements searchv1.SearchService: ingestion into
// PostgreSQL, an in-memory BM25 index per replica kept fresh from the
// change feed, pgvector nearest neighbours, RRF fusion, and a ranked-list
// cache. See docs/SEARCH.md for the design.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/cache"
	"github.com/bmcis/knowledge/services/search/internal/chunker"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Server answers SearchService calls.
type Server struct {
	searchv1.UnimplementedSearchServiceServer

	cfg   Config
	log   *slog.Logger
	st    *store.Store
	ix    *index.Index
	emb   *embedding.Manager
	ck    *chunker.Chunker
	cache *cache.Cache[*ranked]
	m     *metrics

	syncMu    sync.Mutex
	kick      chan struct{}
	vecGen    atomic.Int64
	listening atomic.Bool
	ingesting atomic.Int32
	sweepMu   sync.Mutex
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
		return nil, err
	}
	ck, err := chunker.NewDefault()
	if err != nil {
		return nil, fmt.Errorf("chunker: %w", err)
	}
	if cfg.Candidates < 100 {
		cfg.Candidates = 100
	}
	cfg.EfSearch = max(cfg.EfSearch, cfg.Candidates)
	s := &Server{
		cfg: cfg, log: log, st: st, emb: emb, ck: ck,
		ix:    index.New(an, bm25.DefaultParams()),
		cache: cache.New[*ranked](cfg.CacheSize, cfg.CacheTTL),
		kick:  make(chan struct{}, 1),
	}
	s.m = newMetrics(reg, func() float64 { return float64(s.cache.Len()) })

	t0 := time.Now()
	if _, err := s.syncOnce(ctx); err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	// The load's row buffers and analyzed terms are garbage now.
	debug.FreeOSMemory()
	stats := s.ix.Stats()
	provider, model, dims := emb.Describe()
	log.Info("index built", "documents", stats.Documents, "chunks", stats.Chunks, "terms", stats.Terms,
		"generation", stats.Generation, "bm25_bytes", stats.BM25Bytes, "text_bytes", stats.TextBytes,
		"seconds", time.Since(t0).Seconds(), "embedder", provider, "model", model, "dimensions", dims)
	return s, nil
}

// Run follows the change feed (LISTEN plus a poll every PollInterval) and
// embeds chunks left without a vector, until ctx ends.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		s.st.Listen(ctx, s.log, s.Kick, func(up bool) { s.listening.Store(up) })
	}()
	go func() {
		defer wg.Done()
		s.follow(ctx)
	}()
	go func() {
		defer wg.Done()
		s.sweepLoop(ctx)
	}()
	wg.Wait()
}

// Listening reports whether the change-feed listener is connected.
func (s *Server) Listening() bool { return s.listening.Load() }

// Kick asks the feed follower to look for changes now.
func (s *Server) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Server) follow(ctx context.Context) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := s.syncOnce(sctx)
		cancel()
		if err != nil && ctx.Err() == nil && time.Since(lastErr) > 10*time.Second {
			lastErr = time.Now()
			s.log.Warn("change feed poll failed", "error", err.Error())
		}
	}
}

// syncOnce applies every change committed after the index's generation, and
// reloads the model or drops cached lists when embeddings changed.
func (s *Server) syncOnce(ctx context.Context) (bool, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	since := s.ix.Generation()
	var chunks []store.Chunk
	ch, err := s.st.ChangesSince(ctx, since, func(c store.Chunk) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		return false, err
	}
	changed := false
	if len(ch.Documents) > 0 || len(ch.Tombstones) > 0 {
		b := &index.Batch{Generation: ch.State.Generation, LastChange: ch.State.LastChange, Documents: ch.Documents, Chunks: chunks}
		for _, t := range ch.Tombstones {
			b.Deleted = append(b.Deleted, t.DocumentID)
		}
		s.ix.Apply(b)
		s.m.feedApplied.Add(float64(len(ch.Documents) + len(ch.Tombstones)))
		changed = true
	} else {
		s.ix.SetPosition(ch.State.Generation, ch.State.LastChange)
	}
	if s.vecGen.Swap(ch.State.VectorsGeneration) != ch.State.VectorsGeneration {
		changed = true
	}
	if mc, err := s.emb.Sync(ctx, ch.State.ActiveModel); err != nil {
		s.log.Error("active embedding model not usable; vector search is off", "error", err.Error())
		changed = changed || mc
	} else if mc {
		changed = true
		_, model, _ := s.emb.Describe()
		s.log.Info("embedding model loaded", "model", model)
	}
	if changed {
		s.cache.Invalidate()
		s.m.setIndex(s.ix.Stats())
	}
	return changed, nil
}

// waitApplied brings the index up to at least generation gen.
func (s *Server) waitApplied(ctx context.Context, gen int64) error {
	for s.ix.Generation() < gen {
		if _, err := s.syncOnce(ctx); err != nil {
			return err
		}
		if s.ix.Generation() < gen {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

func (s *Server) sweepLoop(ctx context.Context) {
	// At start: embed whatever a crashed or interrupted ingestion left, with
	// the active model. It never trains: a stream starting now would have the
	// model fixed on the first few documents it wrote. Training happens when
	// an ingestion stream ends (on everything stored) or on `bmcisctl reindex`.
	s.sweep(ctx, embedding.SweepOptions{Wait: false, Train: false, Bulk: true})
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.ingesting.Load() > 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
		pending, err := s.st.HasUnembedded(pctx)
		if err == nil && !pending && s.emb.Current() != nil {
			var ok bool
			ok, err = s.st.VectorIndexExists(pctx)
			pending = !ok
		}
		cancel()
		if err != nil || !pending {
			continue
		}
		// Never trains: a stream running on another replica may still be
		// adding the corpus the model should be trained on.
		s.sweep(ctx, embedding.SweepOptions{Wait: false, Train: false, Bulk: false})
	}
}

// sweep runs one embedding sweep and publishes its result locally.
func (s *Server) sweep(ctx context.Context, opt embedding.SweepOptions) (embedding.SweepReport, error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	rep, err := s.emb.Sweep(ctx, opt)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("embedding sweep failed", "error", err.Error())
		}
		return rep, err
	}
	if rep.Trained {
		// Training's dense matrices are garbage now; hand the pages back.
		debug.FreeOSMemory()
	}
	if rep.Embedded > 0 || rep.Trained || rep.Rebuilt {
		s.m.embedded.Add(float64(rep.Embedded))
		s.log.Info("embedding sweep", "model", rep.Model, "embedded", rep.Embedded, "trained", rep.Trained,
			"trained_on", rep.TrainedOn, "index_rebuilt", rep.Rebuilt, "train_s", rep.TrainTime.Seconds(),
			"embed_s", rep.EmbedTime.Seconds(), "write_s", rep.WriteTime.Seconds(), "index_s", rep.IndexTime.Seconds())
	}
	if _, err := s.syncOnce(ctx); err != nil {
		return rep, err
	}
	return rep, nil
}

// dbCtx bounds one database call of a request.
func (s *Server) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.DBTimeout)
}

// dbError turns a database call's failure into what the caller should see
// (see pg.CallError).
func dbError(ctx context.Context, err error) error { return pg.CallError(ctx, err) }
