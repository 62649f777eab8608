package bm25

import (
	"cmp"
	"math"
	"slices"
	"sync"
)

// A search walks the query's terms largest bound first (the most each can
// add to a score: the rare terms, mostly) and, once the k-th best score so
// far is above all the terms left can add, stops walking their lists: only
// the chunks that can still reach the top k are scored further, found by
// galloping search in the remaining (sorted) lists. This is MaxScore's pruning in term-at-a-time
// form: the top k and their scores are those of the full walk, but a
// common term's list of hundreds of thousands of postings is probed a few
// thousand times instead of walked.

// onPrune, when set (by tests), is called by each search that prunes.
var onPrune func()

// qterm is one distinct query term.
type qterm struct {
	term string
	id   uint32 // math.MaxUint32: not in the index
	qtf  int    // times it occurs in the query
	// w is qtf * idf * (k1 + 1); a posting scores w * tf / (tf + norm(dl)).
	w float32
	// bound is the most the term adds to any chunk's score.
	bound float64
}

// boundMargin covers float32 rounding between a bound and the scores it
// bounds.
const boundMargin = 1 + 1e-4

// thetaSlack lowers the k-th best score a chunk must be able to reach to
// stay: a chunk's score is a float32 sum, and each addition can round it
// up by half an ulp, so one whose exact reach falls a few ulps short can
// still tie the k-th and win on its chunk id. 1e-4 covers a thousand
// additions.
const thetaSlack = 1 - 1e-4

// planLocked fills each term's weight and bound and returns the
// indices of the terms in the index, the largest bound first.
func (ix *Index) planLocked(qts []qterm, avgdl float64) []int {
	k1 := ix.params.K1
	order := make([]int, 0, len(qts))
	for qi := range qts {
		if qts[qi].id != math.MaxUint32 {
			order = append(order, qi)
		}
	}
	for _, qi := range order {
		q := &qts[qi]
		q.w = float32(float64(q.qtf) * IDF(ix.live, int(ix.df[q.id])) * (k1 + 1))
		// A single term is walked whole: its bound would not be used.
		frac := float32(1)
		if len(order) > 1 {
			frac = ix.bounds.fraction(ix, q.id, avgdl)
		}
		q.bound = float64(q.w) * float64(frac) * boundMargin
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(qts[b].bound, qts[a].bound) })
	return order
}

// boundMinPostings is the shortest list whose bound is computed: a shorter
// one is walked whole anyway, and its loose bound (w) costs nothing.
const boundMinPostings = 512

// termBounds caches, per term, the largest tf / (tf + norm(dl)) over its
// live postings. The fraction grows with the mean length, so one computed
// for a mean a little above the index's holds until the mean passes it
// (the cache starts again then, and when the mean falls far below, to
// tighten); it holds after removals too (a maximum over more postings).
// Appended postings are folded in by the next search that needs the
// bound, and compaction, which moves postings, starts the cache again.
type termBounds struct {
	mu    sync.Mutex
	epoch uint64  // counts restarts, so a fold begun before one is dropped
	avgdl float64 // the mean length the fractions assume
	k1, b float64
	frac  []float32 // the maxima, without boundMargin
	upto  []uint32  // postings folded into frac
}

// fraction returns an upper bound on tf / (tf + norm(dl)) over the term's
// postings (before boundMargin): exact, at the cache's mean length, for
// long lists, 1 for short ones. It holds for BM25's parameter range only
// (Params), where the fraction grows with the mean length. Called under the
// index's read lock, which keeps the list as it is while it is folded
// outside tb.mu.
func (tb *termBounds) fraction(ix *Index, id uint32, avgdl float64) float32 {
	p := ix.params
	pl := &ix.postings[id]
	if pl.len() < boundMinPostings {
		return 1
	}
	tb.mu.Lock()
	if avgdl > tb.avgdl || avgdl < tb.avgdl/1.2 || p.K1 != tb.k1 || p.B != tb.b {
		tb.resetLocked()
		tb.avgdl, tb.k1, tb.b = avgdl*1.05, p.K1, p.B
	}
	if n := len(ix.postings); len(tb.frac) < n {
		tb.frac = append(tb.frac, make([]float32, n-len(tb.frac))...)
		tb.upto = append(tb.upto, make([]uint32, n-len(tb.upto))...)
	}
	from, m, epoch, ref := int(tb.upto[id]), tb.frac[id], tb.epoch, tb.avgdl
	tb.mu.Unlock()
	if from < pl.len() {
		m = max(m, foldFraction(ix, id, from, ref))
		tb.mu.Lock()
		if tb.epoch == epoch && int(tb.upto[id]) < pl.len() {
			tb.frac[id], tb.upto[id] = max(tb.frac[id], m), uint32(pl.len())
		}
		tb.mu.Unlock()
	}
	return m
}

// foldFraction is the largest tf / (tf + norm(dl)) over the live postings
// of the term from position from on, for mean length avgdl.
func foldFraction(ix *Index, id uint32, from int, avgdl float64) float32 {
	p := ix.params
	c0, c1 := p.K1*(1-p.B), p.K1*p.B/avgdl
	pl := &ix.postings[id]
	m := 0.0
	for i, ord := range pl.allFrom(from) {
		if !ix.alive[ord] {
			continue
		}
		tf := float64(ix.exactTF(id, ord, pl.tfs[i]))
		m = max(m, tf/(tf+c0+c1*float64(ix.lens[ord])))
	}
	return float32(m)
}

// reset forgets every bound (compaction moved the postings).
func (tb *termBounds) reset() {
	tb.mu.Lock()
	tb.resetLocked()
	tb.mu.Unlock()
}

func (tb *termBounds) resetLocked() {
	tb.epoch++
	tb.frac, tb.upto = tb.frac[:0], tb.upto[:0]
}

// worthPruning tells whether the postings left to walk are enough to pay
// for finding the k-th best score: a pass over the touched chunks in
// ordinal runs, several times cheaper a chunk than walking a posting.
func worthPruning(postings []postingList, qts []qterm, left []int, touched int) bool {
	n := 0
	for _, qi := range left {
		n += postings[qts[qi].id].len()
	}
	return 2*n > touched
}

// kthBest returns the k-th largest score among the touched chunks (at
// least k of them).
func kthBest(scores []float32, touched []uint32, k int) float32 {
	h := make([]float32, 0, k) // a min-heap: h[0] is the k-th best so far
	for _, ord := range touched {
		s := scores[ord]
		switch {
		case len(h) < k:
			h = append(h, s)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if h[p] <= h[i] {
					break
				}
				h[p], h[i] = h[i], h[p]
				i = p
			}
		case s > h[0]:
			h[0] = s
			for i := 0; ; {
				l, small := 2*i+1, i
				if l < k && h[l] < h[small] {
					small = l
				}
				if r := l + 1; r < k && h[r] < h[small] {
					small = r
				}
				if small == i {
					break
				}
				h[i], h[small] = h[small], h[i]
				i = small
			}
		}
	}
	return h[0]
}

// survivors appends to dst the chunks of from that can still reach theta
// (less thetaSlack) with at most rest more, in the order of from (dst may
// be from[:0]).
func survivors(from []uint32, scores []float32, theta float32, rest float64, dst []uint32) []uint32 {
	th := float64(theta) * thetaSlack
	for _, ord := range from {
		if float64(scores[ord])+rest >= th {
			dst = append(dst, ord)
		}
	}
	return dst
}

// mergeRuns sorts a, made of ascending runs ending at ends, by merging
// them pairwise through scratch; it returns the sorted slice (a or
// scratch) and the other buffer, for reuse.
func mergeRuns(a []uint32, ends []int, scratch []uint32) (sorted, spare []uint32) {
	for len(ends) > 1 {
		scratch = slices.Grow(scratch[:0], len(a))[:0]
		merged := ends[:0:0]
		from := 0
		for r := 0; r < len(ends); r += 2 {
			if r+1 == len(ends) {
				scratch = append(scratch, a[from:ends[r]]...)
			} else {
				x, y := a[from:ends[r]], a[ends[r]:ends[r+1]]
				for len(x) > 0 && len(y) > 0 {
					if x[0] <= y[0] {
						scratch, x = append(scratch, x[0]), x[1:]
					} else {
						scratch, y = append(scratch, y[0]), y[1:]
					}
				}
				scratch = append(append(scratch, x...), y...)
			}
			from = ends[min(r+1, len(ends)-1)]
			merged = append(merged, len(scratch))
		}
		a, scratch, ends = scratch, a, merged
	}
	return a, scratch
}

// matchedLocked fills each hit's MatchedTerms: the hits' ordinals, sorted,
// are probed in each query term's list, which costs far less than marking
// every posting of the walk.
func (ix *Index) matchedLocked(qts []qterm, items []heapItem, hits []Hit, acc *accumulator) {
	if len(items) == 0 {
		return
	}
	byOrd := make([]int, len(items)) // hit indices in ordinal order
	for i := range byOrd {
		byOrd[i] = i
	}
	slices.SortFunc(byOrd, func(a, b int) int { return cmp.Compare(items[a].ord, items[b].ord) })
	ords := acc.cands[:0]
	rows := make([]int, len(items)) // each hit's row in ords
	for j, i := range byOrd {
		ords = append(ords, items[i].ord)
		rows[i] = j
	}
	acc.cands = ords
	ix.termsIn(qts, ords, rows, func(i int, terms []string) { hits[i].MatchedTerms = terms })
}

// termsIn probes each term's posting list once for all of ords (ascending,
// distinct ordinals) and calls set(k, terms) for each of rows (an index into
// ords) whose ordinal holds any term of qts: those terms, in qts's order.
// The lists share one backing array: a binary search per chunk and term, and
// an append per chunk, took twice the time.
func (ix *Index) termsIn(qts []qterm, ords []uint32, rows []int, set func(k int, terms []string)) {
	nq := len(qts)
	found := make([]bool, len(ords)*nq)
	counts := make([]int, len(ords)) // terms found per ordinal
	for qi := range qts {
		if qts[qi].id == math.MaxUint32 {
			continue
		}
		probe(&ix.postings[qts[qi].id], ords, func(j, _ int) {
			found[j*nq+qi] = true
			counts[j]++
		})
	}
	size := 0
	for _, j := range rows {
		size += counts[j]
	}
	matched := make([]string, 0, size)
	for k, j := range rows {
		if counts[j] == 0 {
			continue
		}
		from := len(matched)
		for qi := range qts {
			if found[j*nq+qi] {
				matched = append(matched, qts[qi].term)
			}
		}
		set(k, matched[from:len(matched):len(matched)])
	}
}
