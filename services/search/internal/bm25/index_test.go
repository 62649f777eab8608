package bm25

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// tiny is a hand-computable corpus. With k1=1.2, b=0.75:
//
//	N=3, avgdl=(3+2+4)/3=3
//	idf(df=1) = ln(1 + 2.5/1.5) = ln(8/3) = 0.980829253
//	idf(df=2) = ln(1 + 1.5/2.5) = ln(1.6) = 0.470003629
//	doc1 "a" tf=2 dl=3: 0.980829*2*2.2/(2+1.2*(0.25+0.75*3/3)) = 1.348640223
//	doc2 "c" tf=1 dl=2: 0.470004*1*2.2/(1+1.2*(0.25+0.75*2/3)) = 0.544214729
//	doc3 "c" tf=3 dl=4: 0.470004*3*2.2/(3+1.2*(0.25+0.75*4/3)) = 0.689338656
func tiny() *Index {
	ix := New(Params{K1: 1.2, B: 0.75})
	ix.ReplaceBatch([]Doc{
		{ChunkID: 1, Category: "x", Terms: []string{"a", "b", "a"}},
		{ChunkID: 2, Category: "y", Terms: []string{"b", "c"}},
		{ChunkID: 3, Category: "x", Terms: []string{"c", "c", "c", "d"}},
	})
	return ix
}

func TestIDF(t *testing.T) {
	require.InDelta(t, 0.980829253, IDF(3, 1), 1e-9)
	require.InDelta(t, 0.470003629, IDF(3, 2), 1e-9)
	require.Greater(t, IDF(10, 10), 0.0, "idf stays positive even for terms in every doc")
}

func TestHandComputedScores(t *testing.T) {
	tests := []struct {
		name  string
		query []string
		opts  SearchOptions
		want  []Hit
	}{
		{"two terms", []string{"a", "c"}, SearchOptions{}, []Hit{
			{ChunkID: 1, Score: 1.348640223, MatchedTerms: []string{"a"}},
			{ChunkID: 3, Score: 0.689338656, MatchedTerms: []string{"c"}},
			{ChunkID: 2, Score: 0.544214729, MatchedTerms: []string{"c"}},
		}},
		{"sum of terms", []string{"b", "c"}, SearchOptions{}, []Hit{
			// doc2: b (tf=1,dl=2) + c (tf=1,dl=2) = 2*0.544214729
			{ChunkID: 2, Score: 1.088429457, MatchedTerms: []string{"b", "c"}},
			{ChunkID: 3, Score: 0.689338656, MatchedTerms: []string{"c"}},
			// doc1: b tf=1 dl=3: 0.470004*2.2/(1+1.2) = 0.470003629
			{ChunkID: 1, Score: 0.470003629, MatchedTerms: []string{"b"}},
		}},
		{"repeated query term counts twice", []string{"a", "a"}, SearchOptions{}, []Hit{
			{ChunkID: 1, Score: 2 * 1.348640223, MatchedTerms: []string{"a"}},
		}},
		{"category filter", []string{"c"}, SearchOptions{Category: "y"}, []Hit{
			{ChunkID: 2, Score: 0.544214729, MatchedTerms: []string{"c"}},
		}},
		{"unknown category", []string{"c"}, SearchOptions{Category: "nope"}, nil},
		{"k truncates", []string{"a", "c"}, SearchOptions{K: 1}, []Hit{
			{ChunkID: 1, Score: 1.348640223, MatchedTerms: []string{"a"}},
		}},
		{"unknown term", []string{"zzz"}, SearchOptions{}, nil},
	}
	ix := tiny()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ix.Search(tc.query, tc.opts)
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				require.Equal(t, tc.want[i].ChunkID, got[i].ChunkID, "rank %d", i)
				require.InDelta(t, tc.want[i].Score, got[i].Score, 1e-5, "rank %d", i)
				require.Equal(t, tc.want[i].MatchedTerms, got[i].MatchedTerms, "rank %d", i)
			}
		})
	}
}

func TestRemoveKeepsStatisticsExact(t *testing.T) {
	ix := tiny()
	require.True(t, ix.Remove(3))
	require.False(t, ix.Remove(3))
	// Now N=2, avgdl=2.5, df(a)=1, df(c)=1: the removed doc must not count.
	//   doc2 c: ln(1+1.5/1.5)*2.2/(1+1.2*(0.25+0.75*2/2.5)) = 0.754912771
	//   doc1 a: ln(2)*2*2.2/(2+1.2*(0.25+0.75*3/2.5))     = 0.902321774
	got := ix.Search([]string{"a", "c", "d"}, SearchOptions{})
	require.Len(t, got, 2)
	require.Equal(t, int64(1), got[0].ChunkID)
	require.InDelta(t, 0.902321774, got[0].Score, 1e-5)
	require.Equal(t, int64(2), got[1].ChunkID)
	require.InDelta(t, 0.754912771, got[1].Score, 1e-5)

	// Compaction changes storage, never scores.
	ix.Compact()
	got2 := ix.Search([]string{"a", "c", "d"}, SearchOptions{})
	require.Equal(t, got, got2)
	st := ix.Stats()
	require.Equal(t, 2, st.Docs)
	require.Equal(t, 0, st.Tombstoned)
	require.Equal(t, 4, st.Postings)
	require.InDelta(t, 2.5, st.AvgDocLen, 1e-12)
}

func TestReplaceAndAdd(t *testing.T) {
	ix := tiny()
	require.ErrorIs(t, ix.Add(Doc{ChunkID: 1, Terms: []string{"q"}}), ErrExists)
	ix.Replace(Doc{ChunkID: 1, Terms: []string{"z"}})
	require.Empty(t, ix.Search([]string{"a"}, SearchOptions{}))
	got := ix.Search([]string{"z"}, SearchOptions{})
	require.Len(t, got, 1)
	require.Equal(t, int64(1), got[0].ChunkID)
	require.Equal(t, 3, ix.Len())
	require.NoError(t, ix.Add(Doc{ChunkID: 9, Terms: nil}))
	require.True(t, ix.Contains(9))
	require.Equal(t, 4, ix.Len())
}

func TestTiesBreakOnChunkID(t *testing.T) {
	ix := New(DefaultParams())
	for _, id := range []int64{42, 7, 19, 3} {
		require.NoError(t, ix.Add(Doc{ChunkID: id, Terms: []string{"same", "words"}}))
	}
	got := ix.Search([]string{"same"}, SearchOptions{})
	ids := []int64{}
	for _, h := range got {
		ids = append(ids, h.ChunkID)
	}
	require.Equal(t, []int64{3, 7, 19, 42}, ids)
	got = ix.Search([]string{"same"}, SearchOptions{K: 2})
	require.Equal(t, int64(3), got[0].ChunkID)
	require.Equal(t, int64(7), got[1].ChunkID)
}

// TestIncrementalEqualsRebuild checks that any sequence of writes leaves the
// index scoring exactly like one built from scratch over the survivors.
func TestIncrementalEqualsRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 50)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("t%d", i)
	}
	randDoc := func(id int64) Doc {
		n := 1 + rng.IntN(20)
		terms := make([]string, n)
		for i := range terms {
			terms[i] = vocab[rng.IntN(len(vocab))]
		}
		return Doc{ChunkID: id, Category: fmt.Sprintf("c%d", rng.IntN(3)), Terms: terms}
	}
	ix := New(DefaultParams())
	state := map[int64]Doc{}
	for step := 0; step < 5000; step++ {
		id := int64(rng.IntN(300))
		switch rng.IntN(3) {
		case 0, 1:
			d := randDoc(id)
			ix.Replace(d)
			state[id] = d
		case 2:
			_, had := state[id]
			require.Equal(t, had, ix.Remove(id))
			delete(state, id)
		}
	}
	fresh := New(DefaultParams())
	for _, d := range state {
		require.NoError(t, fresh.Add(d))
	}
	for q := 0; q < 50; q++ {
		query := []string{vocab[rng.IntN(50)], vocab[rng.IntN(50)], vocab[rng.IntN(50)]}
		opts := SearchOptions{K: 1000}
		if q%5 == 0 {
			opts.Category = "c1"
		}
		a, b := ix.Search(query, opts), fresh.Search(query, opts)
		require.Equal(t, len(b), len(a))
		for i := range a {
			require.Equal(t, b[i].ChunkID, a[i].ChunkID)
			require.InDelta(t, b[i].Score, a[i].Score, 1e-5)
			require.Equal(t, b[i].MatchedTerms, a[i].MatchedTerms)
		}
	}
	require.Equal(t, len(state), ix.Len())
}

func TestConcurrentReadersAndWriter(t *testing.T) {
	ix := tiny()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, h := range ix.Search([]string{"a", "c"}, SearchOptions{}) {
					if math.IsNaN(h.Score) || h.Score <= 0 {
						t.Errorf("bad score %v", h.Score)
					}
				}
			}
		}()
	}
	for i := int64(0); i < 3000; i++ {
		ix.Replace(Doc{ChunkID: 100 + i%500, Terms: []string{"a", "c", "x"}})
		if i%3 == 0 {
			ix.Remove(100 + (i+7)%500)
		}
	}
	close(stop)
	wg.Wait()
}

func TestSearchSeveralCategoriesAndAtomicUpdate(t *testing.T) {
	ix := New(DefaultParams())
	ix.ReplaceBatch([]Doc{
		{ChunkID: 1, Category: "a", Terms: []string{"wombat", "census"}},
		{ChunkID: 2, Category: "b", Terms: []string{"wombat"}},
		{ChunkID: 3, Category: "c", Terms: []string{"wombat", "wombat"}},
	})
	ids := func(hits []Hit) []int64 {
		out := []int64{}
		for _, h := range hits {
			out = append(out, h.ChunkID)
		}
		return out
	}
	all := ids(ix.Search([]string{"wombat"}, SearchOptions{K: 10}))
	require.ElementsMatch(t, []int64{1, 2, 3}, all)
	require.ElementsMatch(t, []int64{1, 3}, ids(ix.Search([]string{"wombat"}, SearchOptions{K: 10, Categories: []string{"a", "c"}})))
	require.ElementsMatch(t, []int64{2}, ids(ix.Search([]string{"wombat"}, SearchOptions{K: 10, Category: "b", Categories: []string{"zzz"}})))
	require.Empty(t, ix.Search([]string{"wombat"}, SearchOptions{K: 10, Categories: []string{"zzz"}}))

	// Replace chunk 1 by chunk 4 in one step: afterwards only the new one
	// exists, and the collection statistics count it once.
	ix.Update([]int64{1}, []Doc{{ChunkID: 4, Category: "a", Terms: []string{"census"}}})
	require.False(t, ix.Contains(1))
	require.True(t, ix.Contains(4))
	require.Equal(t, 3, ix.Len())
	require.Equal(t, []int64{4}, ids(ix.Search([]string{"census"}, SearchOptions{K: 10})))
}

// TestLargeTermFrequencyIsExact pins the compact posting layout: a
// frequency past one byte scores as its full value, before and after
// removals and compaction move ordinals around.
func TestLargeTermFrequencyIsExact(t *testing.T) {
	rep := func(term string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = term
		}
		return out
	}
	want := func(ix *Index, tf, dl int) float64 {
		st := ix.Stats()
		return IDF(st.Docs, 1) * float64(tf) * 2.2 / (float64(tf) + 1.2*(0.25+0.75*float64(dl)/st.AvgDocLen))
	}
	ix := New(Params{K1: 1.2, B: 0.75})
	var filler []Doc
	for i := 0; i < 1100; i++ {
		filler = append(filler, Doc{ChunkID: int64(100 + i), Terms: []string{"f", "g"}})
	}
	ix.ReplaceBatch(filler)
	ix.ReplaceBatch([]Doc{{ChunkID: 1, Terms: append(rep("z", 300), "q")}, {ChunkID: 2, Terms: rep("w", 70000)}})
	hits := ix.Search([]string{"z"}, SearchOptions{K: 1})
	require.Len(t, hits, 1)
	require.InDelta(t, want(ix, 300, 301), hits[0].Score, 1e-4)
	// Remove enough documents before chunk 1 to force a compaction.
	ids := make([]int64, 1100)
	for i := range ids {
		ids[i] = int64(100 + i)
	}
	require.Equal(t, 1100, ix.RemoveBatch(ids))
	require.Equal(t, 0, ix.Stats().Tombstoned, "compacted")
	hits = ix.Search([]string{"z"}, SearchOptions{K: 1})
	require.Len(t, hits, 1)
	require.InDelta(t, want(ix, 300, 301), hits[0].Score, 1e-4)
	hits = ix.Search([]string{"w"}, SearchOptions{K: 1})
	require.InDelta(t, want(ix, 65535, 70000), hits[0].Score, 1e-4, "capped at 16 bits as before")
	require.True(t, ix.Remove(1))
	require.Empty(t, ix.Search([]string{"z"}, SearchOptions{K: 1}))
	ix.Trim()
	require.Len(t, ix.Search([]string{"w"}, SearchOptions{K: 1}), 1)
}

func TestMatchedTerms(t *testing.T) {
	ix := New(DefaultParams())
	ix.ReplaceBatch([]Doc{
		{ChunkID: 1, Terms: []string{"a", "b"}},
		{ChunkID: 2, Terms: []string{"b", "c", "c"}},
		{ChunkID: 3, Terms: []string{"d"}},
	})
	require.True(t, ix.Remove(3))
	terms := []string{"c", "unknown", "b", "c", "a"} // the query's order, a repeat, a term no chunk has
	got := ix.MatchedTerms([]int64{2, 9, 1, 3}, terms)
	require.Equal(t, [][]string{{"c", "b"}, nil, {"b", "a"}, nil}, got, "in the terms' order, once; nothing for unknown or removed chunks")
	require.Equal(t, [][]string{}, ix.MatchedTerms([]int64{}, terms))
}

// referenceMatchedTerms is MatchedTerms as it was before it probed sorted
// ordinals (rank5, issue 32): a binary search per chunk and term.
func referenceMatchedTerms(ix *Index, chunkIDs []int64, terms []string) [][]string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([][]string, len(chunkIDs))
	for i, c := range chunkIDs {
		ord, ok := ix.byChunk[c]
		if !ok {
			continue
		}
		for j, t := range terms {
			id, known := ix.termIDs[t]
			if !known || slices.Contains(terms[:j], t) {
				continue
			}
			if _, found := ix.postings[id].find(ord); found {
				out[i] = append(out[i], t)
			}
		}
	}
	return out
}

// MatchedTerms gives what it gave before rank5: over more than one
// segment of ordinals, with chunks removed, asked twice or unknown, and
// query terms repeated or unknown.
func TestMatchedTermsAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 70_000 // two segments of ordinals
	docs := make([]Doc, 0, n)
	for i := range n {
		terms := make([]string, 2+rng.IntN(12))
		for j := range terms {
			terms[j] = fmt.Sprintf("t%d", int(math.Sqrt(float64(rng.IntN(40_000))))) // common and rare terms
		}
		docs = append(docs, Doc{ChunkID: int64(10 + 2*i), Category: "c", Terms: terms})
	}
	ix := New(DefaultParams())
	ix.ReplaceBatch(docs)
	var gone []int64
	for i := 0; i < n; i += 5 {
		gone = append(gone, int64(10+2*i))
	}
	ix.RemoveBatch(gone)
	for trial := range 300 {
		ids := make([]int64, rng.IntN(250))
		for i := range ids {
			ids[i] = int64(rng.IntN(2*n + 40)) // odd ids and those past the end are not in the index
		}
		if len(ids) > 3 {
			ids[1] = ids[0] // asked twice
		}
		terms := make([]string, rng.IntN(6))
		for j := range terms {
			terms[j] = fmt.Sprintf("t%d", rng.IntN(210)) // t200 and up are unknown
		}
		if len(terms) > 2 {
			terms[2] = terms[0]
		}
		require.Equal(t, referenceMatchedTerms(ix, ids, terms), ix.MatchedTerms(ids, terms), "trial %d", trial)
	}
}
