package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/hnsw"
)

// TestMirrorAnswersOnlyAsNewAsTheFeed: the graph answers while it is at
// least as new as every vectors generation the change feed brought, for
// its own model, with the feed listening; it declines otherwise.
func TestMirrorAnswersOnlyAsNewAsTheFeed(t *testing.T) {
	g := hnsw.New(hnsw.DefaultConfig(4))
	g.Add(1, []float32{1, 0, 0, 0})
	g.Add(2, []float32{0, 1, 0, 0})
	m := &vectorMirror{closed: true} // no catch-ups: the test sets the view
	m.view.Store(&mirrorView{g: g, model: 7, version: 5})
	e := &Engine{mirror: m, cfg: Config{EfSearch: 10}}
	answers := func(model int64) bool {
		hits, dbTime, ok, err := e.mirrorSearch(context.Background(), vectorSide{k: 10}, []float32{1, 0.1, 0, 0}, model)
		require.NoError(t, err)
		require.Zero(t, dbTime, "no database call")
		if ok {
			require.Len(t, hits, 2)
			require.Equal(t, int64(1), hits[0].ChunkID)
		}
		return ok
	}
	require.True(t, answers(7), "nothing newer seen")
	require.False(t, answers(8), "another model's graph")
	m.saw(5)
	require.True(t, answers(7), "as new as the feed")
	m.saw(6)
	require.False(t, answers(7), "the feed brought a newer generation")
	m.saw(4)
	require.False(t, answers(7), "what the feed brought is not forgotten")
	m.view.Store(&mirrorView{g: g, model: 7, version: 6})
	require.True(t, answers(7), "caught up")
	live := false
	e.cfg.FeedLive = func() bool { return live }
	require.False(t, answers(7), "the feed's listener is down: it would tell late")
	live = true
	require.True(t, answers(7), "listening again")
}
