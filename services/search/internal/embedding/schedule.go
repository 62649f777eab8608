package embedding

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Scheduler decides when a replica runs embedding sweeps: one at a time;
// at start; every Interval while chunks lack a vector (or the vector index
// is missing) and no ingestion stream of this replica runs; and when a
// stream ends (Sweep). Alongside, every Interval, it merges queued vectors
// into the HNSW index (store.MergeQueued) until the queue is empty:
// ingestion never waits for it, and back-to-back streams do not compete
// with it for the cores.
type Scheduler struct {
	m        *Manager
	log      *slog.Logger
	interval time.Duration
	timeout  time.Duration
	embedded prometheus.Counter
	// trainings counts builtin trainings by result: "new" (a model to
	// embed with) or "unchanged" (the active model again).
	trainings *prometheus.CounterVec
	after     func(context.Context) error

	mu      sync.Mutex // one sweep at a time
	streams atomic.Int32

	// Freshness (freshness.go): the replica's indexed terms, a nudge after
	// each stream, and whether a retrain runs.
	src        TermSource
	kick       chan struct{}
	retraining atomic.Bool
	// lastRetrain is the chunk count of the last retrain this replica ran:
	// it never retrains twice on an unchanged corpus.
	lastRetrain int
}

// NewScheduler returns a scheduler of m's sweeps. dbTimeout bounds its
// checks for pending work; embedded counts the chunks it embedded and
// trainings the models it trained (label result); after runs once a sweep
// succeeded, to publish its result locally.
func NewScheduler(m *Manager, interval, dbTimeout time.Duration, embedded prometheus.Counter, trainings *prometheus.CounterVec,
	after func(context.Context) error, log *slog.Logger) *Scheduler {
	return &Scheduler{m: m, log: log, interval: interval, timeout: dbTimeout, embedded: embedded, trainings: trainings, after: after,
		kick: make(chan struct{}, 1)}
}

// WatchFreshness makes Run retrain the builtin model when the corpus in src
// has outgrown it (the rule in freshness.go). Call before Run.
func (s *Scheduler) WatchFreshness(src TermSource) { s.src = src }

// Kick asks Run to check freshness now (after an ingestion stream ended)
// rather than at its next tick.
func (s *Scheduler) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Freshness assesses the active model against the replica's corpus now.
func (s *Scheduler) Freshness() Freshness {
	if s.src == nil {
		return Freshness{Coverage: 1}
	}
	f := s.m.Assess(s.src)
	f.Running = s.retraining.Load()
	return f
}

// maybeRetrain retrains the builtin model in the background of searches
// when the rule asks for it: a new model is trained on the stored chunks,
// every chunk is re-embedded into a staging table, and vectors and the
// active model switch in one transaction (Sweep with Reindex); searches
// keep using the old model until then. RetrainOf makes a replica that lost
// the race to another one skip.
func (s *Scheduler) maybeRetrain(ctx context.Context) {
	if s.src == nil || s.m.cfg.Provider != ProviderBuiltin {
		return
	}
	f := s.m.Assess(s.src)
	if !f.Pending || f.Chunks == s.lastRetrain {
		return
	}
	s.lastRetrain = f.Chunks
	s.retraining.Store(true)
	defer s.retraining.Store(false)
	s.log.Info("builtin embedder outgrown; retraining", "reason", f.Reason, "chunks", f.Chunks,
		"trained_on", f.TrainedOn, "coverage", f.Coverage)
	t0 := time.Now()
	rep, err := s.Sweep(ctx, SweepOptions{Wait: false, Reindex: true, Bulk: true, RetrainOf: f.ModelRow})
	if err == nil && rep.Trained && !rep.Unchanged { // an unchanged retrain is the sweep's own log line
		s.log.Info("builtin embedder retrained", "model", rep.Model, "seconds", time.Since(t0).Seconds())
	}
}

// StreamStarted records an ingestion stream until the returned func is
// called; periodic sweeps wait while any runs.
func (s *Scheduler) StreamStarted() (done func()) {
	s.streams.Add(1)
	return func() { s.streams.Add(-1) }
}

// OnlyStream reports whether exactly one ingestion stream runs: the one
// asking may train, since no other stream is still adding the corpus.
func (s *Scheduler) OnlyStream() bool { return s.streams.Load() == 1 }

// Run sweeps at start and then periodically, until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	go s.mergeLoop(ctx)
	// At start: embed whatever a crashed or interrupted ingestion left, with
	// the active model. It never trains: a stream starting now would have the
	// model fixed on the first few documents it wrote. Training happens when
	// an ingestion stream ends (on everything stored) or on `bmcisctl reindex`.
	_, _ = s.Sweep(ctx, SweepOptions{Wait: false, Train: false, Bulk: true})
	// Each tick, and right after a stream ended (Kick).
	every(ctx, s.interval, s.kick, func() {
		if s.streams.Load() > 0 {
			return
		}
		s.maybeRetrain(ctx)
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		pending, err := s.m.st.HasUnembedded(pctx)
		if err == nil && !pending && s.m.Current() != nil {
			var ok bool
			ok, err = s.m.st.VectorIndexExists(pctx)
			pending = !ok
		}
		cancel()
		if err != nil || !pending {
			return
		}
		// Never trains: a stream running on another replica may still be
		// adding the corpus the model should be trained on.
		_, _ = s.Sweep(ctx, SweepOptions{Wait: false, Train: false, Bulk: false})
	})
}

// every calls fn every d, and whenever kick (may be nil) fires, until ctx
// ends.
func every(ctx context.Context, d time.Duration, kick <-chan struct{}, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		fn()
	}
}

// Sweep runs one embedding sweep and publishes its result locally.
func (s *Scheduler) Sweep(ctx context.Context, opt SweepOptions) (SweepReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep, err := s.m.Sweep(ctx, opt)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("embedding sweep failed", "error", err.Error())
		}
		return rep, err
	}
	if rep.Trained {
		// Training's dense matrices are garbage now; hand the pages back.
		debug.FreeOSMemory()
		result := "new"
		if rep.Unchanged {
			result = "unchanged"
		}
		s.trainings.WithLabelValues(result).Inc()
	}
	if rep.Embedded > 0 || rep.Trained || rep.Rebuilt {
		s.embedded.Add(float64(rep.Embedded))
		s.log.Info("embedding sweep", "model", rep.Model, "embedded", rep.Embedded, "trained", rep.Trained, "unchanged", rep.Unchanged,
			"trained_on", rep.TrainedOn, "index_rebuilt", rep.Rebuilt, "train_s", rep.TrainTime.Seconds(),
			"embed_s", rep.EmbedTime.Seconds(), "write_s", rep.WriteTime.Seconds(), "index_s", rep.IndexTime.Seconds())
	}
	if err := s.after(ctx); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("embedding sweep done, publishing its result failed", "error", err.Error())
		}
		return rep, err
	}
	return rep, nil
}

// Merging: mergeWorkers statements of up to mergeBatch rows at a time. Each
// statement holds its rows' locks while pgvector inserts them into the
// graph one by one (about a second per batch on two busy cores).
const (
	mergeWorkers = 2
	mergeBatch   = 250
)

// mergeLoop drains the vector queue into the HNSW index every interval;
// errors wait for the next round (the queue is durable and
// searched exactly meanwhile).
func (s *Scheduler) mergeLoop(ctx context.Context) {
	every(ctx, s.interval, nil, func() {
		t0 := time.Now()
		n, err := s.MergeQueued(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("merging queued vectors into the HNSW index failed; retrying later", "error", err.Error(), "merged", n)
		}
		if n > 0 {
			s.log.Info("queued vectors merged into the HNSW index", "merged", n, "seconds", time.Since(t0).Seconds())
		}
	})
}

// MergeQueued moves every queued vector into the HNSW index, mergeWorkers
// statements at a time, and returns how many moved.
func (s *Scheduler) MergeQueued(ctx context.Context) (int64, error) {
	// Checked first: a merge statement takes its table lock even with
	// nothing to move, and would wait behind an index build.
	if n, err := s.m.st.QueuedVectors(ctx); err != nil || n == 0 {
		return 0, err
	}
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < mergeWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n, err := s.m.st.MergeQueued(ctx, mergeBatch)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				if n == 0 {
					return
				}
				total.Add(n)
			}
		}()
	}
	wg.Wait()
	return total.Load(), firstErr
}
