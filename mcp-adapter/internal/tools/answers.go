package tools

import (
	"context"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/platform/readscope"

	"github.com/bmcis/knowledge/mcp-adapter/internal/answercache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
)

// AnswerCache keeps finished answers (internal/answercache): a call
// repeated within its TTL, while the index's epoch stays, asks no backend
// and builds no answer.
type AnswerCache = answercache.Cache[*keptAnswer]

// IndexEpoch is what the answer cache asks of the index watcher
// (indexwatch.Watcher): a number that moves whenever the search index may
// have changed, and whether it is current (the watcher can tell now).
type IndexEpoch interface {
	Epoch() (epoch uint64, current bool)
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

// lookupAnswer is the hook before a backend call: the answer kept under
// the call's key, if any, and the key to keep a new one under. With the
// cache off, or no current index epoch, it returns nothing and costs
// nothing: the call is answered afresh and not kept (fail closed).
//
// The epoch read here goes into the key: an answer fetched after it is
// kept under it, so once the index moves on no entry of an older epoch is
// found again (they age out of the LRU), and one fetched across a change
// is kept under the epoch before it, never found after it.
func (s *Server) lookupAnswer(ctx context.Context, tool string, args func(*answercache.KeyBuilder)) (*keptAnswer, *answercache.Key) {
	if s.opts.Answers == nil || s.opts.Index == nil {
		return nil, nil
	}
	epoch, current := s.opts.Index.Epoch()
	if !current {
		return nil, nil
	}
	k := s.answerKey(ctx, epoch, tool, args)
	a, _ := s.opts.Answers.Get(k)
	return a, &k
}

// replayAnswer answers call with a kept answer, and notes for the audit
// entry the chunks and documents it returns, as its first answer did.
func (s *Server) replayAnswer(ctx context.Context, call *respond.Call, a *keptAnswer) *mcp.CallToolResult {
	for _, r := range a.results {
		noteResult(ctx, r.chunk, r.document)
	}
	return s.resp.Replay(call, a.frozen)
}

// keepAnswer keeps the call's answer under key (nil: cache off), unless
// it cannot be answered again as it is (respond.Freeze). The caller keeps
// out answers with warnings about this one call.
func (s *Server) keepAnswer(ctx context.Context, key *answercache.Key, call *respond.Call) {
	if key == nil {
		return
	}
	f, ok := s.resp.Freeze(call)
	if !ok {
		return
	}
	results := noteOf(ctx).results
	a := &keptAnswer{frozen: f, results: slices.Clone(results[:min(len(results), f.Results())])}
	s.opts.Answers.Put(*key, a, f.Size()+len(a.results)*64)
}
