package engine

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/store"
)

func TestHitHeapKeepsTheBestK(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{0, 1, 5, 100} {
		var all []store.VectorHit
		h := make(hitHeap, 0, k)
		for i := range 500 {
			// Few distinct scores: ties are broken by chunk id.
			x := store.VectorHit{ChunkID: int64(i), Cosine: float64(rng.IntN(50)) / 50}
			all = append(all, x)
			h.offer(x, k)
		}
		require.Equal(t, store.TopHits(all, k), store.TopHits(h, k), "k=%d", k)
	}
}

func TestClassVectorsBudgetAndInvalidation(t *testing.T) {
	read := func(gen int64, classes map[store.Class]int) store.ClassVectorsRead {
		r := store.ClassVectorsRead{Classes: map[store.Class]*store.ClassRows{}, Model: 7, Generation: gen, At: time.Now()}
		id := int64(0)
		for cl, n := range classes {
			rows := &store.ClassRows{}
			for range n {
				id++
				rows.IDs = append(rows.IDs, id)
				rows.Vectors = append(rows.Vectors, []float32{1, 2, 3, 4})
			}
			r.Classes[cl] = rows
		}
		return r
	}
	a, b, c := store.Class{Category: "x", AccessKey: "group:a"}, store.Class{Category: "x", AccessKey: "group:b"}, store.Class{Category: "y"}
	// 7 floats a row (4 dims, id, norm): a budget of 100 rows.
	cv := newClassVectors(100 * 7 * 4)
	_, _, missing, epoch := cv.lookup([]store.Class{a, b}, 7)
	require.Equal(t, []store.Class{a, b}, missing)
	cv.put(read(3, map[store.Class]int{a: 40, b: 40}), epoch)
	held, gen, missing, _ := cv.lookup([]store.Class{a, b}, 7)
	require.Empty(t, missing)
	require.Len(t, held, 2)
	require.Equal(t, int64(3), gen)
	_, _, missing, _ = cv.lookup([]store.Class{a}, 8)
	require.Equal(t, []store.Class{a}, missing, "held for another model")

	cv.lookup([]store.Class{a}, 7) // a is now more recently used than b
	cv.put(read(3, map[store.Class]int{c: 50}), epoch)
	require.Equal(t, 90, cv.held(), "b, least recently used, made room for c")
	_, _, missing, _ = cv.lookup([]store.Class{a, c}, 7)
	require.Empty(t, missing)
	_, _, missing, _ = cv.lookup([]store.Class{a, b, c}, 7)
	require.Equal(t, []store.Class{a, b, c}, missing, "one missing: all are read again, at one version")

	cv.put(read(3, map[store.Class]int{a: 40}), epoch)
	require.Equal(t, 90, cv.held(), "replacing a class frees its old vectors first")
	old := read(3, map[store.Class]int{c: 10})
	old.At = time.Now().Add(-classVectorsMaxAge - time.Second)
	cv.put(old, epoch)
	_, _, missing, _ = cv.lookup([]store.Class{c}, 7)
	require.Equal(t, []store.Class{c}, missing, "held too long")

	before := cv.held()
	cv.put(read(3, map[store.Class]int{b: 101}), epoch)
	require.Equal(t, before, cv.held(), "a class over the whole budget is not held")

	cv.invalidate()
	require.Zero(t, cv.held())
	cv.put(read(4, map[store.Class]int{a: 1}), epoch)
	require.Zero(t, cv.held(), "a read begun before an invalidation is not kept")
	require.Nil(t, newClassVectors(0))
}
