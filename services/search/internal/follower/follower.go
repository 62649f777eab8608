// Package follower keeps a replica's in-memory index current: it applies
// every change committed to PostgreSQL after the index's generation (woken
// by LISTEN, with a poll as the fallback for a lost notification), reloads
// the active embedding model when it changed, and tells its owner when
// anything a ranking depends on moved.
package follower

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Feed is the change feed in the database (store.Store).
type Feed interface {
	ChangesSinceStream(ctx context.Context, since int64, onDocuments func([]store.Document), onChunk func(store.Chunk) error) (*store.Changes, error)
	Listen(ctx context.Context, log *slog.Logger, notify func(), connected func(bool))
}

// Models loads the active embedding model (embedding.Manager).
type Models interface {
	Sync(ctx context.Context, activeRow int64) (bool, error)
	Describe() (provider, model string, dims int)
}

// Config is a follower's wiring.
type Config struct {
	Index     *index.Index
	Store     Feed
	Embedding Models
	Log       *slog.Logger
	// PollInterval is the change-feed poll period.
	PollInterval time.Duration
	// Applied counts document changes applied to the index.
	Applied prometheus.Counter
	// VectorsRead is told the vectors generation of each sync's snapshot
	// before the sync changes the index, so nothing answers from the new
	// documents with vectors older than theirs (the engine's mirror).
	VectorsRead func(generation int64)
	// Changed is called after a sync that changed documents, vectors or
	// the active model (drop cached rankings, publish index statistics).
	Changed func(index.Stats)
}

// Follower is safe for concurrent use.
type Follower struct {
	cfg       Config
	mu        sync.Mutex // one sync at a time
	kick      chan struct{}
	vecGen    atomic.Int64
	listening atomic.Bool
}

// New returns a follower; call Sync once to build the index, then Run.
func New(cfg Config) *Follower {
	return &Follower{cfg: cfg, kick: make(chan struct{}, 1)}
}

// Run listens for change notifications and polls, applying changes, until
// ctx ends.
func (f *Follower) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		f.cfg.Store.Listen(ctx, f.cfg.Log, f.Kick, func(up bool) { f.listening.Store(up) })
	}()
	go func() {
		defer wg.Done()
		f.follow(ctx)
	}()
	wg.Wait()
}

// Listening reports whether the change-feed listener is connected.
func (f *Follower) Listening() bool { return f.listening.Load() }

// VectorsGeneration is the vectors generation of the last sync's snapshot.
func (f *Follower) VectorsGeneration() int64 { return f.vecGen.Load() }

// Kick asks the follower to look for changes now.
func (f *Follower) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *Follower) follow(ctx context.Context) {
	t := time.NewTicker(f.cfg.PollInterval)
	defer t.Stop()
	var lastErr time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := f.Sync(sctx)
		cancel()
		if err != nil && ctx.Err() == nil && time.Since(lastErr) > 10*time.Second {
			lastErr = time.Now()
			f.cfg.Log.Warn("change feed poll failed", "error", err.Error())
		}
	}
}

// Sync applies every change committed after the index's generation, and
// reloads the model when the active one changed. It reports whether
// anything a ranking depends on changed.
func (f *Follower) Sync(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ix := f.cfg.Index
	if ix.Empty() && ix.Generation() == 0 {
		return f.load(ctx)
	}
	var chunks []store.Chunk
	ch, err := f.cfg.Store.ChangesSinceStream(ctx, ix.Generation(), nil, func(c store.Chunk) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		return false, err
	}
	return f.applied(ctx, ch, chunks, false)
}

// load is the first sync of an empty index: chunks are indexed while they
// stream in (index.Loader), never all held at once.
func (f *Follower) load(ctx context.Context) (bool, error) {
	ld := f.cfg.Index.NewLoader()
	ch, err := f.cfg.Store.ChangesSinceStream(ctx, 0, ld.Documents, func(c store.Chunk) error {
		ld.Chunk(c)
		return nil
	})
	if err != nil {
		ld.Finish(0, time.Time{})
		return false, err
	}
	ld.Finish(ch.State.Generation, ch.State.LastChange)
	f.cfg.Applied.Add(float64(len(ch.Documents)))
	return f.applied(ctx, &store.Changes{State: ch.State}, nil, len(ch.Documents) > 0)
}

// applied applies changes read from the feed (if any; loaded says a
// load already put documents in) and follows the vectors generation and
// the active model.
func (f *Follower) applied(ctx context.Context, ch *store.Changes, chunks []store.Chunk, loaded bool) (bool, error) {
	ix := f.cfg.Index
	changed := loaded
	if f.cfg.VectorsRead != nil {
		f.cfg.VectorsRead(ch.State.VectorsGeneration)
	}
	if len(ch.Documents) > 0 || len(ch.Tombstones) > 0 {
		b := &index.Batch{Generation: ch.State.Generation, LastChange: ch.State.LastChange, Documents: ch.Documents, Chunks: chunks}
		for _, t := range ch.Tombstones {
			b.Deleted = append(b.Deleted, t.DocumentID)
		}
		ix.Apply(b)
		f.cfg.Applied.Add(float64(len(ch.Documents) + len(ch.Tombstones)))
		changed = true
	} else {
		ix.SetPosition(ch.State.Generation, ch.State.LastChange)
	}
	if f.vecGen.Swap(ch.State.VectorsGeneration) != ch.State.VectorsGeneration {
		changed = true
	}
	emb := f.cfg.Embedding
	if mc, err := emb.Sync(ctx, ch.State.ActiveModel); err != nil {
		f.cfg.Log.Error("active embedding model not usable; vector search is off", "error", err.Error())
		changed = changed || mc
	} else if mc {
		changed = true
		_, model, _ := emb.Describe()
		f.cfg.Log.Info("embedding model loaded", "model", model)
	}
	if changed {
		f.cfg.Changed(ix.Stats())
	}
	return changed, nil
}

// WaitApplied brings the index up to at least generation gen.
func (f *Follower) WaitApplied(ctx context.Context, gen int64) error {
	for f.cfg.Index.Generation() < gen {
		if _, err := f.Sync(ctx); err != nil {
			return err
		}
		if f.cfg.Index.Generation() < gen {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// Freeze takes a consistent view of the index between two syncs, for an
// index snapshot (index.Frozen): the follower, the index's only writer,
// waits meanwhile.
func (f *Follower) Freeze() *index.Frozen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.Index.Freeze()
}
