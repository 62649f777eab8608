package bm25

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrunedSearchEqualsFullScoring checks the pruned walk against BM25
// computed from scratch for every live chunk: the same hits, scores and
// matched terms, on a corpus whose common lists are long enough to be
// pruned, through tombstones, compaction, huge frequencies, filters,
// repeated and unknown query terms, and k from 1 to past the matches.
func TestPrunedSearchEqualsFullScoring(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	zipf := rand.NewZipf(rng, 1.07, 2, 3999)
	word := func(r uint64) string { return "t" + strconv.FormatUint(r, 10) }
	docs := map[int64]Doc{}
	var (
		df    map[string]int // nil after a change to docs
		avgdl float64
		tfs   map[int64]map[string]int
	)
	ix := New(DefaultParams())
	add := func(id int64) {
		n := 20 + rng.IntN(120)
		d := Doc{ChunkID: id, Category: "c" + strconv.Itoa(int(id)%5), Terms: make([]string, n)}
		for i := range d.Terms {
			d.Terms[i] = word(zipf.Uint64())
		}
		if id%997 == 0 { // a frequency past the 8-bit posting field
			for range 300 {
				d.Terms = append(d.Terms, word(40))
			}
		}
		docs[id], df = d, nil
		ix.Replace(d)
	}
	for id := range int64(8_000) {
		add(id)
	}

	reference := func(q []string, opts SearchOptions) map[int64]float64 {
		p := ix.Params()
		if df == nil {
			df, tfs = map[string]int{}, map[int64]map[string]int{}
			var total float64
			for id, d := range docs {
				total += float64(len(d.Terms))
				tf := map[string]int{}
				for _, t := range d.Terms {
					if tf[t]++; tf[t] == 1 {
						df[t]++
					}
				}
				tfs[id] = tf
			}
			avgdl = total / float64(len(docs))
		}
		qtf := map[string]int{}
		for _, t := range q {
			qtf[t]++
		}
		out := map[int64]float64{}
		for id, d := range docs {
			if opts.Category != "" && d.Category != opts.Category {
				continue
			}
			if opts.Keep != nil && !opts.Keep(d.Category) {
				continue
			}
			tf := tfs[id]
			var s float64
			for t, n := range qtf {
				if f := float64(tf[t]); f > 0 {
					norm := p.K1 * (1 - p.B + p.B*float64(len(d.Terms))/avgdl)
					s += float64(n) * IDF(len(docs), df[t]) * f * (p.K1 + 1) / (f + norm)
				}
			}
			if s > 0 {
				out[id] = s
			}
		}
		return out
	}
	check := func(t *testing.T, q []string, opts SearchOptions) {
		want := reference(q, opts)
		got := ix.Search(q, opts)

		k := opts.K
		if k <= 0 {
			k = 100
		}
		require.Len(t, got, min(k, len(want)), "query %v", q)
		best := slices.Sorted(func(yield func(float64) bool) {
			for _, s := range want {
				if !yield(-s) {
					return
				}
			}
		})
		for i, h := range got {
			ws, ok := want[h.ChunkID]
			require.True(t, ok, "query %v: hit %d matches nothing", q, h.ChunkID)
			require.InDelta(t, ws, h.Score, 1e-4*ws, "query %v: score of %d", q, h.ChunkID)
			// The i-th hit scores the i-th best (equal scores may swap).
			require.InDelta(t, -best[i], h.Score, 1e-4*ws, "query %v: rank %d", q, i)
			var matched []string
			for j, term := range q {
				if !slices.Contains(q[:j], term) && slices.Contains(docs[h.ChunkID].Terms, term) {
					matched = append(matched, term)
				}
			}
			require.Equal(t, matched, h.MatchedTerms, "query %v: matched terms of %d", q, h.ChunkID)
		}
	}
	queries := func() [][]string {
		var qs [][]string
		for range 30 {
			n := 1 + rng.IntN(7)
			q := make([]string, 0, n+2)
			for len(q) < n {
				r := zipf.Uint64()
				if r < 5 {
					continue
				}
				q = append(q, word(r))
			}
			switch rng.IntN(4) {
			case 0:
				q = append(q, q[0]) // repeated
			case 1:
				q = append(q, "unknown-term")
			case 2:
				q = append(q, word(10+uint64(rng.IntN(20)))) // a common one
			}
			qs = append(qs, q)
		}
		return qs
	}
	odd := func(c string) bool { return c == "c1" || c == "c3" }
	pruned := 0
	onPrune = func() { pruned++ }
	t.Cleanup(func() { onPrune = nil })
	run := func(t *testing.T) {
		pruned = 0
		for _, q := range queries() {
			for _, opts := range []SearchOptions{{K: 1}, {K: 10}, {}, {K: 5000}, {Category: "c2", K: 20}, {Keep: odd, K: 50}} {
				check(t, q, opts)
			}
		}
		require.Positive(t, pruned, "no search pruned: the corpus does not test the pruning")
		t.Logf("%d of 180 searches pruned", pruned)
	}
	t.Run("fresh", run)
	for id := int64(0); id < 8_000; id += 3 { // tombstones, below the compaction share
		if id%6 == 0 {
			ix.Remove(id)
			delete(docs, id)
			df = nil
		}
	}
	t.Run("tombstones", run)
	for id := int64(8_000); id < 9_000; id++ { // appended postings after bounds were cached
		add(id)
	}
	t.Run("appended", run)
	for id := int64(1); id < 8_000; id += 3 {
		ix.Remove(id)
		delete(docs, id)
		df = nil
	}
	ix.Compact()
	t.Run("compacted", run)
	ix.SetParams(Params{K1: 0.9, B: 0.4})
	t.Run("new parameters", run)
}

func TestKthBest(t *testing.T) {
	scores := []float32{5, 1, 9, 3, 7, 7, 2}
	touched := []uint32{0, 1, 2, 3, 4, 5, 6}
	for k, want := range map[int]float32{1: 9, 2: 7, 3: 7, 4: 5, 5: 3, 7: 1} {
		require.Equal(t, want, kthBest(scores, touched, k), "k=%d", k)
	}
	require.Equal(t, float32(7), kthBest(scores, []uint32{2, 4, 1}, 2), "only the touched count")
}

func TestProbe(t *testing.T) {
	docs := make([]uint32, 0, 1000)
	for i := uint32(0); i < 1000; i++ {
		docs = append(docs, 3*i+1) // 1, 4, 7, ...
	}
	for _, cands := range [][]uint32{
		{0, 1, 2, 4, 2998, 2999, 3000, 5000}, // sparse: galloping
		{1, 500, 1000, 1501, 2998},           // sparse, every hit at once
		slices.Collect(func(yield func(uint32) bool) { // dense: merging
			for c := uint32(0); c < 1200; c++ {
				if !yield(c) {
					return
				}
			}
		}),
	} {
		var got, want []uint32
		probe(docs, cands, func(j, i int) {
			require.Equal(t, docs[i], cands[j])
			got = append(got, cands[j])
		})
		for _, c := range cands {
			if _, ok := slices.BinarySearch(docs, c); ok {
				want = append(want, c)
			}
		}
		require.Equal(t, want, got)
	}
	probe(nil, []uint32{1}, func(int, int) { t.Fatal("hit in an empty list") })
}

func TestMergeRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var scratch []uint32
	for _, nruns := range []int{0, 1, 2, 3, 5, 8} {
		var a []uint32
		var ends []int
		for range nruns {
			run := make([]uint32, rng.IntN(50))
			for i := range run {
				run[i] = uint32(rng.IntN(1000))
			}
			slices.Sort(run)
			a = append(a, run...)
			ends = append(ends, len(a))
		}
		want := slices.Sorted(slices.Values(a))
		var got []uint32
		got, scratch = mergeRuns(a, ends, scratch)
		require.Equal(t, len(want), len(got), "%d runs", nruns)
		if len(want) > 0 {
			require.Equal(t, want, got, "%d runs", nruns)
		}
	}
}
