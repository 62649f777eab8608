package tools

import (
	"context"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/platform/readscope"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
)

// AnswerCache keeps finished answers (internal/answercache): a call
// repeated within its TTL, while the index's epoch stays, asks no backend
// and builds no answer.
type AnswerCache = answercache.Cache[*keptAnswer]

// IndexEpoch is what the answer cache asks of the index watcher
// (indexwatch.Watcher): a number that moves whenever the search index may
// have changed, the version it moved to (indexwatch.Version), and whether
// it is current (the watcher can tell now).
type IndexEpoch interface {
	Epoch() (epoch uint64, version string, current bool)
}

// NewAnswerCache returns an answer cache keeping answers for ttl within
// maxBytes, on the clock now (time.Now when nil); nil (off) when ttl is 0.
func NewAnswerCache(ttl time.Duration, maxBytes int64, now func() time.Time) *AnswerCache {
	return answercache.New[*keptAnswer](ttl, maxBytes, now)
}

// keptAnswer is an answer in the cache: the rendered answer, and the
// chunks and documents its audit entry names (each result's, in order).
type keptAnswer struct {
	frozen  *respond.Frozen
	results []chunkDocument
}

// answerKey is the cache key of a call to tool made in ctx under the
// index's epoch, whose args adds the call's canonical arguments. What the
// caller may see is taken from ctx, the context the backend read is made
// in: its key's category scope and its access set (withReadScope), so an
// answer is found only for the scope it was read in; and the caller, whose
// own calls alone a hit may reveal (the services' caches are partitioned
// the same way, platform/cacheowner). The key's tool scope is left out: a
// tool outside it is refused before any answer is used (guarded), and
// inside it the answer does not depend on it.
func (s *Server) answerKey(ctx context.Context, epoch uint64, tool string, args func(*answercache.KeyBuilder)) answercache.Key {
	k := answercache.NewKey(tool).
		Int(int64(epoch)).
		String(s.opts.Key(ctx)).
		Strings(readscope.Categories(ctx)).
		Strings(readscope.Access(ctx))
	args(k)
	return k.Sum()
}

// answerSlot is where a call's answer may be kept: its key, and the index
// version of the epoch in the key.
type answerSlot struct {
	key     answercache.Key
	version string
}

// lookupAnswer is the hook before a backend call: the answer kept under
// the call's key, if any, and the slot to keep a new one in. With the
// cache off, or no current index epoch, it returns nothing and costs
// nothing: the call is answered afresh and not kept (fail closed).
//
// The epoch read here goes into the key: an answer fetched after it is
// kept under it, so once the index moves on no entry of an older epoch is
// found again (they age out of the LRU). An answer is kept only if search
// computed it at the epoch's version (keepAnswer): the stream and the
// calls may reach different replicas, one of them behind.
func (s *Server) lookupAnswer(ctx context.Context, tool string, args func(*answercache.KeyBuilder)) (*keptAnswer, *answerSlot) {
	if s.opts.Answers == nil || s.opts.Index == nil {
		return nil, nil
	}
	epoch, version, current := s.opts.Index.Epoch()
	if !current {
		return nil, nil
	}
	k := s.answerKey(ctx, epoch, tool, args)
	a, _ := s.opts.Answers.Get(k)
	return a, &answerSlot{key: k, version: version}
}

// guardedAnswer is guarded for a fetch that may answer from the answer
// cache (useKept). A kept answer carries no warnings of the call's check,
// so when the check has some, fetch runs again without the cache: the
// call is answered afresh, with them.
func guardedAnswer[T any](ctx context.Context, s *Server, op string, fetch func(ctx context.Context, useKept bool) (T, error), kept func(T) bool) (T, authInfo, *apierr.Error, error) {
	v, info, aerr, err := guarded(ctx, s, op, func(ctx context.Context) (T, error) { return fetch(ctx, true) })
	if aerr == nil && kept(v) && len(info.warnings()) > 0 {
		v, err = fetch(info.scoped(ctx), false)
	}
	return v, info, aerr, err
}

// replayAnswer answers call with a kept answer, and notes for the audit
// entry the chunks and documents it returns, as its first answer did.
func (s *Server) replayAnswer(ctx context.Context, call *respond.Call, a *keptAnswer) *mcp.CallToolResult {
	for _, r := range a.results {
		noteResult(ctx, r.chunk, r.document)
	}
	return s.resp.Replay(call, a.frozen)
}

// keepAnswer keeps the call's answer in slot (nil: cache off) when
// search computed it at the slot's index version (answeredAt, from its
// response header; empty: it did not say), unless it cannot be answered
// again as it is (respond.Freeze). An answer kept out for its version
// alone is counted (answercache.NotStored). The caller keeps out answers
// with warnings about this one call.
func (s *Server) keepAnswer(ctx context.Context, slot *answerSlot, answeredAt string, call *respond.Call) {
	if slot == nil {
		return
	}
	if answeredAt != slot.version {
		if !s.resp.Freezable(call) {
			return // not kept whatever the version: not counted as for it
		}
		reason := answercache.OtherVersion
		if answeredAt == "" {
			reason = answercache.NoVersion
		}
		s.opts.Answers.NotStored(reason)
		return
	}
	f, ok := s.resp.Freeze(call)
	if !ok {
		return
	}
	results := noteOf(ctx).results
	a := &keptAnswer{frozen: f, results: slices.Clone(results[:min(len(results), f.Results())])}
	s.opts.Answers.Put(slot.key, a, f.Size()+len(a.results)*64)
}
