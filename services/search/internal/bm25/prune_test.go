package bm25

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrunedSearchEqualsFullScoring checks the pruned walk against BM25
// computed from scratch for every live chunk: the same hits, scores and
// matched terms, on a corpus whose common lists are long enough to be
// pruned, through tombstones, compaction, huge frequencies, filters,
// repeated and unknown query terms, and k from 1 to past the matches. With
// a gap, each chunk comes after that many tombstoned ones (kept by a frozen
// view until the compaction), so the ordinals span several of a posting
// list's segments, and the compaction renumbers them across segments.
func TestPrunedSearchEqualsFullScoring(t *testing.T) {
	for _, gap := range []int{0, 40} {
		t.Run("gap "+strconv.Itoa(gap), func(t *testing.T) { testPrunedSearch(t, gap) })
	}
}

func testPrunedSearch(t *testing.T, gap int) {
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
	view := ix.Freeze()
	defer view.Release()
	filler := int64(0)
	add := func(id int64) {
		for range gap {
			filler--
			ix.Replace(Doc{ChunkID: filler, Terms: []string{"filler"}})
			require.True(t, ix.Remove(filler))
		}
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
		full := opts
		full.noPrune = true
		// The same hits, scores (to the bit) and terms as the full walk.
		require.Equal(t, ix.Search(q, full), got, "query %v %+v", q, opts)

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
	t.Cleanup(func() { onPrune = nil })
	var mu sync.Mutex
	onPrune = func() { mu.Lock(); pruned++; mu.Unlock() }
	options := []SearchOptions{{K: 1}, {K: 10}, {}, {K: 5000}, {Category: "c2", K: 20}, {Keep: odd, K: 50}}
	run := func(t *testing.T) {
		pruned = 0
		qs := queries()
		// Three readers at once first (the bounds cache is shared), each
		// compared with the full walk, then the full check one at a time.
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Go(func() {
				for i := r; i < len(qs); i += 3 {
					for _, opts := range options {
						full := opts
						full.noPrune = true
						assert.Equal(t, ix.Search(qs[i], full), ix.Search(qs[i], opts), "query %v %+v", qs[i], opts)
					}
				}
			})
		}
		wg.Wait()
		for _, q := range qs {
			for _, opts := range options {
				check(t, q, opts)
			}
		}
		require.Positive(t, pruned, "no search pruned: the corpus does not test the pruning")
		t.Logf("%d of 360 searches pruned", pruned)
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
	if gap > 0 {
		require.Greater(t, len(ix.postings[ix.termIDs[word(5)]].segs), 4, "the ordinals span few segments")
	}
	view.Release()
	ix.Compact()
	require.Len(t, ix.chunkIDs, len(docs), "compacted")
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
	// Segments with high bits 0, 1 and 3 (none with 2): runs of different
	// density, so both the merge and the galloping search are taken.
	var docs []uint32
	for i := uint32(0); i < 1000; i++ {
		docs = append(docs, 3*i+1) // 1, 4, 7, ...
	}
	for i := uint32(0); i < 500; i++ {
		docs = append(docs, 70_000+5*i)
	}
	for i := uint32(0); i < 100; i++ {
		docs = append(docs, 3<<16+i)
	}
	var pl postingList
	for _, d := range docs {
		pl.add(d, 1)
	}
	require.Len(t, pl.segs, 3)
	dense := func(from, to uint32) []uint32 {
		return slices.Collect(func(yield func(uint32) bool) {
			for c := from; c < to; c++ {
				if !yield(c) {
					return
				}
			}
		})
	}
	for _, cands := range [][]uint32{
		{0, 1, 2, 4, 2998, 2999, 3000, 5000},                              // sparse in one segment: galloping
		{1, 500, 1000, 1501, 2998, 70_005, 2<<16 + 7, 3<<16 + 99},         // sparse, across every segment
		{2 << 16, 2<<16 + 1, 4 << 16},                                     // none: a missing segment, past the end
		append(dense(0, 1200), append(dense(69_990, 72_600), 3<<16+5)...), // dense: merging
	} {
		var got, want []uint32
		probe(&pl, cands, func(j, i int) {
			require.Equal(t, docs[i], cands[j])
			got = append(got, cands[j])
		})
		for _, c := range cands {
			if _, ok := slices.BinarySearch(docs, c); ok {
				want = append(want, c)
			}
		}
		require.Equal(t, want, got)
		for _, c := range cands {
			i, found := pl.find(c)
			_, want := slices.BinarySearch(docs, c)
			require.Equal(t, want, found, "find %d", c)
			if found {
				require.Equal(t, docs[i], c)
			}
		}
	}
	probe(&postingList{}, []uint32{1}, func(int, int) { t.Fatal("hit in an empty list") })
	for from := 0; from <= len(docs); from += 250 {
		var got []uint32
		for i, ord := range pl.allFrom(from) {
			require.Equal(t, from+len(got), i)
			got = append(got, ord)
		}
		require.Equal(t, docs[from:], got, "from %d", from)
	}
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

// TestTieWithinRoundingKept is the reviewer's case: a chunk whose exact
// reach is an ulp short of theta ends, in float32, tied with the k-th and
// wins on its chunk id, so it must survive. The last query term is in
// nearly every chunk and adds less than an ulp.
func TestTieWithinRoundingKept(t *testing.T) {
	const (
		nFill = 1000
		fillL = 50
		zX    = 60
		m     = 3400
		total = 60000
	)
	p := DefaultParams()
	live := nFill + 3
	avgdl := float64(total) / float64(live)
	c0, c1 := float32(p.K1*(1-p.B)), float32(p.K1*p.B/avgdl)
	wA := float32(float64(m) * IDF(live, 2) * (p.K1 + 1))
	score := func(tf, l int) float32 { f := float32(tf); return wA * f / (f + c0 + c1*float32(l)) }
	type combo struct{ tf, l int }
	ys := map[uint32]combo{}
	for tf := 1; tf < 300; tf++ {
		for pad := range 400 {
			ys[math.Float32bits(score(tf, tf+pad))] = combo{tf, tf + pad}
		}
	}
	var x, y combo
	found := false
	for tf := 1; tf < 300 && !found; tf++ {
		for pad := range 400 {
			l := tf + zX + pad
			px := score(tf, l)
			if c, ok := ys[math.Float32bits(px)+1]; ok && px >= 32768 {
				x, y, found = combo{tf, l}, c, true
				break
			}
		}
	}
	require.True(t, found, "no pair of chunks an ulp apart")
	rep := func(n int, s string) []string { return slices.Repeat([]string{s}, n) }
	ix := New(p)
	for i := range nFill {
		ix.Replace(Doc{ChunkID: int64(100 + i), Terms: append([]string{"z"}, rep(fillL-1, "q")...)})
	}
	// Chunk 1 scores an ulp below chunk 2 on "a" and has many "z".
	ix.Replace(Doc{ChunkID: 1, Terms: slices.Concat(rep(x.tf, "a"), rep(zX, "z"), rep(x.l-x.tf-zX, "q"))})
	ix.Replace(Doc{ChunkID: 2, Terms: slices.Concat(rep(y.tf, "a"), rep(y.l-y.tf, "q"))})
	ix.Replace(Doc{ChunkID: 3, Terms: append([]string{"z"}, rep(total-nFill*fillL-x.l-y.l-1, "q")...)}) // the mean length
	q := append(rep(m, "a"), "z")
	full := ix.Search(q, SearchOptions{K: 1, noPrune: true})
	require.Equal(t, full, ix.Search(q, SearchOptions{K: 1}))
}

// TestBoundsStayTight: folding appended postings into a cached bound must
// not compound its margin (it did once: 1.65 times the maximum after 5,000
// searches between appends), and removed chunks do not count (with k1 = 0
// a removed chunk's big frequency, gone from bigTF, made the bound NaN).
func TestBoundsStayTight(t *testing.T) {
	ix := New(DefaultParams())
	add := func(i int) {
		ix.Replace(Doc{ChunkID: int64(i), Terms: []string{"x", "y" + strconv.Itoa(i%7), "z"}})
	}
	for i := range 600 {
		add(i)
	}
	q := []string{"x", "z"}
	ix.Search(q, SearchOptions{K: 10})
	id := ix.termIDs["x"]
	f0 := ix.bounds.frac[id]
	require.Positive(t, f0)
	for i := 600; i < 3600; i++ {
		add(i)
		ix.Search(q, SearchOptions{K: 10})
	}
	require.Equal(t, f0, ix.bounds.frac[id], "the same chunks' maximum")

	ix = New(Params{K1: 0, B: 0.75})
	for i := range 600 {
		terms := []string{"x", "w"}
		if i == 3 {
			terms = append(terms, rep300("x")...)
		}
		ix.Replace(Doc{ChunkID: int64(i), Terms: terms})
	}
	ix.Remove(3)
	ix.Search([]string{"x", "w"}, SearchOptions{K: 10})
	f := ix.bounds.frac[ix.termIDs["x"]]
	require.False(t, math.IsNaN(float64(f)))
	require.Equal(t, float32(1), f)
}

func rep300(s string) []string { return slices.Repeat([]string{s}, 300) }

// TestParamsOutOfRangeRefused: the bounds and the accumulator hold for
// BM25's range only, so anything else is refused where it is set.
func TestParamsOutOfRangeRefused(t *testing.T) {
	for _, p := range []Params{{K1: -0.5, B: 0.75}, {K1: -1, B: 0.75}, {K1: 1.2, B: -0.1}, {K1: 1.2, B: 1.5},
		{K1: math.NaN(), B: 0.75}, {K1: 1.2, B: math.NaN()}, {K1: math.Inf(1), B: 0.75}} {
		require.Panics(t, func() { New(p) }, "%+v", p)
		require.Panics(t, func() { New(DefaultParams()).SetParams(p) }, "%+v", p)
	}
	for _, p := range []Params{{K1: 0, B: 0}, {K1: 0, B: 1}, {K1: 3, B: 1}} {
		require.NotPanics(t, func() { New(p).SetParams(p) }, "%+v", p)
	}
}
