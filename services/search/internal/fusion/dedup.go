package fusion

import "github.com/bmcis/knowledge/services/search/internal/vecmath"

// DupInfo is what near-duplicate detection needs to know about a chunk.
type DupInfo struct {
	// ContentHash identifies identical content (e.g. SHA-256 of the chunk
	// text); empty means unknown.
	ContentHash string
	// Vector is the chunk embedding, unit length; nil means unknown.
	Vector []float32
}

// DefaultDuplicateCosine is the cosine above which two chunks are treated as
// near-duplicates.
const DefaultDuplicateCosine = 0.95

// MarkDuplicates flags, in ranked order, every result whose content hash
// equals that of a higher-ranked result or whose embedding cosine with one
// exceeds threshold (<= 0 means DefaultDuplicateCosine). The lower-ranked
// result gets IsDuplicate and the ids of the higher-ranked chunks it
// duplicates in SimilarChunkIDs; the higher-ranked one is left unchanged so
// the best copy keeps its place. Results are not removed: callers decide
// whether to hide or collapse them. O(n^2) in len(results), meant for a
// page of results (n <= a few hundred).
func MarkDuplicates(results []Result, info map[int64]DupInfo, threshold float64) {
	if threshold <= 0 {
		threshold = DefaultDuplicateCosine
	}
	// Looked up once, not in the quadratic loop.
	infos := make([]*DupInfo, len(results))
	for i := range results {
		if in, ok := info[results[i].ChunkID]; ok {
			infos[i] = &in
		}
	}
	for i := range results {
		ai := infos[i]
		if ai == nil {
			continue
		}
		for j := 0; j < i; j++ {
			bj := infos[j]
			if bj == nil {
				continue
			}
			dup := ai.ContentHash != "" && ai.ContentHash == bj.ContentHash
			if !dup && ai.Vector != nil && len(ai.Vector) == len(bj.Vector) {
				dup = float64(vecmath.Dot(ai.Vector, bj.Vector)) > threshold
			}
			if dup {
				results[i].IsDuplicate = true
				results[i].SimilarChunkIDs = append(results[i].SimilarChunkIDs, results[j].ChunkID)
			}
		}
	}
}
