package mentions

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// Terms is the distinct words of text, normalized as Match normalizes
// them (letters and digits, lowercased), each hashed to 32 bits (FNV-1a
// over the word's UTF-8), sorted: what chunk_terms holds and what the
// re-link looks names up by. Two words sharing a hash only make an extra
// candidate, which the matcher then rejects. One pass, no allocation per
// word: every chunk written pays for it.
func Terms(text string) []int32 {
	const offset, prime = 2166136261, 16777619
	out := make([]int32, 0, len(text)/8+1)
	var h uint32
	in := false
	var enc [utf8.UTFMax]byte
	for _, r := range text {
		if !isWordRune(r) {
			if in {
				out = append(out, int32(h))
				in = false
			}
			continue
		}
		if !in {
			h, in = offset, true
		}
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			h = (h ^ uint32(r)) * prime
			continue
		}
		n := utf8.EncodeRune(enc[:], unicode.ToLower(r))
		for _, b := range enc[:n] {
			h = (h ^ uint32(b)) * prime
		}
	}
	if in {
		out = append(out, int32(h))
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
