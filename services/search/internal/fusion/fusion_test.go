package fusion

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hand-computed, k=60, weights 1/1:
//
//	bm25:   A(10) B(5) C(2)      vector: B(0.9) D(0.5) A(-0.2)
//	A = 1/61 + 1/63 = 0.032266   B = 1/62 + 1/61 = 0.032522
//	C = 1/63        = 0.015873   D = 1/62        = 0.016129
//	maxFused = 2/61 = 0.032787
func TestRRFHandComputed(t *testing.T) {
	const A, B, C, D = 1, 2, 3, 4
	bm := []Candidate{{A, 10}, {B, 5}, {C, 2}}
	vec := []Candidate{{B, 0.9}, {D, 0.5}, {A, -0.2}}
	got := RRF(bm, vec, DefaultOptions())
	want := []Result{
		{ChunkID: B, HybridScore: 0.991935, BM25Score: 0.5, SimilarityScore: 0.9, BM25Rank: 2, VectorRank: 1, ScoreType: ScoreHybrid},
		{ChunkID: A, HybridScore: 0.984127, BM25Score: 1, SimilarityScore: 0, BM25Rank: 1, VectorRank: 3, ScoreType: ScoreHybrid},
		{ChunkID: D, HybridScore: 0.491935, BM25Score: 0, SimilarityScore: 0.5, BM25Rank: 0, VectorRank: 2, ScoreType: ScoreVector},
		{ChunkID: C, HybridScore: 0.484127, BM25Score: 0.2, SimilarityScore: 0, BM25Rank: 3, VectorRank: 0, ScoreType: ScoreBM25},
	}
	require.Len(t, got, len(want))
	for i, w := range want {
		g := got[i]
		require.Equal(t, w.ChunkID, g.ChunkID, "rank %d", i)
		require.InDelta(t, w.HybridScore, g.HybridScore, 1e-6)
		require.InDelta(t, w.BM25Score, g.BM25Score, 1e-12)
		require.InDelta(t, w.SimilarityScore, g.SimilarityScore, 1e-12)
		require.Equal(t, w.BM25Rank, g.BM25Rank)
		require.Equal(t, w.VectorRank, g.VectorRank)
		require.Equal(t, w.ScoreType, g.ScoreType)
	}
	require.InDelta(t, -0.2, got[1].Cosine, 1e-12, "raw cosine kept")
	require.InDelta(t, 10, got[1].RawBM25, 1e-12)
}

func TestRRFScoresInUnitRange(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"default", DefaultOptions()},
		{"weighted", Options{K: 5, BM25Weight: 1, VectorWeight: 0.15}},
		{"vector off", Options{K: 60, BM25Weight: 1, VectorWeight: -1}},
		{"zero value", Options{}},
	}
	bm := []Candidate{{1, 3}, {2, 2}, {3, 1}}
	vec := []Candidate{{1, 1.2}, {4, 0.3}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RRF(bm, vec, tc.opts)
			require.Len(t, got, 4)
			require.InDelta(t, 1.0, got[0].HybridScore, 1e-12, "#1 in both lists scores 1")
			for _, r := range got {
				for _, s := range []float64{r.HybridScore, r.BM25Score, r.SimilarityScore} {
					require.GreaterOrEqual(t, s, 0.0)
					require.LessOrEqual(t, s, 1.0)
				}
			}
		})
	}
}

func TestRRFTiesBreakOnChunkID(t *testing.T) {
	// 9 is first in BM25, 3 first in vector: equal fused score.
	got := RRF([]Candidate{{9, 1}}, []Candidate{{3, 0.5}}, DefaultOptions())
	require.Equal(t, int64(3), got[0].ChunkID)
	require.Equal(t, int64(9), got[1].ChunkID)
	require.Equal(t, got[0].HybridScore, got[1].HybridScore)
	require.InDelta(t, 0.5, got[0].HybridScore, 1e-12)
}

func TestRRFDuplicatesAndLimit(t *testing.T) {
	got := RRF([]Candidate{{1, 5}, {1, 4}, {2, 3}}, nil, Options{Limit: 1})
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].BM25Rank, "first occurrence wins")
	require.Empty(t, RRF(nil, nil, DefaultOptions()))
}

func TestFromSingleRetriever(t *testing.T) {
	kw := FromBM25([]Candidate{{5, 8}, {2, 4}, {7, 4}})
	require.Equal(t, []int64{5, 2, 7}, ids(kw))
	require.InDelta(t, 0.5, kw[1].HybridScore, 1e-12)
	require.Equal(t, ScoreBM25, kw[0].ScoreType)

	vs := FromVector([]Candidate{{5, 0.8}, {2, -0.1}})
	require.InDelta(t, 0.8, vs[0].HybridScore, 1e-12)
	require.Zero(t, vs[1].SimilarityScore)
	require.Equal(t, ScoreVector, vs[1].ScoreType)
}

func TestConvex(t *testing.T) {
	bm := []Candidate{{1, 10}, {2, 6}, {3, 2}}
	vec := []Candidate{{3, 0.9}, {2, 0.5}, {4, 0.1}}
	// bm25 min-max: 1->1, 2->0.5, 3->0; vector: 3->1, 2->0.5, 4->0.
	got := Convex(bm, vec, 0.8, 0)
	require.Equal(t, []int64{1, 2, 3, 4}, ids(got))
	require.InDelta(t, 0.8, got[0].HybridScore, 1e-12)
	require.InDelta(t, 0.5, got[1].HybridScore, 1e-12)
	require.InDelta(t, 0.2, got[2].HybridScore, 1e-12)
	require.InDelta(t, 0.0, got[3].HybridScore, 1e-12)
	require.Len(t, Convex(bm, vec, 0.8, 2), 2)
}

func ids(rs []Result) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ChunkID
	}
	return out
}

func TestDuplicates(t *testing.T) {
	v := []float32{1, 0, 0}
	near := []float32{0.99, 0.141, 0} // cos 0.99
	far := []float32{0.8, 0.6, 0}     // cos 0.8
	keys := []DupKey{{10, 1}, {20, 2}, {30, 1}, {40, 4}, {50, 0}, {60, 0}, {70, 1}, {80, 0}}
	key := func(j int) DupKey { return keys[j] }
	// 30 has the same content as 10, 40 is a near-duplicate of 10, 50's
	// vector has another dimension (never compared), 60's is unknown.
	// 70 and 80 are beyond the window: identical content only.
	window := [][]float32{v, far, nil, near, {1, 0}, nil}
	d := NewDuplicates(window, 0)
	type flags struct {
		dup     bool
		similar []int64
	}
	want := []flags{{}, {}, {true, []int64{10}}, {true, []int64{10}}, {}, {}, {true, []int64{10, 30}}, {}}
	for i, w := range want {
		dup, similar := d.Of(i, key)
		require.Equal(t, w, flags{dup, similar}, "result %d", i)
	}

	d = NewDuplicates(window, 0.7)
	dup, similar := d.Of(1, key)
	require.True(t, dup, "a lower threshold catches the 0.8 pair")
	require.Equal(t, []int64{10}, similar)
}

// Hand-computed convex fusion, BM25 share 0.7, on the lists above:
//
//	bm25 min-max (min 2, span 8):     A 1      B 0.375  C 0
//	vector min-max (min -0.2, span 1.1): B 1   D 0.6364 A 0
//	A = 0.7          B = 0.2625 + 0.3 = 0.5625
//	D = 0.3*0.6364 = 0.1909            C = 0
//
// Unlike RRF with k=60 and equal weights (B first), the clear BM25 winner
// A stays first: the weaker retriever moves a result only as far as its
// scores stand out.
func TestConvexHandComputed(t *testing.T) {
	const A, B, C, D = 1, 2, 3, 4
	bm := []Candidate{{A, 10}, {B, 5}, {C, 2}}
	vec := []Candidate{{B, 0.9}, {D, 0.5}, {A, -0.2}}
	// Explicit share 0.7 (the builtin preset's value has moved with its
	// model; these hand-computed figures pin the method).
	got := Fuse(bm, vec, Options{Method: MethodConvex, Alpha: 0.7})
	want := []struct {
		id    int64
		score float64
		typ   string
	}{{A, 0.7, ScoreHybrid}, {B, 0.5625, ScoreHybrid}, {D, 0.3 * 0.7 / 1.1, ScoreVector}, {C, 0, ScoreBM25}}
	require.Len(t, got, len(want))
	for i, w := range want {
		require.Equal(t, w.id, got[i].ChunkID, "rank %d", i)
		require.InDelta(t, w.score, got[i].HybridScore, 1e-9)
		require.Equal(t, w.typ, got[i].ScoreType)
	}
	require.InDelta(t, 0.5, got[1].BM25Score, 1e-12, "BM25Score stays raw/top")
	require.InDelta(t, 0.9, got[1].SimilarityScore, 1e-12)

	require.EqualValues(t, B, Fuse(bm, vec, DefaultOptions())[0].ChunkID, "RRF k=60 1/1 ranks B first")
}

// A convex fusion with one list missing (no model yet, a failed query
// embedding) ranks by the other alone on the full 0..1 scale.
func TestConvexWithOneListMissing(t *testing.T) {
	bm := []Candidate{{1, 10}, {2, 5}, {3, 2}}
	got := Fuse(bm, nil, BuiltinOptions())
	require.Len(t, got, 3)
	for i, w := range []float64{1, 0.375, 0} {
		require.EqualValues(t, i+1, got[i].ChunkID)
		require.InDelta(t, w, got[i].HybridScore, 1e-12)
	}
	vec := []Candidate{{7, 0.8}, {8, 0.4}}
	got = Fuse(nil, vec, BuiltinOptions())
	require.EqualValues(t, 7, got[0].ChunkID)
	require.InDelta(t, 1, got[0].HybridScore, 1e-12)
	require.InDelta(t, 0, got[1].HybridScore, 1e-12)
}

// sortResults orders as sort.SliceStable with the same comparison did
// (score descending, ties by ascending id), for any keys: ties, repeated
// ids, NaN.
func TestSortResultsAsSliceStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []float64{0, 0.25, 0.5, 0.5, 1, math.NaN(), math.Inf(-1)}
	for trial := range 2000 {
		rs := make([]Result, rng.IntN(90))
		for i := range rs {
			rs[i] = Result{ChunkID: int64(rng.IntN(40)), Fused: keys[rng.IntN(len(keys))], BM25Rank: i}
		}
		want := slices.Clone(rs)
		sort.SliceStable(want, func(i, j int) bool {
			a, b := want[i].Fused, want[j].Fused
			if a != b {
				return a > b
			}
			return want[i].ChunkID < want[j].ChunkID
		})
		sortResults(rs, func(r *Result) float64 { return r.Fused })
		for i := range rs {
			require.Equal(t, want[i].BM25Rank, rs[i].BM25Rank, "trial %d, place %d", trial, i)
		}
	}
}

// referenceSort is sortResults as sort.SliceStable did it.
func referenceSort(rs []Result, key func(Result) float64) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := key(rs[i]), key(rs[j])
		if a != b {
			return a > b
		}
		return rs[i].ChunkID < rs[j].ChunkID
	})
}

// referenceRRF is RRF as it was before it sorted keys and kept no
// pointer per result (rank5, issue 32).
func referenceRRF(bm25, vector []Candidate, opts Options) []Result {
	opts = opts.withDefaults()
	byID := map[int64]*Result{}
	var order []*Result
	get := func(id int64) *Result {
		if r, ok := byID[id]; ok {
			return r
		}
		r := &Result{ChunkID: id}
		byID[id] = r
		order = append(order, r)
		return r
	}
	topBM25 := 0.0
	for _, c := range bm25 {
		topBM25 = math.Max(topBM25, c.Score)
	}
	for i, c := range bm25 {
		r := get(c.ChunkID)
		if r.BM25Rank != 0 {
			continue
		}
		r.BM25Rank, r.RawBM25 = i+1, c.Score
		if topBM25 > 0 {
			r.BM25Score = c.Score / topBM25
		}
		r.Fused += opts.BM25Weight / (opts.K + float64(i+1))
	}
	for i, c := range vector {
		r := get(c.ChunkID)
		if r.VectorRank != 0 {
			continue
		}
		r.VectorRank, r.Cosine, r.SimilarityScore = i+1, c.Score, clamp01(c.Score)
		r.Fused += opts.VectorWeight / (opts.K + float64(i+1))
	}
	maxFused := (opts.BM25Weight + opts.VectorWeight) / (opts.K + 1)
	out := make([]Result, len(order))
	for i, r := range order {
		if maxFused > 0 {
			r.HybridScore = r.Fused / maxFused
		}
		switch {
		case r.BM25Rank > 0 && r.VectorRank > 0:
			r.ScoreType = ScoreHybrid
		case r.BM25Rank > 0:
			r.ScoreType = ScoreBM25
		default:
			r.ScoreType = ScoreVector
		}
		out[i] = *r
	}
	referenceSort(out, func(r Result) float64 { return r.Fused })
	if opts.Limit > 0 && len(out) > opts.Limit {
		out = out[:opts.Limit]
	}
	return out
}

// referenceConvex is Convex as it was before rank5, on referenceRRF.
func referenceConvex(bm25, vector []Candidate, alpha float64, limit int) []Result {
	alpha = clamp01(alpha)
	mm := func(list []Candidate) (lo, span float64) {
		if len(list) == 0 {
			return 0, 0
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, c := range list {
			lo, hi = math.Min(lo, c.Score), math.Max(hi, c.Score)
		}
		return lo, hi - lo
	}
	out := referenceRRF(bm25, vector, Options{K: 60, BM25Weight: 1, VectorWeight: 1})
	bLo, bSpan := mm(bm25)
	vLo, vSpan := mm(vector)
	for i := range out {
		r := &out[i]
		var b, v float64
		if r.BM25Rank > 0 {
			b = 1
			if bSpan > 0 {
				b = (r.RawBM25 - bLo) / bSpan
			}
		}
		if r.VectorRank > 0 {
			v = 1
			if vSpan > 0 {
				v = (r.Cosine - vLo) / vSpan
			}
		}
		r.Fused = alpha*b + (1-alpha)*v
		r.HybridScore = r.Fused
	}
	referenceSort(out, func(r Result) float64 { return r.Fused })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// referenceFromBM25 and referenceFromVector are FromBM25 and FromVector as
// they were before rank5: the same lists, sorted by referenceSort.
func referenceFromBM25(list []Candidate) []Result {
	out := make([]Result, 0, len(list))
	top := 0.0
	for _, c := range list {
		top = math.Max(top, c.Score)
	}
	for i, c := range list {
		r := Result{ChunkID: c.ChunkID, RawBM25: c.Score, BM25Rank: i + 1, ScoreType: ScoreBM25}
		if top > 0 {
			r.BM25Score = c.Score / top
		}
		r.HybridScore = r.BM25Score
		out = append(out, r)
	}
	referenceSort(out, func(r Result) float64 { return r.RawBM25 })
	return out
}

func referenceFromVector(list []Candidate) []Result {
	out := make([]Result, 0, len(list))
	for i, c := range list {
		s := clamp01(c.Score)
		out = append(out, Result{ChunkID: c.ChunkID, Cosine: c.Score, SimilarityScore: s, HybridScore: s, VectorRank: i + 1, ScoreType: ScoreVector})
	}
	referenceSort(out, func(r Result) float64 { return r.Cosine })
	return out
}

// resultBits spells every field of rs, floats by their bits (NaN equals
// itself), for comparing lists exactly.
func resultBits(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%d %x %x %x %x %x %x %d %d %s", r.ChunkID, math.Float64bits(r.HybridScore),
			math.Float64bits(r.BM25Score), math.Float64bits(r.SimilarityScore), math.Float64bits(r.Fused),
			math.Float64bits(r.RawBM25), math.Float64bits(r.Cosine), r.BM25Rank, r.VectorRank, r.ScoreType)
	}
	return out
}

// RRF, Convex, FromBM25 and FromVector give, bit for bit, what they gave
// before rank5: random lists with shared and repeated ids, tied, NaN and
// infinite scores, with and without a limit.
func TestFusionAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	scores := []float64{0, 0.25, 0.5, 0.5, 1, 3.5, -0.2, math.NaN(), math.Inf(1)}
	list := func() []Candidate {
		out := make([]Candidate, rng.IntN(120))
		for i := range out {
			s := rng.Float64() * 10
			if rng.IntN(4) == 0 {
				s = scores[rng.IntN(len(scores))]
			}
			out[i] = Candidate{ChunkID: int64(rng.IntN(150)), Score: s}
		}
		return out
	}
	for trial := range 1000 {
		bm, vec := list(), list()
		limit := []int{0, 0, 10, 100}[rng.IntN(4)]
		opts := Options{K: float64(rng.IntN(80)), BM25Weight: rng.Float64(), VectorWeight: rng.Float64(), Limit: limit}
		require.Equal(t, resultBits(referenceRRF(bm, vec, opts)), resultBits(RRF(bm, vec, opts)), "trial %d rrf", trial)
		alpha := rng.Float64()
		require.Equal(t, resultBits(referenceConvex(bm, vec, alpha, limit)), resultBits(Convex(bm, vec, alpha, limit)), "trial %d convex", trial)
		require.Equal(t, resultBits(referenceFromBM25(bm)), resultBits(FromBM25(bm)), "trial %d from bm25", trial)
		require.Equal(t, resultBits(referenceFromVector(vec)), resultBits(FromVector(vec)), "trial %d from vector", trial)
		for _, o := range []Options{BuiltinOptions(), DefaultOptions()} {
			want := referenceRRF(bm, vec, o)
			if o.Method == MethodConvex { // Fuse's alpha when a list is empty
				alpha := o.Alpha
				switch {
				case len(vec) == 0:
					alpha = 1
				case len(bm) == 0:
					alpha = 0
				}
				want = referenceConvex(bm, vec, alpha, o.Limit)
			}
			require.Equal(t, resultBits(want), resultBits(Fuse(bm, vec, o)), "trial %d fuse %s", trial, o.Method)
		}
	}
}
