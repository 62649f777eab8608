package hnsw

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceUp and referencePop are the heaps' sifts as they were before
// each heap spelled out its own (rank5, issue 32): one sift for both,
// taking the comparison. TestWalkMatchesReference's reference walk runs
// on the new heaps, so it cannot catch a fault in them.
func referenceUp(h []cand, i int, before func(a, b cand) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func referencePop(hp *[]cand, before func(a, b cand) bool) cand {
	h := *hp
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && before(h[r], h[l]) {
			c = r
		}
		if !before(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*hp = h
	return top
}

// pop removes the farthest result. The walk never pops its list (a
// nearer node replaces the farthest in place, replaceTop): only the
// reference walk and these tests do.
func (h *maxHeap) pop() cand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down()
	return top
}

// The heaps push and pop as the reference sifts did, array for array,
// with tied distances; replaceTop leaves the nodes push then pop left,
// the same farthest first.
func TestHeapsMatchReference(t *testing.T) {
	more := func(a, b cand) bool { return less(b, a) }
	rng := rand.New(rand.NewPCG(31, 32))
	for trial := range 200 {
		var mn minHeap
		var mx maxHeap
		var refMin, refMax []cand
		node := int32(0)
		next := func() cand {
			node++ // distinct nodes, as a walk's are; few distances, so ties
			return cand{d: float32(rng.IntN(12)) / 4, node: node}
		}
		for op := range 300 {
			switch r := rng.IntN(10); {
			case r < 5 || len(refMin) == 0:
				c := next()
				mn.push(c)
				refMin = append(refMin, c)
				referenceUp(refMin, len(refMin)-1, less)
				mx.push(c)
				refMax = append(refMax, c)
				referenceUp(refMax, len(refMax)-1, more)
			case r < 8:
				require.Equal(t, referencePop(&refMin, less), mn.pop(), "trial %d op %d: min pop", trial, op)
				require.Equal(t, referencePop(&refMax, more), mx.pop(), "trial %d op %d: max pop", trial, op)
			default:
				c := next()
				if !less(c, mx[0]) {
					continue // the walk replaces only with a nearer one
				}
				mx.replaceTop(c)
				refMax = append(refMax, c)
				referenceUp(refMax, len(refMax)-1, more)
				referencePop(&refMax, more)
				require.Equal(t, refMax[0], mx[0], "trial %d op %d: farthest after replaceTop", trial, op)
				got, want := slices.Clone([]cand(mx)), slices.Clone(refMax)
				sortCands(got)
				sortCands(want)
				require.Equal(t, want, got, "trial %d op %d: nodes after replaceTop", trial, op)
				refMax = append(refMax[:0], mx...) // go on from the same array
			}
			require.Equal(t, refMin, []cand(mn), "trial %d op %d: min heap", trial, op)
			require.Equal(t, refMax, []cand(mx), "trial %d op %d: max heap", trial, op)
		}
	}
}
