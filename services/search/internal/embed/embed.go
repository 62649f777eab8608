// Package embed turns text into unit-length vectors for semantic search.
//
// Providers:
//   - builtin: an LSA model (randomized truncated SVD of a TF-IDF
//     term-document matrix) trained on the ingested corpus itself, fully
//     offline and deterministic; see Builtin.
//   - openai: POST {base}/v1/embeddings (OpenAI-compatible servers too).
//   - ollama: POST {base}/api/embed.
//
// Every provider returns L2-normalized vectors so cosine similarity is a
// dot product, and reports a ModelID that changes whenever vectors would
// not be comparable (provider, model, dimensions, version/training), so
// stored vectors from another model are detected instead of silently mixed.
package embed

import (
	"context"
	"math"
)

// Embedder embeds texts.
type Embedder interface {
	// Embed returns one unit-length vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the length of every vector.
	Dimensions() int
	// ModelID identifies provider, model, dimensions and version, e.g.
	// "openai:text-embedding-3-small:256:v1".
	ModelID() string
}

// Dot is the dot product; for unit vectors it is the cosine similarity.
func Dot(a, b []float32) float32 {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Normalize scales v to unit length in place; a zero vector stays zero.
func Normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(s))
	for i := range v {
		v[i] *= inv
	}
}

// Feedback is vector-side pseudo-relevance feedback (Rocchio): the unit
// query vector q moved towards the mean of the feedback vectors fb by
// weight, renormalized. q is not modified; with no feedback the result
// equals q.
func Feedback(q []float32, fb [][]float32, weight float32) []float32 {
	out := make([]float32, len(q))
	copy(out, q)
	if len(fb) == 0 || weight == 0 {
		return out
	}
	s := weight / float32(len(fb))
	for _, v := range fb {
		for c := range out {
			if c < len(v) {
				out[c] += s * v[c]
			}
		}
	}
	Normalize(out)
	return out
}
