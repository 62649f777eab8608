package mentions

import (
	"hash/fnv"
	"slices"
)

// Terms is the distinct words of text, normalized as Match normalizes
// them, each hashed to 32 bits (FNV-1a), sorted: what chunks.terms holds
// and what the re-link looks names up by. Two words sharing a hash only
// make an extra candidate, which the matcher then rejects.
func Terms(text string) []int32 {
	words := Words(text)
	out := make([]int32, 0, len(words))
	h := fnv.New32a()
	for _, w := range words {
		h.Reset()
		_, _ = h.Write([]byte(w))
		out = append(out, int32(h.Sum32()))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FlatTerms is the terms of each text laid end to end, with the 1-based,
// inclusive bounds of text i's terms at lo[i]..hi[i] (empty when lo > hi):
// one array parameter for a batch insert to slice per row.
func FlatTerms(texts []string) (flat, lo, hi []int32) {
	// Never nil: a nil slice is SQL NULL, and NULL terms mean "not computed".
	flat = make([]int32, 0, 128*len(texts))
	lo, hi = make([]int32, len(texts)), make([]int32, len(texts))
	for i, t := range texts {
		lo[i] = int32(len(flat) + 1)
		flat = append(flat, Terms(t)...)
		hi[i] = int32(len(flat))
	}
	return flat, lo, hi
}
