package hnsw

import "slices"

// cand is a node and its distance from the query.
type cand struct {
	d    float32
	node int32
}

func less(a, b cand) bool { return a.d < b.d || (a.d == b.d && a.node < b.node) }

func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
}

// minHeap pops the nearest candidate.
type minHeap []cand

func (h *minHeap) push(c cand) {
	*h = append(*h, c)
	up(*h, len(*h)-1, less)
}

func (h *minHeap) pop() cand {
	return pop((*[]cand)(h), less)
}

// maxHeap keeps the farthest result at [0].
type maxHeap []cand

func more(a, b cand) bool { return less(b, a) }

func (h *maxHeap) push(c cand) {
	*h = append(*h, c)
	up(*h, len(*h)-1, more)
}

func (h *maxHeap) pop() cand {
	return pop((*[]cand)(h), more)
}

// replaceTop puts c, nearer than the farthest, in the farthest's place:
// push then pop in one sift. The heap holds the same nodes either way,
// and as (distance, node) orders them totally, the walk goes the same.
func (h maxHeap) replaceTop(c cand) {
	h[0] = c
	down(h, 0, more)
}

func up(h []cand, i int, before func(a, b cand) bool) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func pop(hp *[]cand, before func(a, b cand) bool) cand {
	h := *hp
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	down(h, 0, before)
	*hp = h
	return top
}

func down(h []cand, i int, before func(a, b cand) bool) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && before(h[r], h[l]) {
			c = r
		}
		if !before(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
