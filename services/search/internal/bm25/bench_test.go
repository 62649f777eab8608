package bm25

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Synthetic corpus for benchmarks: 100k chunks of 200-400 terms drawn from
// a Zipfian vocabulary (s=1.1, 200k distinct terms), which is how term
// frequencies in real chunks are distributed. Deterministic seed.
const (
	benchDocs  = 100_000
	benchVocab = 200_000
)

var (
	benchOnce  sync.Once
	benchIndex *Index
	benchTerms []string
)

func benchCorpus(tb testing.TB) (*Index, []string) {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(42, 7))
		zipf := rand.NewZipf(rng, 1.1, 1, benchVocab-1)
		benchTerms = make([]string, benchVocab)
		for i := range benchTerms {
			benchTerms[i] = "w" + strconv.Itoa(i)
		}
		ix := New(DefaultParams())
		batch := make([]Doc, 0, 1000)
		for d := 0; d < benchDocs; d++ {
			n := 200 + rng.IntN(201)
			terms := make([]string, n)
			for i := range terms {
				terms[i] = benchTerms[zipf.Uint64()]
			}
			batch = append(batch, Doc{ChunkID: int64(d), Category: "c" + strconv.Itoa(d%8), Terms: terms})
			if len(batch) == cap(batch) {
				ix.ReplaceBatch(batch)
				batch = batch[:0]
			}
		}
		ix.ReplaceBatch(batch)
		benchIndex = ix
		st := ix.Stats()
		tb.Logf("synthetic corpus: %+v (%.1f MiB)", st, float64(st.MemoryBytes)/(1<<20))
	})
	return benchIndex, benchTerms
}

// benchQueries draws 2-5 term queries. minRank skips the head of the
// distribution: rank 0-19 terms occur in nearly every chunk, like stop words
// the analyzer already removes; "typical" queries use ranks >= 20, "common"
// ones force two head terms in (rank 20-200, tens of thousands of postings).
func benchQueries(terms []string, common bool) [][]string {
	rng := rand.New(rand.NewPCG(9, 9))
	zipf := rand.NewZipf(rng, 1.1, 1, benchVocab-1)
	qs := make([][]string, 1000)
	for i := range qs {
		n := 2 + rng.IntN(4)
		q := make([]string, 0, n)
		if common {
			q = append(q, terms[20+rng.IntN(180)], terms[20+rng.IntN(180)])
		}
		for len(q) < n {
			r := zipf.Uint64()
			if r < 20 {
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
	qs := benchQueries(terms, common)
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

func BenchmarkBuild10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	zipf := rand.NewZipf(rng, 1.1, 1, benchVocab-1)
	terms := make([]string, benchVocab)
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
