// Package snapshot starts a search replica from a serialized copy of its
// in-memory index stored in PostgreSQL, and keeps that copy fresh, so a
// replica of a big corpus starts by reading one stream instead of
// analysing every chunk again (docs/SCALING.md, "Step 0").
//
// A snapshot is the index at one change-feed generation G (format.go):
// BM25 terms and postings, per-chunk tables, categories, and the document
// and chunk records without text. Generations are taken in commit order
// (package store), so a replica that loads G and then applies every change
// above G, as the follower does, holds exactly what a full load would.
// With text in memory the records' text is filled by a plain read of
// (id, header, text), without analysis; a chunk left unfilled is read from
// PostgreSQL when shown.
//
// A snapshot is used only when its format version and analysis
// fingerprint equal the replica's; anything missing, mismatched, truncated
// or corrupt falls back to the full load, with the reason logged.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Modes of Config.Mode.
const (
	ModeReadWrite = "read-write" // start from snapshots and write them
	ModeRead      = "read"       // start from snapshots, never write one
	ModeOff       = "off"        // always build the index from the chunks
)

// Config says when snapshots are used and written.
type Config struct {
	// Mode is ModeReadWrite, ModeRead or ModeOff.
	Mode string
	// ChangeFraction: a new snapshot is written once the change feed has
	// moved by this share of the documents since the newest one.
	ChangeFraction float64
	// Quiet: snapshots are written only when no change has committed for
	// this long (a busy feed would make the copy stale at once).
	Quiet time.Duration
	// CheckInterval is how often a replica considers writing one.
	CheckInterval time.Duration
}

// DefaultConfig is the configuration when nothing is set.
func DefaultConfig() Config {
	return Config{Mode: ModeReadWrite, ChangeFraction: 0.1, Quiet: time.Minute, CheckInterval: time.Minute}
}

// A snapshot is used only when the feed moved by at most maxCatchUpShare
// of its documents (or of minCatchUp for a small corpus) since it.
const (
	maxCatchUpShare = 0.5
	minCatchUp      = 10_000
)

// keepOther is how long snapshots of another fingerprint (replicas of
// another version, during a rolling upgrade) survive a newer snapshot.
const keepOther = 24 * time.Hour

// Store is the snapshot storage (store.Store).
type Store interface {
	State(ctx context.Context) (store.FeedState, error)
	Snapshots(ctx context.Context) ([]store.Snapshot, error)
	ReadSnapshot(ctx context.Context, m store.Snapshot, read func(io.Reader) error) error
	WriteSnapshot(ctx context.Context, m store.Snapshot, keepOther time.Duration, write func(io.Writer) error) (store.Snapshot, error)
	EachChunkText(ctx context.Context, fn func(id int64, header, text string)) (int, error)
}

// Started says how a replica's index was built.
type Started struct {
	// FromSnapshot is false when the index was not loaded from a snapshot
	// (Reason says why).
	FromSnapshot bool
	Reason       string
	Snapshot     store.Snapshot
	// Read is the time to read and decode the snapshot, Text to fill the
	// records' text.
	Read, Text time.Duration
}

// Load returns the index of the newest usable snapshot, positioned at its
// generation, or nil and the reason none was used (the caller then builds
// the index from the chunks). Errors are never fatal: a replica can always
// start from the chunks.
func Load(ctx context.Context, st Store, an *analysis.Analyzer, p bm25.Params, o index.Options, cfg Config) (*index.Index, Started) {
	if cfg.Mode == ModeOff {
		return nil, Started{Reason: "snapshots are off"}
	}
	all, err := st.Snapshots(ctx)
	if err != nil {
		return nil, Started{Reason: err.Error()}
	}
	fp := analysis.Fingerprint(an)
	var m *store.Snapshot
	for i := range all {
		if all[i].FormatVersion == FormatVersion && all[i].Fingerprint == fp {
			m = &all[i]
			break
		}
	}
	switch {
	case m == nil && len(all) == 0:
		return nil, Started{Reason: "no snapshot stored"}
	case m == nil:
		return nil, Started{Reason: fmt.Sprintf("no snapshot matches this replica (format %d, analysis %s; newest: format %d, analysis %s)",
			FormatVersion, fp, all[0].FormatVersion, all[0].Fingerprint)}
	}
	s := Started{Snapshot: *m}
	// Generations only grow; a feed behind the snapshot means the database
	// is not the one it was taken from (restored from a backup).
	feed, err := st.State(ctx)
	if err != nil {
		s.Reason = err.Error()
		return nil, s
	}
	if feed.Generation < m.Generation {
		s.Reason = fmt.Sprintf("the change feed (generation %d) is behind the snapshot (%d)", feed.Generation, m.Generation)
		return nil, s
	}
	// The catch-up reads and analyses every changed chunk at once (as the
	// follower does); a corpus largely rewritten since the snapshot is
	// better streamed by the full load.
	if float64(feed.Generation-m.Generation) > maxCatchUpShare*float64(max(m.Documents, minCatchUp)) {
		s.Reason = fmt.Sprintf("the feed moved %d generations since the snapshot (of %d documents): a full load streams them", feed.Generation-m.Generation, m.Documents)
		return nil, s
	}
	t0 := time.Now()
	var ix *index.Index
	err = st.ReadSnapshot(ctx, *m, func(r io.Reader) error {
		var h Header
		var err error
		ix, h, err = Decode(r, an, p, o)
		if err == nil && h.Generation != m.Generation {
			err = fmt.Errorf("%w: stream of generation %d stored as %d", ErrMismatch, h.Generation, m.Generation)
		}
		return err
	})
	s.Read = time.Since(t0)
	if err != nil {
		s.Reason = err.Error()
		return nil, s
	}
	if !o.TextInDatabase {
		t1 := time.Now()
		// Chunks deleted since the snapshot are absent here; the catch-up
		// removes them. Chunk ids are never reused, so a text read now is
		// the one the snapshot's chunk had.
		if _, err := st.EachChunkText(ctx, func(id int64, header, text string) { ix.FillText(id, header, text) }); err != nil {
			s.Reason = err.Error()
			return nil, s
		}
		s.Text = time.Since(t1)
	}
	s.FromSnapshot = true
	return ix, s
}

// Metrics are the keeper's instruments.
type Metrics struct {
	// Writes counts snapshot writes by result (written, failed).
	Writes *prometheus.CounterVec
	// LastBytes and LastSeconds describe the last snapshot written.
	LastBytes, LastSeconds prometheus.Gauge
}

// Keeper writes a snapshot when the replica's index has moved far enough
// from the newest one, from any replica: one writes at a time (an
// advisory lock); the others see its snapshot at their next check.
type Keeper struct {
	cfg    Config
	st     Store
	ix     *index.Index
	fp     string
	freeze func() *index.Frozen
	log    *slog.Logger
	m      Metrics
}

// NewKeeper returns a keeper of ix's snapshots; freeze takes a consistent
// view of ix (follower.Freeze).
func NewKeeper(cfg Config, st Store, ix *index.Index, freeze func() *index.Frozen, log *slog.Logger, m Metrics) *Keeper {
	return &Keeper{cfg: cfg, st: st, ix: ix, fp: analysis.Fingerprint(ix.Analyzer()), freeze: freeze, log: log, m: m}
}

// Run checks now and every CheckInterval until ctx ends (only in
// ModeReadWrite).
func (k *Keeper) Run(ctx context.Context) {
	if k.cfg.Mode != ModeReadWrite {
		return
	}
	t := time.NewTicker(k.cfg.CheckInterval)
	defer t.Stop()
	for {
		if _, err := k.MaybeWrite(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrSnapshotBusy) {
			k.log.Warn("index snapshot not written", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Due reports whether a snapshot should be written now, and why.
func (k *Keeper) Due(ctx context.Context) (bool, string, error) {
	st := k.ix.Stats()
	if st.Documents == 0 || st.Generation == 0 {
		return false, "empty index", nil
	}
	all, err := k.st.Snapshots(ctx)
	if err != nil {
		return false, "", err
	}
	for _, m := range all {
		if m.FormatVersion == FormatVersion && m.Fingerprint == k.fp && m.Generation > st.Generation {
			// The database was restored from an older backup: replace the
			// snapshot now, before new writes carry the feed past it and
			// a starting replica takes it for a usable one.
			return true, fmt.Sprintf("the newest snapshot (generation %d) is ahead of the feed (%d)", m.Generation, st.Generation), nil
		}
	}
	if quiet := time.Since(st.LastChange); quiet < k.cfg.Quiet {
		return false, "the feed is not quiet", nil
	}
	for _, m := range all {
		if m.FormatVersion != FormatVersion || m.Fingerprint != k.fp {
			continue
		}
		moved := st.Generation - m.Generation
		if moved <= 0 || float64(moved) < k.cfg.ChangeFraction*float64(st.Documents) {
			return false, "the newest snapshot is recent", nil
		}
		return true, fmt.Sprintf("the feed moved %d generations since the newest snapshot", moved), nil
	}
	return true, "no usable snapshot", nil
}

// Written describes a snapshot write.
type Written struct {
	Snapshot store.Snapshot
	// Blocked is how long the index's writer (the follower) waited for the
	// view to be taken; Took is the whole write.
	Blocked, Took time.Duration
}

// MaybeWrite writes a snapshot when Due; it reports what it wrote (nil
// when nothing was due). store.ErrSnapshotBusy means another replica is
// writing one.
func (k *Keeper) MaybeWrite(ctx context.Context) (*Written, error) {
	due, why, err := k.Due(ctx)
	if err != nil || !due {
		return nil, err
	}
	w, err := k.Write(ctx)
	if err != nil {
		if !errors.Is(err, store.ErrSnapshotBusy) {
			k.m.Writes.WithLabelValues("failed").Inc()
		}
		return nil, err
	}
	k.log.Info("index snapshot written", "reason", why, "generation", w.Snapshot.Generation, "documents", w.Snapshot.Documents,
		"chunks", w.Snapshot.Chunks, "bytes", w.Snapshot.Bytes, "parts", w.Snapshot.Parts,
		"seconds", w.Took.Seconds(), "writer_blocked_seconds", w.Blocked.Seconds())
	return w, nil
}

// Write writes a snapshot of the index now.
func (k *Keeper) Write(ctx context.Context) (*Written, error) {
	t0 := time.Now()
	f := k.freeze()
	defer f.Release()
	w := &Written{Blocked: time.Since(t0)}
	m := store.Snapshot{FormatVersion: FormatVersion, Fingerprint: k.fp, Generation: f.Generation, LastChange: f.LastChange,
		Documents: int64(f.Documents()), Chunks: int64(f.Chunks())}
	m, err := k.st.WriteSnapshot(ctx, m, keepOther, func(out io.Writer) error { return Encode(out, f, k.fp) })
	if err != nil {
		return nil, err
	}
	w.Snapshot, w.Took = m, time.Since(t0)
	k.m.Writes.WithLabelValues("written").Inc()
	k.m.LastBytes.Set(float64(m.Bytes))
	k.m.LastSeconds.Set(w.Took.Seconds())
	return w, nil
}
