package hnsw

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func codesOnly(dims int) Config {
	cfg := DefaultConfig(dims)
	cfg.CodesOnly = true
	return cfg
}

// A graph of codes only finds what the graph with float32 vectors finds,
// within the codes' rounding: recall@100 at ef 100 within 0.02, and every
// cosine within 0.01 of the exact one. Its vectors are the codes decoded:
// unit length, along the stored vector.
func TestCodesOnly(t *testing.T) {
	vs := clustered(6000, 256, 60, 8)
	exact := build(vs)
	g := New(codesOnly(256))
	for i, v := range vs {
		g.Add(int64(i), v)
	}
	require.True(t, g.CodesOnly())
	require.False(t, exact.CodesOnly())
	qs := clustered(60, 256, 60, 9)
	recall := func(g *Graph) float64 {
		found := 0
		for _, q := range qs {
			want := exactTop(vs, q, 100, nil)
			hits := g.Search(q, 100, 100)
			require.Len(t, hits, 100)
			for _, h := range hits {
				if slices.Contains(want, h.ID) {
					found++
				}
				v := vs[h.ID]
				cos := float64(dot(q, v) * invNorm(q) * invNorm(v))
				require.InDelta(t, cos, h.Cosine, 0.01, "node %d", h.ID)
			}
		}
		return float64(found) / float64(100*len(qs))
	}
	codes, floats := recall(g), recall(exact)
	t.Logf("recall@100 at ef 100: codes only %.4f, with float32 vectors %.4f", codes, floats)
	require.GreaterOrEqual(t, codes, floats-0.02)

	v := g.Vector(17)
	require.Len(t, v, 256)
	require.InDelta(t, 1, dot(v, v), 0.02, "unit length")
	require.Greater(t, dot(v, vs[17])*invNorm(v)*invNorm(vs[17]), float32(0.999), "along the stored vector")
	require.Equal(t, v, g.Search(vs[17], 1, 50)[0].Vector)
	g.Delete(17)
	require.Nil(t, g.Vector(17))
}

// A batch builds the graph that adding its vectors in id order builds,
// whatever order they arrived in: replicas reading the same rows answer
// alike.
func TestBatchBuildsInIDOrder(t *testing.T) {
	vs := clustered(2000, 32, 20, 3)
	for _, cfg := range []Config{DefaultConfig(32), codesOnly(32)} {
		want := New(cfg)
		for i, v := range vs {
			want.Add(int64(i), v)
		}
		b := NewBatch(cfg, len(vs))
		for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(len(vs)) {
			b.Add(int64(i), vs[i])
		}
		got, err := b.Build(context.Background())
		require.NoError(t, err)
		require.Equal(t, cfg.CodesOnly, got.CodesOnly())
		for _, q := range clustered(30, 32, 20, 4) {
			require.Equal(t, want.Search(q, 20, 40), got.Search(q, 20, 40))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := NewBatch(DefaultConfig(32), 1)
	b.Add(1, vs[0])
	_, err := b.Build(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// NodeBytes, which sizes the mirror's budget, covers what a graph built
// from a batch holds on the heap, in both forms, once nodes added after
// the build have grown its arrays past the batch's spare room.
func TestNodeBytesCoversAGraph(t *testing.T) {
	const n, more, dims = 20_000, 2_600, 256
	vs := clustered(n+more, dims, 100, 1)
	for _, cfg := range []Config{DefaultConfig(dims), codesOnly(dims)} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b := NewBatch(cfg, n)
		for i, v := range vs[:n] {
			b.Add(int64(i), v)
		}
		g, err := b.Build(context.Background())
		require.NoError(t, err)
		for i, v := range vs[n:] {
			g.Add(int64(n+i), v)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		if !cfg.CodesOnly {
			held += float64((n + more) * dims * 4) // the float32 vectors, made before
		}
		t.Logf("codes only %v: %.0f bytes a node, NodeBytes %d", cfg.CodesOnly, held/(n+more), NodeBytes(dims, cfg.CodesOnly))
		require.LessOrEqual(t, held/(n+more), float64(NodeBytes(dims, cfg.CodesOnly)))
		runtime.KeepAlive(g)
	}
}
