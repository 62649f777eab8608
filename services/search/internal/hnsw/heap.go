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
