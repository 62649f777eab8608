package keys

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// UsageRecorder batches last-use times in memory and writes them to the
// store periodically, so a check never waits on a database write.
type UsageRecorder struct {
	store *Store
	log   *slog.Logger
	mu    sync.Mutex
	seen  map[string]time.Time
}

// NewUsageRecorder returns a recorder writing to store.
func NewUsageRecorder(store *Store, log *slog.Logger) *UsageRecorder {
	return &UsageRecorder{store: store, log: log, seen: make(map[string]time.Time)}
}

// Record notes that key id was used at t.
func (u *UsageRecorder) Record(id string, t time.Time) {
	u.mu.Lock()
	if t.After(u.seen[id]) {
		u.seen[id] = t
	}
	u.mu.Unlock()
}

// Flush writes what was recorded since the last flush. On failure the times
// are put back, to be tried again next time.
func (u *UsageRecorder) Flush(ctx context.Context) error {
	u.mu.Lock()
	batch := u.seen
	u.seen = make(map[string]time.Time, len(batch))
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := u.store.TouchLastUsed(ctx, batch); err != nil {
		for id, t := range batch {
			u.Record(id, t)
		}
		return err
	}
	return nil
}

// Run flushes every interval until ctx ends, then flushes once more.
func (u *UsageRecorder) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := u.Flush(fctx); err != nil {
				u.log.Warn("final flush of key last-use times failed", "error", err.Error())
			}
			cancel()
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := u.Flush(fctx); err != nil {
				u.log.Warn("flush of key last-use times failed; will retry", "error", err.Error())
			}
			cancel()
		}
	}
}

// Pending returns a use of id recorded but not flushed yet.
func (u *UsageRecorder) Pending(id string) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.seen[id]
	return t, ok
}
