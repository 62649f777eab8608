package hnsw

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// clustered returns n vectors around c random centres, as topic vectors
// are: neighbours are near-ties inside a cluster, the hard case.
func clustered(n, dims, c int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	centres := make([][]float32, c)
	for i := range centres {
		centres[i] = make([]float32, dims)
		for j := range centres[i] {
			centres[i][j] = float32(r.NormFloat64())
		}
	}
	out := make([][]float32, n)
	for i := range out {
		ce := centres[r.IntN(c)]
		v := make([]float32, dims)
		for j := range v {
			v[j] = ce[j] + 0.6*float32(r.NormFloat64())
		}
		out[i] = v
	}
	return out
}

func exactTop(vs [][]float32, q []float32, k int, skip map[int64]bool) []int64 {
	type s struct {
		id int64
		d  float32
	}
	qq := query{v: q, inv: invNorm(q)}
	var all []s
	for i, v := range vs {
		if skip[int64(i)] {
			continue
		}
		all = append(all, s{int64(i), 1 - dot(q, v)*qq.inv*invNorm(v)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].d < all[j].d })
	var out []int64
	for _, x := range all[:min(k, len(all))] {
		out = append(out, x.id)
	}
	return out
}

func build(vs [][]float32) *Graph {
	g := New(DefaultConfig(len(vs[0])))
	for i, v := range vs {
		g.Add(int64(i), v)
	}
	return g
}

// Recall@10 against exact distances grows with the candidate list: at the
// service's ef_search (100) and at 400. The vectors are Gaussian noise
// around 30 centres in 64 dimensions, harder than topic vectors (0.919
// and 0.998 since the graph is built on int8 codes; 0.933 and 0.997 when
// it was built with exact distances).
func TestRecall(t *testing.T) {
	vs := clustered(4000, 64, 30, 1)
	g := build(vs)
	qs := clustered(100, 64, 30, 2)
	require.GreaterOrEqual(t, recallAt(t, g, vs, qs, 100), 0.9)
	require.GreaterOrEqual(t, recallAt(t, g, vs, qs, 400), 0.99)
}

func recallAt(t *testing.T, g *Graph, vs, qs [][]float32, ef int) float64 {
	found, total := 0, 0
	for _, q := range qs {
		want := exactTop(vs, q, 10, nil)
		hits := g.Search(q, 10, ef)
		require.Len(t, hits, 10)
		for i := 1; i < len(hits); i++ {
			require.GreaterOrEqual(t, hits[i-1].Cosine, hits[i].Cosine, "best first")
		}
		for _, h := range hits {
			if slices.Contains(want, h.ID) {
				found++
			}
		}
		total += len(want)
	}
	recall := float64(found) / float64(total)
	t.Logf("recall@10 at ef %d: %.4f", ef, recall)
	return recall
}

// The walk over int8 codes finds the float walk's neighbours: recall@100
// at ef 100 (the service's setting, where the walk's list is the answer)
// within 0.01 of the float32 walk's, on 256-d clustered vectors.
func TestCodedWalkKeepsRecall(t *testing.T) {
	vs := clustered(6000, 256, 60, 8)
	g := build(vs)
	qs := clustered(60, 256, 60, 9)
	recall := func(coded bool) float64 {
		found := 0
		for _, q := range qs {
			want := exactTop(vs, q, 100, nil)
			hits := g.search(q, 100, 100, coded)
			require.Len(t, hits, 100)
			for _, h := range hits {
				if slices.Contains(want, h.ID) {
					found++
				}
			}
		}
		return float64(found) / float64(100*len(qs))
	}
	coded, float := recall(true), recall(false)
	t.Logf("recall@100 at ef 100: int8 walk %.4f, float32 walk %.4f", coded, float)
	require.GreaterOrEqual(t, coded, float-0.01)
}

// A query with a NaN or infinite component finds nothing.
func TestNonFiniteQuery(t *testing.T) {
	g := build(clustered(50, 8, 2, 1))
	q := clustered(1, 8, 2, 2)[0]
	q[3] = float32(math.NaN())
	require.Empty(t, g.Search(q, 5, 10))
	q[3] = float32(math.Inf(1))
	require.Empty(t, g.Search(q, 5, 10))
}

// A graph smaller than the candidate list answers exactly, and its
// cosines are the vectors' own.
func TestSmallGraphIsExact(t *testing.T) {
	vs := clustered(300, 16, 5, 3)
	g := build(vs)
	for i, q := range clustered(20, 16, 5, 4) {
		hits := g.Search(q, 50, 400)
		var ids []int64
		for _, h := range hits {
			ids = append(ids, h.ID)
			require.InDelta(t, float64(dot(q, vs[h.ID])*invNorm(q)*invNorm(vs[h.ID])), h.Cosine, 1e-6)
			require.Equal(t, vs[h.ID], h.Vector)
		}
		require.Equal(t, exactTop(vs, q, 50, nil), ids, "query %d", i)
	}
}

func TestDeleteKeepAndReadd(t *testing.T) {
	vs := clustered(500, 16, 5, 5)
	g := build(vs)
	q := vs[7]
	require.Equal(t, int64(7), g.Search(q, 1, 50)[0].ID)
	g.Delete(7)
	g.Delete(7) // twice counts once
	g.Delete(99999)
	require.Equal(t, 1, g.Deleted())
	require.Nil(t, g.Vector(7))
	require.Equal(t, vs[8], g.Vector(8))
	require.Equal(t, 499, g.Len()-g.Deleted())
	for _, h := range g.Search(q, 50, 100) {
		require.NotEqual(t, int64(7), h.ID, "a deleted node is never returned")
	}
	require.Equal(t, exactTop(vs, q, 20, map[int64]bool{7: true}), ids(g.Search(q, 20, 500)))

	// Back with another vector: the id names the new node.
	other := vs[300]
	g.Add(7, other)
	require.Equal(t, other, g.Vector(7))
	require.Equal(t, 500, g.Len()-g.Deleted())
	require.Contains(t, ids(g.Search(other, 2, 50)), int64(7))
	// Present and live: a second Add changes nothing.
	g.Add(8, vs[400])
	require.Equal(t, vs[8], g.Vector(8))
}

func TestEmptyAndZero(t *testing.T) {
	g := New(DefaultConfig(4))
	require.Empty(t, g.Search([]float32{1, 0, 0, 0}, 5, 10))
	g.Add(1, []float32{0, 0, 0, 0}) // a zero vector is stored, at distance 1 from all
	g.Add(2, []float32{1, 0, 0, 0})
	hits := g.Search([]float32{1, 0, 0, 0}, 5, 10)
	require.Equal(t, []int64{2, 1}, ids(hits))
	require.InDelta(t, 1.0, hits[0].Cosine, 1e-6)
	require.InDelta(t, 0.0, hits[1].Cosine, 1e-6)
	require.Empty(t, g.Search([]float32{1, 0, 0, 0}, 0, 10))
}

func ids(hs []Hit) []int64 {
	var out []int64
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// The service's case: 100k chunks of 256 dimensions, ef_search 100, the
// 100 candidates fusion takes; the graph with its float32 vectors, and
// of codes only (the mirror's form past its bound).
func BenchmarkSearch100k(b *testing.B) {
	vs := clustered(100_000, 256, 200, 1)
	qs := clustered(500, 256, 200, 2)
	for _, cfg := range []Config{DefaultConfig(256), codesOnly(256)} {
		batch := NewBatch(cfg, len(vs))
		for i, v := range vs {
			batch.Add(int64(i), v)
		}
		g, err := batch.Build(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		name := "float32"
		if cfg.CodesOnly {
			name = "codes-only"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				g.Search(qs[i%len(qs)], 100, 100)
				i++
			}
		})
	}
}

func BenchmarkAdd(b *testing.B) {
	vs := clustered(20_000, 256, 200, 1)
	b.ReportAllocs()
	for b.Loop() {
		g := New(DefaultConfig(256))
		for i, v := range vs {
			g.Add(int64(i), v)
		}
	}
}

// Deleted nodes do not shorten the answer: they take no place in the
// candidate list, so k live nodes come back when ef = k.
func TestDeletedTakeNoPlace(t *testing.T) {
	vs := clustered(1000, 16, 5, 6)
	g := build(vs)
	for i := 0; i < len(vs); i += 2 {
		g.Delete(int64(i))
	}
	for _, q := range clustered(10, 16, 5, 7) {
		hits := g.Search(q, 50, 50)
		require.Len(t, hits, 50)
		for _, h := range hits {
			require.Equal(t, int64(1), h.ID%2)
		}
	}
}

// Searches run while nodes are added and deleted: each answer is full and
// sorted, holds no node deleted before the search began, and a node never
// deleted is still held (go test -race checks the locking).
func TestConcurrentUse(t *testing.T) {
	vs := clustered(3000, 16, 8, 8)
	g := build(vs[:1000])
	for i := 0; i < 100; i++ {
		g.Delete(int64(i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1000; i < len(vs); i++ {
			g.Add(int64(i), vs[i])
			if i%10 == 0 {
				g.Delete(int64(i - 500))
			}
		}
	}()
	qs := clustered(200, 16, 8, 9)
	for i := 0; ; i++ {
		select {
		case <-done:
			require.Equal(t, len(vs), g.Len())
			require.Equal(t, 100+200, g.Deleted())
			return
		default:
		}
		hits := g.Search(qs[i%len(qs)], 20, 40)
		require.Len(t, hits, 20)
		for j, h := range hits {
			require.GreaterOrEqual(t, h.ID, int64(100), "deleted before the search began")
			if j > 0 {
				require.GreaterOrEqual(t, hits[j-1].Cosine, h.Cosine)
			}
		}
		require.Equal(t, vs[999], g.Vector(999))
	}
}

// Each kernel the CPU has agrees with the Go loop, at every length and at
// the codes' extremes.
func TestDotInt8(t *testing.T) {
	avx2, sse41 := haveAVX2, haveSSE41
	t.Cleanup(func() { haveAVX2, haveSSE41 = avx2, sse41 })
	for _, k := range []struct {
		name        string
		avx2, sse41 bool
	}{{"avx2", avx2, sse41}, {"sse4.1", false, sse41}, {"go", false, false}} {
		t.Run(k.name, func(t *testing.T) {
			haveAVX2, haveSSE41 = k.avx2, k.sse41
			rng := rand.New(rand.NewPCG(3, 4))
			for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 48, 100, 256, 257, 768} {
				a, b := make([]int8, n), make([]int8, n)
				for i := range a {
					a[i], b[i] = int8(rng.IntN(255)-127), int8(rng.IntN(255)-127)
				}
				require.Equal(t, dotInt8Go(a, b), dotInt8(a, b), "n=%d", n)
				for i := range a {
					a[i], b[i] = -127, 127
				}
				require.Equal(t, int32(-127*127*n), dotInt8(a, b), "n=%d", n)
			}
		})
	}
}

func BenchmarkDotInt8_256(b *testing.B) {
	x, y := make([]int8, 256), make([]int8, 256)
	for i := range x {
		x[i], y[i] = int8(i), int8(-i)
	}
	var s int32
	for b.Loop() {
		s += dotInt8(x, y)
	}
	_ = s
}

// A graph of no dimensions answers without reading a code: every
// distance is 1, and the candidates are scored exactly.
func TestZeroDims(t *testing.T) {
	g := New(DefaultConfig(0))
	g.Add(1, nil)
	g.Add(2, nil)
	require.Len(t, g.Search(nil, 5, 10), 2)
}

// TestDuplicatesStayReachable: a few vectors each stored hundreds of
// times (chunks of one template, as the search service's test corpus
// embeds them) are all found. Before copies were kept out of the pruned
// fill, each region's lists held only copies, and a walk entering the
// graph in another region found none (a best cosine of 0.12 for a vector
// stored 225 times).
func TestDuplicatesStayReachable(t *testing.T) {
	const dims = 256
	rng := rand.New(rand.NewPCG(3, 4))
	centres := make([][]float32, 4)
	for i := range centres {
		// Few components, the rest zero: the builtin model's vectors
		// padded to the column's dimension.
		centres[i] = make([]float32, dims)
		for j := 0; j < 10; j++ {
			centres[i][j] = float32(rng.NormFloat64())
		}
	}
	for _, cfg := range []Config{DefaultConfig(dims), codesOnly(dims)} {
		t.Run(fmt.Sprintf("codes only %v", cfg.CodesOnly), func(t *testing.T) { duplicatesStayReachable(t, cfg, centres) })
	}
}

func duplicatesStayReachable(t *testing.T, cfg Config, centres [][]float32) {
	tolerance := 1e-5
	if cfg.CodesOnly {
		tolerance = 0.01
	}
	g := New(cfg)
	for i := 0; i < 900; i++ {
		g.Add(int64(i), centres[i%len(centres)])
	}
	copies := 0
	for _, cs := range g.copies {
		copies += len(cs)
	}
	require.Equal(t, 900-len(centres), copies, "only each vector's first node is linked, whatever layer a copy drew")
	for c, q := range centres {
		hits := g.Search(q, 20, 40)
		require.Len(t, hits, 20)
		for _, h := range hits {
			require.EqualValues(t, c, h.ID%int64(len(centres)), "centre %d: hit %d is a copy of another vector (cosine %.3f)", c, h.ID, h.Cosine)
			require.InDelta(t, 1, h.Cosine, tolerance)
		}
	}
	all := g.Search(centres[0], 300, 300)
	require.Len(t, all, 300)
	for i, h := range all {
		// Every copy (225) before the other vectors.
		require.Equal(t, i < 225, h.ID%int64(len(centres)) == 0, "hit %d", i)
	}
	// The linked node deleted, its copies are still returned (it stays a
	// waypoint); deleted copies are not.
	g.Delete(0)
	g.Delete(4)
	hits := g.Search(centres[0], 20, 40)
	require.Len(t, hits, 20)
	for _, h := range hits {
		require.NotContains(t, []int64{0, 4}, h.ID)
		require.Zero(t, h.ID%int64(len(centres)))
	}
	for i := 0; i < 900; i += len(centres) {
		g.Delete(int64(i))
	}
	for _, h := range g.Search(centres[0], 20, 40) {
		require.NotZero(t, h.ID%int64(len(centres)), "every copy deleted")
	}
}

// dotsInt8 gives each node dotInt8's value with every kernel the CPU has,
// at every length, including the tail past a multiple of 32.
func TestDotsInt8(t *testing.T) {
	avx2, sse41 := haveAVX2, haveSSE41
	t.Cleanup(func() { haveAVX2, haveSSE41 = avx2, sse41 })
	for _, k := range []struct {
		name        string
		avx2, sse41 bool
	}{{"avx2", avx2, sse41}, {"sse4.1", false, sse41}, {"go", false, false}} {
		t.Run(k.name, func(t *testing.T) {
			haveAVX2, haveSSE41 = k.avx2, k.sse41
			rng := rand.New(rand.NewPCG(5, 6))
			for _, dims := range []int{0, 1, 16, 31, 32, 33, 48, 64, 100, 256, 257, 768} {
				const n = 40
				codes := make([]int8, n*dims)
				for i := range codes {
					codes[i] = int8(rng.IntN(255) - 127)
				}
				q := make([]int8, dims)
				for i := range q {
					q[i] = int8(rng.IntN(255) - 127)
				}
				for _, nodes := range [][]int32{nil, {0}, {n - 1, 0, 7}, {3, 3, 12, 39, 1, 22, 5, 30, 31, 2, 17}} {
					out := make([]int32, len(nodes))
					dotsInt8(q, codes, dims, nodes, out)
					for i, o := range nodes {
						require.Equal(t, dotInt8Go(q, codes[int(o)*dims:int(o+1)*dims]), out[i], "dims=%d node=%d", dims, o)
					}
				}
			}
		})
	}
}

// referenceSearchLayer is searchLayer as it was before its distances were
// taken a batch at a time (dotsInt8) and its list's farthest replaced in
// place (rank5, issue 32): a distance per node, push then pop.
func referenceSearchLayer(g *Graph, q query, eps []cand, ef, l int, returnable func(int32) bool) []cand {
	vis := &visited{}
	vis.reset(len(g.ids))
	var cands minHeap
	var res maxHeap
	for _, e := range eps {
		vis.mark(e.node)
		cands.push(e)
		if returnable == nil || returnable(e.node) {
			res.push(e)
		}
	}
	for len(cands) > 0 {
		c := cands.pop()
		if len(res) >= ef && c.d > res[0].d {
			break
		}
		for _, o := range g.neighbours(c.node, l) {
			if vis.seen(o) {
				continue
			}
			vis.mark(o)
			d := g.dist(q, o)
			if len(res) < ef || d < res[0].d {
				cands.push(cand{d, o})
				if returnable == nil || returnable(o) {
					res.push(cand{d, o})
					if len(res) > ef {
						res.pop()
					}
				}
			}
		}
	}
	out := append([]cand(nil), res...)
	sortCands(out)
	return out
}

// A walk finds the same nodes at the same distances, bit for bit, as the
// reference walk, on the codes and on the float32 vectors, with deleted
// nodes and copies, at the service's ef and others.
func TestWalkMatchesReference(t *testing.T) {
	vs := clustered(4000, 64, 20, 11)
	for i := 0; i < 200; i++ { // copies of linked nodes
		vs[3000+i] = vs[i]
	}
	g := build(vs)
	for i := 0; i < len(vs); i += 7 {
		g.Delete(int64(i))
	}
	for qi, qv := range clustered(60, 64, 20, 12) {
		exact := query{v: qv, inv: invNorm(qv)}
		coded := exact
		coded.codes, coded.scale = quantize(nil, qv, exact.inv, g.cfg.Dims)
		for _, q := range []query{coded, exact} {
			ep := g.entry
			epd := g.dist(q, ep)
			for l := g.top; l > 0; l-- {
				ep, epd = g.greedy(q, ep, epd, l)
			}
			for _, ef := range []int{1, 10, 100, 400} {
				want := referenceSearchLayer(g, q, []cand{{epd, ep}}, ef, 0, g.returnable)
				got := g.searchLayer(q, []cand{{epd, ep}}, ef, 0, g.visited(), g.returnable, nil)
				require.Equal(t, want, got, "query %d, ef %d, coded %t", qi, ef, q.codes != nil)
			}
		}
	}
}
