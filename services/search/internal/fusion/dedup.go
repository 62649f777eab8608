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
// when both are among the top len(Vectors) (the window compared by
// embedding), every one whose embedding cosine with it exceeds Threshold.
// The higher-ranked one stays unflagged so the best copy keeps its place;
// nothing is removed: callers decide whether to hide or collapse
// duplicates.
//
// A result's flags depend only on the results ranked above it, so Of finds
// one result's alone, in O(its rank): a page's results cost a few hundred
// comparisons where flagging a whole list of which a page shows ten cost
// a window's every pair.
type Duplicates struct {
	// Vectors are the unit embeddings of the top results, in ranked order
	// (nil: not at hand, compared by hash only).
	Vectors [][]float32
	// Threshold <= 0 means DefaultDuplicateCosine.
	Threshold float64
}

// Of returns whether result i duplicates a higher-ranked result, and the
// chunk ids of those in ranked order (nil when none); key(j) is result
// j's, for j <= i. It only reads d, so concurrent pages of one list may
// call it.
func (d *Duplicates) Of(i int, key func(j int) DupKey) (isDuplicate bool, similar []int64) {
	threshold := d.Threshold
	if threshold <= 0 {
		threshold = DefaultDuplicateCosine
	}
	h := key(i).Hash
	var v []float32
	if i < len(d.Vectors) {
		v = d.Vectors[i]
	}
	for j := range i {
		k := key(j)
		dup := h != 0 && k.Hash == h
		// j < i < len(Vectors) whenever v is set.
		if !dup && v != nil && len(v) == len(d.Vectors[j]) {
			dup = float64(vecmath.Dot(v, d.Vectors[j])) > threshold
		}
		if dup {
			similar = append(similar, k.ChunkID)
		}
	}
	return similar != nil, similar
}
