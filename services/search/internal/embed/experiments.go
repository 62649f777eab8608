package embed

import (
	"context"
	"math"
	"slices"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
)

// Representations measured against LSA on SciFact and not shipped
// (services/search/experiments/retrieval: NOTES.md, representations_test.go).
// They reuse Builtin's linear form, vector = sum_t w_t * P[t], with another
// P and global weight, so they need Builtin's unexported parts: this is the
// one piece of the experiments that stays in the package, exported for them
// alone. The service never calls it (the linker drops it from binaries).

// ExperimentRandomIndexing: P[t] is a sparse random ternary vector (nnz
// entries of +-1 in dims), global weight idf: a random projection of the
// TF-IDF vector, so cosines approximate TF-IDF cosines.
func ExperimentRandomIndexing(ctx context.Context, a *analysis.Analyzer, texts []string, dims, nnz int) (*Builtin, error) {
	m, err := TrainBuiltin(ctx, a, texts, BuiltinConfig{Dims: 2, Weighting: WeightTFIDF, SigmaExp: 0})
	if err != nil {
		return nil, err
	}
	g := newGaussian(42)
	m.dims = dims
	m.proj = make([]float32, len(m.terms)*dims)
	for t := range m.terms {
		for k := 0; k < nnz; k++ {
			c := int(g.u64() % uint64(dims))
			s := float32(1)
			if g.u64()&1 == 1 {
				s = -1
			}
			m.proj[t*dims+c] += s
		}
	}
	m.id = m.computeID()
	return m, nil
}

// ExperimentPPMISIF: word vectors from the truncated SVD of the positive
// PMI matrix of term co-occurrences within window terms (context
// distribution smoothed by 0.75), W = U Sigma^0.5; texts are pooled with
// smooth inverse frequency weights a/(a+p(t)) and the first principal
// component of the training texts' vectors is removed (Arora et al. 2017).
func ExperimentPPMISIF(ctx context.Context, an *analysis.Analyzer, texts []string, dims, window int, sifA float64) (*Builtin, error) {
	m, err := TrainBuiltin(ctx, an, texts, BuiltinConfig{Dims: 2, Weighting: WeightTFIDF, SigmaExp: 0, MaxDFRatio: 1})
	if err != nil {
		return nil, err
	}
	v := len(m.terms)
	counts := map[uint64]float64{}
	uni := make([]float64, v)
	total := 0.0
	for _, text := range texts {
		var seq []int32
		for _, t := range an.Terms(text) {
			if i, ok := m.termIdx[t]; ok {
				seq = append(seq, i)
				uni[i]++
				total++
			}
		}
		for i, a := range seq {
			for j := i + 1; j < min(len(seq), i+1+window); j++ {
				b := seq[j]
				w := 1 / float64(j-i)
				counts[uint64(a)*uint64(v)+uint64(b)] += w
				counts[uint64(b)*uint64(v)+uint64(a)] += w
			}
		}
	}
	row := make([]float64, v)
	ctxSmooth := make([]float64, v)
	sumAll, sumSmooth := 0.0, 0.0
	for k, c := range counts {
		row[k/uint64(v)] += c
		sumAll += c
	}
	for i := range row {
		ctxSmooth[i] = math.Pow(row[i], 0.75)
		sumSmooth += ctxSmooth[i]
	}
	keys := make([]uint64, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	x := &csr{rows: v, cols: v, ptr: make([]int, 1, v+1)}
	r := 0
	for _, k := range keys {
		i, j := int(k/uint64(v)), int(k%uint64(v))
		for r < i {
			x.ptr = append(x.ptr, len(x.idx))
			r++
		}
		pmi := math.Log(counts[k] / sumAll / ((row[i] / sumAll) * (ctxSmooth[j] / sumSmooth)))
		if pmi > 0 {
			x.idx = append(x.idx, int32(j))
			x.val = append(x.val, pmi)
		}
	}
	for r < v {
		x.ptr = append(x.ptr, len(x.idx))
		r++
	}
	vecs, sig, err := randomizedSVD(x, dims, 20, 3, 1)
	if err != nil {
		return nil, err
	}
	_, k := vecs.Dims()
	m.dims = k
	m.proj = make([]float32, v*k)
	for c := 0; c < k; c++ {
		s := math.Sqrt(sig[c])
		for t := 0; t < v; t++ {
			m.proj[t*k+c] = float32(vecs.At(t, c) * s)
		}
	}
	for t := range m.idf {
		m.idf[t] = float32(sifA / (sifA + uni[t]/total))
	}
	// First principal component of the training texts' (unnormalized)
	// vectors, by power iteration, projected out of every word vector.
	docs := make([][]float32, 0, len(texts))
	for _, text := range texts {
		d := make([]float32, k)
		for _, e := range m.weights(an.Terms(text)) {
			for c, xv := range m.proj[int(e.idx)*k : int(e.idx+1)*k] {
				d[c] += e.w * xv
			}
		}
		docs = append(docs, d)
	}
	u := make([]float32, k)
	for i := range u {
		u[i] = 1
	}
	for it := 0; it < 30; it++ {
		next := make([]float32, k)
		for _, d := range docs {
			p := Dot(d, u)
			for c := range next {
				next[c] += p * d[c]
			}
		}
		Normalize(next)
		u = next
	}
	for t := 0; t < v; t++ {
		w := m.proj[t*k : (t+1)*k]
		p := Dot(w, u)
		for c := range w {
			w[c] -= p * u[c]
		}
	}
	m.id = m.computeID()
	return m, nil
}

// ExperimentNeighbours returns a function giving the n terms nearest to a
// term in the model's term space (rows of the projection, cosine), for
// query expansion from the learned word space.
func ExperimentNeighbours(m *Builtin) func(term string, n int, minCos float32) ([]string, []float32) {
	rows := make([][]float32, len(m.terms))
	for t := range rows {
		r := append([]float32(nil), m.proj[t*m.dims:(t+1)*m.dims]...)
		Normalize(r)
		rows[t] = r
	}
	return func(term string, n int, minCos float32) ([]string, []float32) {
		i, ok := m.termIdx[term]
		if !ok {
			return nil, nil
		}
		type sc struct {
			t int
			c float32
		}
		best := make([]sc, 0, n+1)
		for t, r := range rows {
			if t == int(i) {
				continue
			}
			c := Dot(rows[i], r)
			if c < minCos {
				continue
			}
			if len(best) == n && c <= best[n-1].c {
				continue
			}
			best = append(best, sc{t, c})
			slices.SortFunc(best, func(a, b sc) int {
				if a.c > b.c {
					return -1
				}
				if a.c < b.c {
					return 1
				}
				return a.t - b.t
			})
			if len(best) > n {
				best = best[:n]
			}
		}
		out := make([]string, len(best))
		cos := make([]float32, len(best))
		for k, b := range best {
			out[k], cos[k] = m.terms[b.t], b.c
		}
		return out, cos
	}
}
