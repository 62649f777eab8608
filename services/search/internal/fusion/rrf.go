// Package fusion merges the ranked lists of the keyword (BM25) and vector
// retrievers with Reciprocal Rank Fusion and reports every score on a 0..1
// scale, plus a near-duplicate flagging helper.
//
// Score definitions (all in [0,1]):
//
//   - HybridScore = fused / maxFused, where fused = sum over retrievers r of
//     w_r / (k + rank_r) (absent from a list: no term) and
//     maxFused = sum_r w_r / (k + 1). A chunk ranked first by every
//     retriever scores exactly 1.0; one ranked first by BM25 alone, with
//     equal weights, scores 0.5.
//   - BM25Score = raw BM25 / the highest raw BM25 in the BM25 candidate
//     list, so the best keyword hit is 1.0. 0 when BM25 did not return it.
//   - SimilarityScore = the cosine similarity clamped to [0,1]. Negative
//     cosines mean "unrelated", which users read better as 0 than as the
//     0.3-0.5 that (1+cos)/2 would give. 0 when the vector side did not
//     return it.
package fusion

import (
	"cmp"
	"math"
	"slices"
)

// Candidate is one entry of a retriever's ranked list (best first). Score
// is the raw BM25 score or the cosine similarity.
type Candidate struct {
	ChunkID int64
	Score   float64
}

// Score types: which retrievers returned the chunk.
const (
	ScoreHybrid = "hybrid" // found by both retrievers
	ScoreBM25   = "bm25"   // found by the keyword retriever only
	ScoreVector = "vector" // found by the vector retriever only
)

// Options configure fusion. Zero values take the defaults.
type Options struct {
	// K is the RRF rank constant (default 60, the value of Cormack et al.).
	K float64
	// BM25Weight and VectorWeight scale each retriever's contribution
	// (default 1 each). A negative weight is treated as 0 (retriever off).
	BM25Weight   float64
	VectorWeight float64
	// Limit caps the number of results (0 = all fused candidates).
	Limit int
	// Method is MethodRRF (the default when empty) or MethodConvex.
	Method string
	// Alpha is the BM25 share of convex fusion (Convex).
	Alpha float64
	// FeedbackChunks and FeedbackWeight turn on vector-side pseudo-relevance
	// feedback in hybrid mode: the query vector moves towards the mean
	// vector of the top FeedbackChunks BM25 hits (embed.Feedback). 0: off.
	FeedbackChunks int
	FeedbackWeight float64
}

// Fusion methods.
const (
	MethodRRF    = "rrf"
	MethodConvex = "convex"
)

// DefaultOptions is plain RRF, k=60, equal weights: the standard setting
// for two retrievers of similar strength (e.g. BM25 + a pretrained
// embedding model from the openai or ollama providers).
func DefaultOptions() Options { return Options{K: 60, BM25Weight: 1, VectorWeight: 1} }

// BuiltinOptions is the hybrid preset for BM25 + the builtin embedder
// (LSA fine-tuned contrastively on the corpus's structure), which alone is
// weaker than BM25 (SciFact train nDCG@10 0.598 vs 0.706). The vector
// query is first moved towards the top 3 BM25 hits (feedback weight 1),
// then the lists are fused by a convex combination of min-max scores with
// BM25 share 0.6, which lets the vector side move results only where its
// similarity stands out (hybrid 0.7195 / Recall@100 0.9545 in the harness,
// 0.717-0.7195 through the service; plain LSA was
// best at share 0.7 and feedback weight 2: 0.7104 / 0.9483).
// K and the weights are the RRF fallback when Method is set to rrf.
// See the eval notes.
func BuiltinOptions() Options {
	return Options{K: 5, BM25Weight: 1, VectorWeight: 0.15, Method: MethodConvex, Alpha: 0.6,
		FeedbackChunks: 3, FeedbackWeight: 1}
}

// BuiltinLSAOptions is BuiltinOptions for a builtin model that was not
// fine-tuned (trained before fine-tuning existed, or with
// BMCIS_BUILTIN_CONTRASTIVE_EPOCHS=0): plain LSA was best at BM25 share 0.7
// and feedback weight 2 (SciFact train hybrid 0.7104, against 0.7071 with
// the fine-tuned model's preset).
func BuiltinLSAOptions() Options {
	o := BuiltinOptions()
	o.Alpha, o.FeedbackWeight = 0.7, 2
	return o
}

// Fuse fuses with the method opts name (RRF or Convex).
// A convex fusion missing one list (no model, a failed query embedding)
// ranks by the other alone, scored 0..1 as if that side had all the weight.
func Fuse(bm25, vector []Candidate, opts Options) []Result {
	if opts.Method == MethodConvex {
		alpha := opts.Alpha
		switch {
		case len(vector) == 0:
			alpha = 1
		case len(bm25) == 0:
			alpha = 0
		}
		return Convex(bm25, vector, alpha, opts.Limit)
	}
	return RRF(bm25, vector, opts)
}

func (o Options) withDefaults() Options {
	if o.K <= 0 {
		o.K = 60
	}
	if o.BM25Weight == 0 && o.VectorWeight == 0 {
		o.BM25Weight, o.VectorWeight = 1, 1
	}
	o.BM25Weight = math.Max(o.BM25Weight, 0)
	o.VectorWeight = math.Max(o.VectorWeight, 0)
	return o
}

// Result is one fused hit.
type Result struct {
	ChunkID         int64
	HybridScore     float64
	BM25Score       float64
	SimilarityScore float64
	// Fused is the raw RRF sum.
	Fused float64
	// RawBM25 and Cosine are the retrievers' own scores (0 when absent).
	RawBM25 float64
	Cosine  float64
	// BM25Rank and VectorRank are 1-based ranks; 0 means absent.
	BM25Rank   int
	VectorRank int
	ScoreType  string
}

// RRF fuses the two ranked lists. Lists must be ordered best first; a chunk
// id appearing twice in one list keeps its first (best) rank. Results are
// ordered by HybridScore descending, ties by ascending chunk id.
func RRF(bm25, vector []Candidate, opts Options) []Result {
	out := rrfUnsorted(bm25, vector, opts)
	sortResults(out, func(r *Result) float64 { return r.Fused })
	if opts.Limit > 0 && len(out) > opts.Limit {
		out = out[:opts.Limit]
	}
	return out
}

// rrfUnsorted is RRF's results in the order their chunks were first met
// (bm25's, then vector's new ones), not sorted nor limited.
func rrfUnsorted(bm25, vector []Candidate, opts Options) []Result {
	opts = opts.withDefaults()
	// Indices into out, not pointers: a result each would be an
	// allocation.
	byID := make(map[int64]int, len(bm25)+len(vector))
	out := make([]Result, 0, len(bm25)+len(vector))
	get := func(id int64) *Result {
		if i, ok := byID[id]; ok {
			return &out[i]
		}
		byID[id] = len(out)
		out = append(out, Result{ChunkID: id})
		return &out[len(out)-1]
	}
	topBM25 := 0.0
	for _, c := range bm25 {
		topBM25 = math.Max(topBM25, c.Score)
	}
	for i, c := range bm25 {
		r := get(c.ChunkID)
		if r.BM25Rank != 0 {
			continue
		}
		r.BM25Rank = i + 1
		r.RawBM25 = c.Score
		if topBM25 > 0 {
			r.BM25Score = c.Score / topBM25
		}
		r.Fused += opts.BM25Weight / (opts.K + float64(i+1))
	}
	for i, c := range vector {
		r := get(c.ChunkID)
		if r.VectorRank != 0 {
			continue
		}
		r.VectorRank = i + 1
		r.Cosine = c.Score
		r.SimilarityScore = clamp01(c.Score)
		r.Fused += opts.VectorWeight / (opts.K + float64(i+1))
	}
	maxFused := (opts.BM25Weight + opts.VectorWeight) / (opts.K + 1)
	for i := range out {
		r := &out[i]
		if maxFused > 0 {
			r.HybridScore = r.Fused / maxFused
		}
		switch {
		case r.BM25Rank > 0 && r.VectorRank > 0:
			r.ScoreType = ScoreHybrid
		case r.BM25Rank > 0:
			r.ScoreType = ScoreBM25
		default:
			r.ScoreType = ScoreVector
		}
	}
	return out
}

// FromBM25 converts a keyword-only ranking into Results (keyword search
// mode): HybridScore equals BM25Score.
func FromBM25(list []Candidate) []Result {
	out := make([]Result, 0, len(list))
	top := 0.0
	for _, c := range list {
		top = math.Max(top, c.Score)
	}
	for i, c := range list {
		r := Result{ChunkID: c.ChunkID, RawBM25: c.Score, BM25Rank: i + 1, ScoreType: ScoreBM25}
		if top > 0 {
			r.BM25Score = c.Score / top
		}
		r.HybridScore = r.BM25Score
		out = append(out, r)
	}
	sortResults(out, func(r *Result) float64 { return r.RawBM25 })
	return out
}

// FromVector converts a vector-only ranking into Results (semantic search
// mode): HybridScore equals SimilarityScore.
func FromVector(list []Candidate) []Result {
	out := make([]Result, 0, len(list))
	for i, c := range list {
		s := clamp01(c.Score)
		out = append(out, Result{ChunkID: c.ChunkID, Cosine: c.Score, SimilarityScore: s, HybridScore: s, VectorRank: i + 1, ScoreType: ScoreVector})
	}
	sortResults(out, func(r *Result) float64 { return r.Cosine })
	return out
}

// sortResults orders by key descending, ties by ascending chunk id.
// slices' stable sort is sort.SliceStable's algorithm without its
// reflection (the same comparisons, so the same order whatever the keys,
// NaN included) at a fraction of the cost.
func sortResults(rs []Result, key func(*Result) float64) {
	keys := resultKeys(nil, rs, key)
	sortKeys(keys)
	permute(rs, keys)
}

// sortKey is a result as sortResults compares it, and where it is: the
// sort moves these 24 bytes instead of a Result's 88, and the results
// move once, to their places, after it.
type sortKey struct {
	key float64
	id  int64
	at  int
}

// resultKeys writes rs's keys, in rs's order, over dst's array.
func resultKeys(dst []sortKey, rs []Result, key func(*Result) float64) []sortKey {
	dst = dst[:0]
	for i := range rs {
		dst = append(dst, sortKey{key: key(&rs[i]), id: rs[i].ChunkID, at: i})
	}
	return dst
}

// sortKeys is sortResults' sort: the comparisons it made on the results
// themselves, so the same order.
func sortKeys(keys []sortKey) {
	slices.SortStableFunc(keys, func(a, b sortKey) int {
		if a.key != b.key {
			if a.key > b.key {
				return -1
			}
			return 1 // NaN included: never before
		}
		return cmp.Compare(a.id, b.id)
	})
}

// permute puts rs[keys[i].at] at i for every i, in place (a cycle at a
// time); it spends keys' positions.
func permute(rs []Result, keys []sortKey) {
	for start := range keys {
		if keys[start].at < 0 {
			continue
		}
		tmp := rs[start]
		for k := start; ; {
			src := keys[k].at
			keys[k].at = -1
			if src == start {
				rs[k] = tmp
				break
			}
			rs[k] = rs[src]
			k = src
		}
	}
}

func clamp01(x float64) float64 {
	switch {
	case x < 0 || math.IsNaN(x):
		return 0
	case x > 1:
		return 1
	}
	return x
}

// Convex fuses by a convex combination of min-max normalized scores:
// fused = alpha*bm25mm + (1-alpha)*vecmm, where each retriever's scores are
// min-max scaled over its own candidate list (a chunk a retriever did not
// return gets 0 from it). HybridScore is fused itself (already 0..1);
// BM25Score and SimilarityScore follow the package definitions.
// Unlike RRF it uses score magnitudes, so a weaker retriever moves results
// only where it is confident (Bruch et al., 2023, "An Analysis of Fusion
// Functions for Hybrid Retrieval").
func Convex(bm25, vector []Candidate, alpha float64, limit int) []Result {
	alpha = clamp01(alpha)
	// RRF's list, then its fused scores replaced and sorted again: both
	// sorts on keys (sortResults), the results moved once at the end.
	out := rrfUnsorted(bm25, vector, Options{K: 60, BM25Weight: 1, VectorWeight: 1})
	keys := resultKeys(nil, out, func(r *Result) float64 { return r.Fused })
	sortKeys(keys)
	bLo, bSpan := ScoreBounds(bm25)
	vLo, vSpan := ScoreBounds(vector)
	for i := range out {
		r := &out[i]
		var b, v float64
		if r.BM25Rank > 0 {
			b = 1
			if bSpan > 0 {
				b = (r.RawBM25 - bLo) / bSpan
			}
		}
		if r.VectorRank > 0 {
			v = 1
			if vSpan > 0 {
				v = (r.Cosine - vLo) / vSpan
			}
		}
		r.Fused = alpha*b + (1-alpha)*v
		r.HybridScore = r.Fused
	}
	for i := range keys { // in RRF's order, as the second sort found them
		keys[i].key = out[keys[i].at].Fused
	}
	sortKeys(keys)
	permute(out, keys)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ScoreBounds is the lowest score of list and the span to its highest,
// the min-max normalisation Convex applies to each list (0, 0 when empty).
func ScoreBounds(list []Candidate) (lo, span float64) {
	if len(list) == 0 {
		return 0, 0
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range list {
		lo, hi = math.Min(lo, c.Score), math.Max(hi, c.Score)
	}
	return lo, hi - lo
}
