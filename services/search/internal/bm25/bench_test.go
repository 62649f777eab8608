package bm25

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Synthetic corpora for benchmarks, deterministic. "100k": chunks of
// 200-400 terms drawn from a Zipfian vocabulary (s=1.1, 200k distinct
// terms), which is how term frequencies in real chunks are distributed.
// "1M": the shape of bmcisctl bench's corpus (platform/syntheticdocs with
// its default 30,000 words: s=1.07, v=2, about 130 terms a chunk), a
// million chunks, built only with BMCIS_BENCH_1M=1 (a minute and 1 GB).
type benchSpec struct {
	docs, vocab        int
	s, v               float64
	minTerms, maxTerms int
	// skip is how many of the most frequent words queries leave out (the
	// analyzer's stop words, or bench's skipped head).
	skip int
}

var (
	spec100k = benchSpec{docs: 100_000, vocab: 200_000, s: 1.1, v: 1, minTerms: 200, maxTerms: 400, skip: 20}
	spec1M   = benchSpec{docs: 1_000_000, vocab: 30_000, s: 1.07, v: 2, minTerms: 100, maxTerms: 160, skip: 30}
)

type benchCorpusT struct {
	once  sync.Once
	ix    *Index
	terms []string
}

var benchCorpora = map[benchSpec]*benchCorpusT{spec100k: {}, spec1M: {}}

func benchCorpus(tb testing.TB) (*Index, []string) { return benchCorpusOf(tb, spec100k) }

func benchCorpusOf(tb testing.TB, sp benchSpec) (*Index, []string) {
	c := benchCorpora[sp]
	c.once.Do(func() {
		rng := rand.New(rand.NewPCG(42, 7))
		zipf := rand.NewZipf(rng, sp.s, sp.v, uint64(sp.vocab-1))
		c.terms = make([]string, sp.vocab)
		for i := range c.terms {
			c.terms[i] = "w" + strconv.Itoa(i)
		}
		ix := New(DefaultParams())
		batch := make([]Doc, 0, 1000)
		for d := 0; d < sp.docs; d++ {
			n := sp.minTerms + rng.IntN(sp.maxTerms-sp.minTerms+1)
			terms := make([]string, n)
			for i := range terms {
				terms[i] = c.terms[zipf.Uint64()]
			}
			batch = append(batch, Doc{ChunkID: int64(d), Category: "c" + strconv.Itoa(d%8), Terms: terms})
			if len(batch) == cap(batch) {
				ix.ReplaceBatch(batch)
				batch = batch[:0]
			}
		}
		ix.ReplaceBatch(batch)
		ix.Trim()
		c.ix = ix
		st := ix.Stats()
		tb.Logf("synthetic corpus: %+v (%.1f MiB)", st, float64(st.MemoryBytes)/(1<<20))
	})
	return c.ix, c.terms
}

// benchQueries draws 2-5 term queries. The head of the distribution is
// skipped: its terms occur in nearly every chunk, like stop words the
// analyzer already removes; "typical" queries use the rest, "common" ones
// force two head terms in (ranks skip to 10 x skip, tens of thousands of
// postings at 100k).
func benchQueries(terms []string, common bool) [][]string {
	return benchQueriesOf(terms, spec100k, common, 2, 5)
}

func benchQueriesOf(terms []string, sp benchSpec, common bool, minN, maxN int) [][]string {
	rng := rand.New(rand.NewPCG(9, 9))
	zipf := rand.NewZipf(rng, sp.s, sp.v, uint64(sp.vocab-1))
	qs := make([][]string, 1000)
	for i := range qs {
		n := minN + rng.IntN(maxN-minN+1)
		q := make([]string, 0, n)
		if common {
			q = append(q, terms[sp.skip+rng.IntN(9*sp.skip)], terms[sp.skip+rng.IntN(9*sp.skip)])
		}
		for len(q) < n {
			r := zipf.Uint64()
			if r < uint64(sp.skip) {
				continue
			}
			q = append(q, terms[r])
		}
		qs[i] = q
	}
	return qs
}

func runSearchBench(b *testing.B, common bool, opts SearchOptions) {
	ix, terms := benchCorpus(b)
	runQueries(b, ix, benchQueries(terms, common), opts)
}

func runQueries(b *testing.B, ix *Index, qs [][]string, opts SearchOptions) {
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		t0 := time.Now()
		ix.Search(qs[i%len(qs)], opts)
		lat = append(lat, time.Since(t0))
		i++
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

func BenchmarkSearch100kTypical(b *testing.B) { runSearchBench(b, false, SearchOptions{K: 100}) }
func BenchmarkSearch100kCommon(b *testing.B)  { runSearchBench(b, true, SearchOptions{K: 100}) }
func BenchmarkSearch100kCategory(b *testing.B) {
	runSearchBench(b, false, SearchOptions{K: 100, Category: "c3"})
}

// BenchmarkSearch1M is bmcisctl bench's query shape (2 to 4 words past
// the 30 most frequent) on a million chunks of its corpus's shape; the
// top 100, as hybrid fusion asks.
func BenchmarkSearch1M(b *testing.B) {
	if os.Getenv("BMCIS_BENCH_1M") == "" {
		b.Skip("set BMCIS_BENCH_1M=1 to build the million-chunk corpus")
	}
	ix, terms := benchCorpusOf(b, spec1M)
	qs := benchQueriesOf(terms, spec1M, false, 2, 4)
	b.Run("top100", func(b *testing.B) { runQueries(b, ix, qs, SearchOptions{K: 100}) })
	b.Run("top10", func(b *testing.B) { runQueries(b, ix, qs, SearchOptions{K: 10}) })
	b.Run("category", func(b *testing.B) { runQueries(b, ix, qs, SearchOptions{K: 100, Category: "c3"}) })
}

func BenchmarkBuild10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(spec100k.vocab-1))
	terms := make([]string, spec100k.vocab)
	for i := range terms {
		terms[i] = "w" + strconv.Itoa(i)
	}
	docs := make([]Doc, 10_000)
	for d := range docs {
		t := make([]string, 300)
		for i := range t {
			t[i] = terms[zipf.Uint64()]
		}
		docs[d] = Doc{ChunkID: int64(d), Terms: t}
	}
	b.ReportAllocs()
	for b.Loop() {
		ix := New(DefaultParams())
		ix.ReplaceBatch(docs)
	}
	b.ReportMetric(float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}
