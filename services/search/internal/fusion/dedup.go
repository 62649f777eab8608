package fusion

import "github.com/bmcis/knowledge/services/search/internal/vecmath"

// DefaultDuplicateCosine is the cosine above which two chunks are treated as
// near-duplicates.
const DefaultDuplicateCosine = 0.95

// DupKey is a ranked result as near-duplicate flagging knows it.
type DupKey struct {
	ChunkID int64
	// Hash identifies identical content (e.g. the first 8 bytes of the
	// chunk text's SHA-256); 0 means unknown and equals nothing.
	Hash uint64
}

// Duplicates flags the near-duplicates of a ranked list. A result
// duplicates every higher-ranked result with the same content hash and,
// when both are among the top results compared by embedding (the window),
// every one whose embedding cosine with it exceeds the threshold. The
// higher-ranked one stays unflagged so the best copy keeps its place;
// nothing is removed: callers decide whether to hide or collapse
// duplicates.
//
// A result's flags depend only on the results ranked above it, so Of finds
// one result's alone, in O(its rank), for the page shown: flagging a whole
// list, of which a page shows ten, built two maps and a flag list for
// every result. The window's cosines are compared when the list is
// ranked and kept as bits: a kept list holds no vector (a cached list
// holding the vectors of its window, 50 KB or more at 256 dimensions, would
// keep decoded or read copies alive for as long as it is cached).
type Duplicates struct {
	window int
	// near holds, for j < i < window, whether results i and j are
	// near-duplicates by cosine: bit i*(i-1)/2 + j.
	near []uint64
}

// NewDuplicates compares the window's results by embedding cosine:
// vectors[i] is result i's unit embedding (nil: not at hand, compared by
// hash only); threshold <= 0 means DefaultDuplicateCosine.
func NewDuplicates(vectors [][]float32, threshold float64) Duplicates {
	if threshold <= 0 {
		threshold = DefaultDuplicateCosine
	}
	w := len(vectors)
	d := Duplicates{window: w, near: make([]uint64, (w*(w-1)/2+63)/64)}
	for i, v := range vectors {
		if v == nil {
			continue
		}
		for j, u := range vectors[:i] {
			if len(v) == len(u) && float64(vecmath.Dot(v, u)) > threshold {
				b := i*(i-1)/2 + j
				d.near[b/64] |= 1 << (b % 64)
			}
		}
	}
	return d
}

// Of returns whether result i duplicates a higher-ranked result, and the
// chunk ids of those in ranked order (nil when none); key(j) is result
// j's, for j <= i. It only reads d, so concurrent pages of one list may
// call it.
func (d *Duplicates) Of(i int, key func(j int) DupKey) (isDuplicate bool, similar []int64) {
	h := key(i).Hash
	if h == 0 && i >= d.window {
		return false, nil // beyond the window only a known hash can match
	}
	row := i * (i - 1) / 2
	for j := range i {
		k := key(j)
		dup := h != 0 && k.Hash == h
		if !dup && i < d.window {
			b := row + j
			dup = d.near[b/64]&(1<<(b%64)) != 0
		}
		if dup {
			similar = append(similar, k.ChunkID)
		}
	}
	return similar != nil, similar
}
