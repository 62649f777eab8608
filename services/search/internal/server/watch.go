package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/answerversion"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

// watchHeartbeat is the longest WatchIndex stays silent: a watcher takes
// three missed heartbeats to mean the stream is dead (indexwatch).
const watchHeartbeat = time.Second

// maxWatchers bounds the WatchIndex streams one replica holds. Each is a
// goroutine and a ticker, and only adapters (one stream each) may open
// one, so a few dozen is many; the bound keeps a client that leaks streams
// from piling them up.
const maxWatchers = 64

// versionFeed holds the replica's index version and wakes the WatchIndex
// streams when it changes: a channel closed and replaced on each change
// (as embedding.Manager.Changed), so no goroutine is kept per stream
// beyond its handler.
type versionFeed struct {
	mu       sync.Mutex
	cur      *searchv1.IndexVersion // never modified once published
	changed  chan struct{}
	watchers int
	// ended: the replica is shutting down, so streams end and no new one
	// starts (a graceful stop would otherwise wait for them).
	ended bool
}

func newVersionFeed() *versionFeed {
	return &versionFeed{cur: &searchv1.IndexVersion{}, changed: make(chan struct{})}
}

// publish makes v the current version and wakes the streams; called
// where search's own answer cache is emptied, after it is, so a watcher
// told of a change never reads an answer cached before it. Once the feed
// has ended its channel is closed already, and stays so: the follower
// still applies changes while the replica drains.
func (f *versionFeed) publish(v *searchv1.IndexVersion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = v
	if f.ended {
		return
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// current returns the version and a channel closed at the next change (or
// at the end); ok is false once the feed has ended.
func (f *versionFeed) current() (v *searchv1.IndexVersion, next <-chan struct{}, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, f.changed, !f.ended
}

// join admits one more stream, within maxWatchers.
func (f *versionFeed) join() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.ended:
		return status.Error(codes.Unavailable, "this replica is shutting down")
	case f.watchers >= maxWatchers:
		return status.Errorf(codes.ResourceExhausted, "this replica already serves %d WatchIndex streams", maxWatchers)
	}
	f.watchers++
	return nil
}

func (f *versionFeed) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers--
}

// end ends every stream and refuses new ones.
func (f *versionFeed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended {
		f.ended = true
		close(f.changed)
	}
}

// publishVersion publishes what the index has caught up with now.
func (s *Server) publishVersion() {
	_, model, _ := s.emb.Describe()
	s.versions.publish(&searchv1.IndexVersion{
		IndexGeneration:   s.ix.Generation(),
		VectorsGeneration: s.feed.VectorsGeneration(),
		EmbedderModel:     model,
		Settings:          s.settings,
	})
}

// labelAnswer sends, to the adapter alone, the version this replica has
// published (platform/answerversion), read before the answer is computed:
// a change applied meanwhile can only make the label older than the
// answer, never newer. Other callers do not learn the change counter (as
// GetIndexStatus withholds it from limited callers).
func (s *Server) labelAnswer(ctx context.Context) {
	if !rpcauth.Holds(ctx, rpcauth.Adapter) {
		return
	}
	v, _, _ := s.versions.current()
	// Fails only once headers were sent, which no unary handler has done
	// this early; without the label the adapter does not keep the answer.
	_ = answerversion.Send(ctx, v)
}

// WatchIndex sends the index version at once, on every change the replica
// applies and at least every watchHeartbeat, until the caller goes or the
// replica shuts down (EndWatches).
func (s *Server) WatchIndex(_ *searchv1.WatchIndexRequest, stream grpc.ServerStreamingServer[searchv1.IndexVersion]) error {
	if err := s.versions.join(); err != nil {
		return err
	}
	defer s.versions.leave()
	heartbeat := time.NewTicker(watchHeartbeat)
	defer heartbeat.Stop()
	ctx := stream.Context()
	for {
		v, next, ok := s.versions.current()
		if !ok {
			return status.Error(codes.Unavailable, "this replica is shutting down")
		}
		if err := stream.Send(v); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		case <-heartbeat.C:
		}
	}
}

// EndWatches ends the WatchIndex streams and refuses new ones: call it when
// the replica starts to shut down, since a graceful stop waits for calls in
// flight and a stream never ends by itself.
func (s *Server) EndWatches() { s.versions.end() }
