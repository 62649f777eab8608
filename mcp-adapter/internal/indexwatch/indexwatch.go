// Package indexwatch tells the adapter when the search index may have
// changed, so that answers it keeps (internal/answercache) stop being used
// as soon as search applies a write, and are not used at all while it
// cannot tell.
//
// A Watcher holds search's WatchIndex stream open. Search pushes its index
// version (change counter, vectors generation, live model: all global,
// from the database's change feed) at once, whenever the replica applies a
// change that can alter an answer (the moment it empties its own answer
// cache) and at least every second. A version different from the last one
// moves the epoch; a cached answer is usable only under the epoch it was
// fetched in, and only while the epoch is current: a stream is open and
// its last message at most StaleAfter old. A broken stream makes it not
// current at once, a silent one after StaleAfter, so cached answers are
// bypassed rather than trusted past a change that could go unseen; once a
// stream is back they are used only if the version is still the one they
// were fetched under.
//
// Pushed rather than polled: a poll is one logged call per interval per
// adapter, and its interval would bound the staleness (docs/MCP.md, "The
// answer cache").
package indexwatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// Heartbeat is the longest search leaves a WatchIndex stream silent.
const Heartbeat = time.Second

// StaleAfter is how long a stream may stay silent before the epoch stops
// being current: three missed heartbeats mean search is not answering.
const StaleAfter = 3 * Heartbeat

// Reconnection backoff after a stream fails, doubling from minBackoff to
// maxBackoff; back to minBackoff once a stream has delivered.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = time.Second
	// unimplementedBackoff is the wait after a search that does not know
	// WatchIndex (an older release, during a rolling upgrade): it answers
	// no sooner for being asked every second, and each ask is a line in
	// its log; the cache is bypassed until a new search answers.
	unimplementedBackoff = 30 * time.Second
)

// version is an IndexVersion as a comparable value.
type version struct {
	index, vectors  int64
	model, settings string
}

func versionOf(v *searchv1.IndexVersion) version {
	return version{v.GetIndexGeneration(), v.GetVectorsGeneration(), v.GetEmbedderModel(), v.GetSettings()}
}

// String is the version as the answer cache compares it.
func (v version) String() string {
	return fmt.Sprintf("%d/%d/%q/%q", v.index, v.vectors, v.model, v.settings)
}

// Version is v as Epoch reports it: search labels each Search and
// GetChunks answer with the version it was computed at, and the adapter
// keeps an answer only when that label equals the epoch's version (the
// calls and the stream may reach different replicas).
func Version(v *searchv1.IndexVersion) string { return versionOf(v).String() }

// state is the watcher's pure core: what the stream said and when.
type state struct {
	last   version
	seen   bool
	epoch  uint64
	open   bool      // a stream is open and has delivered
	lastAt time.Time // when its last message came
}

// observe records a message received at at: a version different from the
// last one (or the first) moves the epoch.
func (s *state) observe(v version, at time.Time) {
	if !s.seen || v != s.last {
		s.last, s.seen = v, true
		s.epoch++
	}
	s.open, s.lastAt = true, at
}

// lost records that the stream ended: not current until the next message.
func (s *state) lost() { s.open = false }

// current returns the epoch, its version and whether it is current at now.
func (s *state) current(now time.Time) (uint64, string, bool) {
	return s.epoch, s.last.String(), s.open && now.Sub(s.lastAt) <= StaleAfter
}

// Watcher follows search's index version. Use New.
type Watcher struct {
	search searchv1.SearchServiceClient
	now    func() time.Time
	log    *slog.Logger

	mu sync.Mutex
	st state

	reconnects atomic.Int64 // attempts after the first stream (Reconnects)
	messages   atomic.Int64 // versions received, heartbeats included (tests)
}

// New returns a watcher of search (the adapter's client, whose credential
// is the adapter's: WatchIndex is its alone); now is the clock (nil:
// time.Now), log where stream failures go (nil: nowhere).
func New(search searchv1.SearchServiceClient, now func() time.Time, log *slog.Logger) *Watcher {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{search: search, now: now, log: log}
}

// Epoch returns a number that changes whenever the index may have changed,
// the version (Version) that moved it there, and whether it is current: a
// stream is open and its last message at most StaleAfter old.
func (w *Watcher) Epoch() (epoch uint64, version string, current bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.current(w.now())
}

// Run holds a WatchIndex stream open, reopening it with backoff, until ctx
// ends or search refuses the credential.
func (w *Watcher) Run(ctx context.Context) {
	backoff := minBackoff
	failing := false
	for {
		delivered, err := w.follow(ctx)
		w.mu.Lock()
		w.st.lost()
		w.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.PermissionDenied {
			// A credential other than the adapter's (a read one serves
			// API keys too): no retry will be allowed until the process
			// restarts with another, so none is made (each would be a
			// refused call in search's log).
			w.log.Error("search refuses WatchIndex to this credential (the adapter role's alone): the answer cache is bypassed", "error", err.Error())
			return
		}
		if delivered {
			backoff = minBackoff
		}
		// Once per outage: a stream that keeps failing says so once.
		if delivered || !failing {
			w.log.Warn("index watch stream lost: the answer cache is bypassed until it is back", "error", err.Error())
		}
		failing = !delivered
		wait := backoff
		if status.Code(err) == codes.Unimplemented {
			wait = unimplementedBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if !delivered {
			backoff = min(2*backoff, maxBackoff)
		}
		w.reconnects.Add(1)
	}
}

// Reconnects is how many times a stream was opened again after one ended
// or failed, whether or not it opened (for the adapter's metrics): rising
// while the epoch is not current, search is not answering the watch.
func (w *Watcher) Reconnects() int64 { return w.reconnects.Load() }

// follow reads one stream until it fails, falls silent for StaleAfter or
// ctx ends; delivered says whether it brought any message.
func (w *Watcher) follow(ctx context.Context) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A silent stream (a peer gone without a reset) is given up, so that
	// a new one is tried.
	silent := time.AfterFunc(StaleAfter, cancel)
	defer silent.Stop()
	stream, err := w.search.WatchIndex(ctx, &searchv1.WatchIndexRequest{})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return delivered, err
		}
		silent.Reset(StaleAfter)
		w.mu.Lock()
		w.st.observe(versionOf(msg), w.now())
		w.mu.Unlock()
		w.messages.Add(1)
		if !delivered {
			w.log.Info("index watch stream open", "index_generation", msg.GetIndexGeneration())
		}
		delivered = true
	}
}

// Start runs a watcher of search in the background; stop ends it and
// waits for it.
func Start(search searchv1.SearchServiceClient, log *slog.Logger) (w *Watcher, stop func()) {
	w = New(search, nil, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return w, func() {
		cancel()
		<-done
	}
}
