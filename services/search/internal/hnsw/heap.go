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

// The two heaps spell out their sifts, each with its own comparison
// inlined: a sift shared by both took the comparison as a function value
// and called it, not inlined, at every step (a walk sifts a few thousand
// times).

// minHeap pops the nearest candidate.
type minHeap []cand

func (h *minHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(s[i], s[p]) {
			return
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap) pop() cand {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && less(s[r], s[l]) {
			c = r
		}
		if !less(s[c], s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// maxHeap keeps the farthest result at [0].
type maxHeap []cand

func (h *maxHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(s[p], s[i]) {
			return
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// replaceTop puts c, nearer than the farthest, in the farthest's place:
// push then pop in one sift. The heap holds the same nodes either way,
// and as (distance, node) orders them totally, the walk goes the same.
func (h maxHeap) replaceTop(c cand) {
	h[0] = c
	h.down()
}

// down sifts [0] down to its place.
func (h maxHeap) down() {
	n := len(h)
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && less(h[l], h[r]) {
			c = r
		}
		if !less(h[i], h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
