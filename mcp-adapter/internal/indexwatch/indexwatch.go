// Package indexwatch tells the adapter when the search index may have
// changed, so that answers it keeps (internal/answercache) stop being used
// within one interval of a write, and are not used at all while it cannot
// tell.
//
// A Watcher reads the index's version (the change counter search's index
// has caught up with, and the live model's identifier, which a retrain
// moves) every interval. Any change, including one between two replicas
// that have caught up to different points, moves its epoch. A cached
// answer is usable only under the epoch it was fetched in, and only while
// the watcher is current: its last successful read is at most Stale old.
// When search cannot be read (down, refused, withheld), the epoch is not
// current after Stale, so cached answers are bypassed rather than trusted
// past a change that could go unseen; once a read succeeds again they are
// used only if the version is still the one they were fetched under.
//
// The adapter has no change feed of its own (it holds no database
// connection), and search's own cache reacts to writes at once; polling a
// cheap in-memory status keeps the adapter stateless at the cost of up to
// one interval of staleness (docs/MCP.md, "Answer cache").
package indexwatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Version reads what identifies the search index's answers now.
type Version func(ctx context.Context) (string, error)

// StaleAfter is how many intervals may pass without a successful read
// before the epoch stops being current: one missed read is noise, three
// mean search is not answering.
const StaleAfter = 3

// Watcher follows the index version. The zero value is not usable; use New.
type Watcher struct {
	read  Version
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex // serialises reads of last against a Poll
	last string
	seen bool

	epoch atomic.Uint64
	okAt  atomic.Int64 // unix nanoseconds of the last successful read; 0: none
}

// New returns a watcher reading version every interval (which must be
// positive); now is the clock (nil: time.Now).
func New(version Version, interval time.Duration, now func() time.Time) (*Watcher, error) {
	if version == nil {
		return nil, errors.New("indexwatch: no version reader")
	}
	if interval <= 0 {
		return nil, errors.New("indexwatch: the interval must be positive")
	}
	if now == nil {
		now = time.Now
	}
	return &Watcher{read: version, every: interval, now: now}, nil
}

// Run reads the version every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		_ = w.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the version once, within one interval, and moves the epoch
// when it differs from the last one read. A failed read changes nothing
// but lets the epoch grow stale.
func (w *Watcher) Poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.every)
	defer cancel()
	v, err := w.read(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	if !w.seen || v != w.last {
		w.last, w.seen = v, true
		w.epoch.Add(1)
	}
	w.mu.Unlock()
	w.okAt.Store(w.now().UnixNano())
	return nil
}

// Epoch returns a number that changes whenever the index may have changed,
// and whether it is current: false before the first successful read and
// once the last one is more than StaleAfter intervals old.
func (w *Watcher) Epoch() (uint64, bool) {
	at := w.okAt.Load()
	if at == 0 {
		return 0, false
	}
	current := w.now().UnixNano()-at <= int64(StaleAfter)*int64(w.every)
	return w.epoch.Load(), current
}
