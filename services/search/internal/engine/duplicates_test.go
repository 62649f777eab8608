package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/vecmath"
)

// flags are one result's near-duplicate flags.
type flags struct {
	dup     bool
	similar []int64
}

// eagerDuplicates is the flagging of a whole list as rank did it before
// flags were found per page (fusion.MarkDuplicates and
// Engine.markDuplicates at be5029f, only renamed): the reference the page
// flags must equal.
func eagerDuplicates(window int, rs []fusion.Result, recs []*index.Chunk, vectors map[int64][]float32) []flags {
	type dupInfo struct {
		ContentHash string
		Vector      []float32
	}
	hashKey := func(h uint64) string {
		if h == 0 {
			return ""
		}
		var b [8]byte
		for i := range b {
			b[i] = byte(h >> (56 - 8*i))
		}
		return string(b[:])
	}
	out := make([]flags, len(rs))
	w := min(len(rs), window)
	info := make(map[int64]dupInfo, w)
	for i := 0; i < w; i++ {
		info[rs[i].ChunkID] = dupInfo{ContentHash: hashKey(recs[i].Hash), Vector: vectors[rs[i].ChunkID]}
	}
	// fusion.MarkDuplicates(rs[:w], info, fusion.DefaultDuplicateCosine)
	results, threshold := rs[:w], fusion.DefaultDuplicateCosine
	infos := make([]*dupInfo, len(results))
	for i := range results {
		if in, ok := info[results[i].ChunkID]; ok {
			infos[i] = &in
		}
	}
	for i := range results {
		ai := infos[i]
		if ai == nil {
			continue
		}
		for j := 0; j < i; j++ {
			bj := infos[j]
			if bj == nil {
				continue
			}
			dup := ai.ContentHash != "" && ai.ContentHash == bj.ContentHash
			if !dup && ai.Vector != nil && len(ai.Vector) == len(bj.Vector) {
				dup = float64(vecmath.Dot(ai.Vector, bj.Vector)) > threshold
			}
			if dup {
				out[i].dup = true
				out[i].similar = append(out[i].similar, results[j].ChunkID)
			}
		}
	}
	// Beyond the window: identical content only, against every higher result.
	seen := make(map[uint64][]int64, len(rs))
	for i := range rs {
		h := recs[i].Hash
		if i >= w && h != 0 {
			if prev := seen[h]; len(prev) > 0 {
				out[i].dup = true
				out[i].similar = append(out[i].similar, prev...)
			}
		}
		if h != 0 {
			seen[h] = append(seen[h], rs[i].ChunkID)
		}
	}
	return out
}

// randomList is a ranked list with content hashes drawn from a few (ties
// inside and beyond any window), some unknown (0), and vectors drawn
// around a few directions: identical, near (cosines on both sides of
// 0.95), far, of another dimension, empty, or missing.
func randomList(rng *rand.Rand, n int) ([]fusion.Result, []*index.Chunk, map[int64][]float32) {
	const dims = 8
	bases := make([][]float32, 3)
	for b := range bases {
		bases[b] = unit(rng, nil, 0, dims)
	}
	rs := make([]fusion.Result, n)
	recs := make([]*index.Chunk, n)
	vectors := map[int64][]float32{}
	for i, id := range rng.Perm(4 * (n + 1))[:n] {
		id := int64(id + 1)
		rs[i] = fusion.Result{ChunkID: id, HybridScore: float64(n - i)}
		var h uint64
		switch p := rng.IntN(10); {
		case p < 3:
			h = uint64(1 + rng.IntN(3)) // shared by many
		case p < 5:
			h = 0
		default:
			h = rng.Uint64() | 1<<63 // its own
		}
		recs[i] = &index.Chunk{ChunkID: id, Hash: h}
		base := bases[rng.IntN(len(bases))]
		switch p := rng.IntN(12); {
		case p < 2: // missing
		case p < 4:
			vectors[id] = base
		case p < 8:
			vectors[id] = unit(rng, base, 0.05+0.3*rng.Float64(), dims)
		case p < 10:
			vectors[id] = unit(rng, nil, 0, dims)
		case p < 11:
			vectors[id] = unit(rng, nil, 0, 2)
		default:
			vectors[id] = []float32{}
		}
	}
	return rs, recs, vectors
}

// unit is a random unit vector, or base moved by noise, normalised.
func unit(rng *rand.Rand, base []float32, noise float64, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for k := range v {
		x := rng.NormFloat64()
		if base != nil {
			x = float64(base[k]) + noise*x
		}
		v[k] = float32(x)
		norm += x * x
	}
	for k := range v {
		v[k] /= float32(math.Sqrt(norm))
	}
	return v
}

// pageFlags cuts a page as the server does (results [off, off+limit) of
// the list) and returns its results' flags.
func pageFlags(rk *Ranked, off, limit int) []flags {
	if off >= len(rk.Results) {
		return nil
	}
	page := rk.Results[off:min(off+limit, len(rk.Results))]
	out := make([]flags, len(page))
	for i := range page {
		out[i].dup, out[i].similar = rk.Duplicates(off + i)
	}
	return out
}

func rankedOf(window int, rs []fusion.Result, recs []*index.Chunk, vectors map[int64][]float32) *Ranked {
	e := &Engine{cfg: Config{DedupWindow: window}}
	rk := &Ranked{Results: make([]Result, len(rs)), dups: e.duplicates(rs, vectors)}
	for i := range rs {
		rk.Results[i] = Result{Chunk: recs[i], Result: rs[i]}
	}
	return rk
}

// TestPageDuplicatesEqualTheWholeList: for random lists and windows, every
// page's flags (every offset and page size for short lists, a sample for
// long ones) equal those the whole list's eager flagging set.
func TestPageDuplicatesEqualTheWholeList(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 4))
	dups, cosDups, beyond := 0, 0, 0
	for trial := range 600 {
		n := rng.IntN(30)
		if trial%4 == 0 {
			n = 30 + rng.IntN(200)
		}
		window := []int{0, 1, 2, 5, 50, 50, 50, 300}[rng.IntN(8)]
		rs, recs, vectors := randomList(rng, n)
		want := eagerDuplicates(window, rs, recs, vectors)
		rk := rankedOf(window, rs, recs, vectors)
		var offs, limits []int
		if n <= 30 {
			for i := 0; i <= n+1; i++ {
				offs, limits = append(offs, i), append(limits, i+1)
			}
		} else {
			offs = []int{0, 1, window - 1, window, window + 1, n - 1, n, rng.IntN(n)}
			limits = []int{1, 10, 50, n}
		}
		for _, off := range offs {
			for _, limit := range limits {
				if off < 0 {
					continue
				}
				got := pageFlags(rk, off, limit)
				if off >= n {
					require.Empty(t, got)
					continue
				}
				require.Equal(t, want[off:min(off+limit, n)], got, "trial %d: n %d window %d offset %d limit %d", trial, n, window, off, limit)
			}
		}
		for i, f := range want {
			if f.dup {
				dups++
				if i >= window {
					beyond++
				} else if recs[i].Hash == 0 {
					cosDups++
				}
			}
		}
	}
	// The lists exercised what they are meant to: duplicates by cosine, and
	// by hash beyond the window.
	require.Greater(t, cosDups, 100)
	require.Greater(t, beyond, 100)
	t.Logf("%d duplicates, %d by cosine alone, %d beyond the window", dups, cosDups, beyond)
}

// TestConcurrentPagesOfOneList: a kept list is shared by concurrent
// requests; their pages read it at once (run with -race), and the capture
// keeps nothing of the vectors map rank built.
func TestConcurrentPagesOfOneList(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	rs, recs, vectors := randomList(rng, 200)
	want := eagerDuplicates(50, rs, recs, vectors)
	rk := rankedOf(50, rs, recs, vectors)
	for _, v := range vectors {
		clear(v) // in place: a list that kept the ranking's vectors would see it
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for off := g; off < len(rs); off += 8 {
				if got := pageFlags(rk, off, 10); fmt.Sprint(got) != fmt.Sprint(want[off:min(off+10, len(rs))]) {
					errs <- fmt.Errorf("offset %d: got %v, want %v", off, got, want[off:min(off+10, len(rs))])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
