package retrieval

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/stretchr/testify/require"
)

// expRun ranks every query with rank and scores the document run.
func (p *Pipeline) expRun(ds *eval.Dataset, rank func(q eval.Query) []int64) eval.Metrics {
	run := eval.Run{}
	for _, q := range ds.Queries {
		ids := rank(q)
		run[q.ID] = p.docs(len(ids), func(i int) int64 { return ids[i] })
	}
	return eval.Evaluate(run, ds.Qrels)
}

func candIDs(c []fusion.Candidate) []int64 {
	out := make([]int64, len(c))
	for i := range c {
		out[i] = c[i].ChunkID
	}
	return out
}

func resIDs(r []fusion.Result) []int64 {
	out := make([]int64, len(r))
	for i := range r {
		out[i] = r[i].ChunkID
	}
	return out
}

// prfVector moves the query vector towards the centroid of the top m
// BM25 hits' vectors (Rocchio in the embedding space).
func prfVector(qv []float32, vecs [][]float32, bm []fusion.Candidate, m int, beta float32) []float32 {
	out := make([]float32, len(qv))
	copy(out, qv)
	n := min(m, len(bm))
	if n == 0 || beta == 0 {
		return out
	}
	for i := 0; i < n; i++ {
		for c, x := range vecs[bm[i].ChunkID] {
			out[c] += beta * x / float32(n)
		}
	}
	embed.Normalize(out)
	return out
}

func TestSemanticSweep(t *testing.T) {
	group := os.Getenv("BMCIS_EVAL_SEM")
	if group == "" {
		t.Skip("set BMCIS_EVAL_SEM")
	}
	ds := loadSciFact(t)
	ctx := context.Background()
	const K = 100
	logm := func(name string, m eval.Metrics) { t.Logf("%-50s %.4f / %.4f", name, m.NDCG10, m.Recall100) }

	if group == "header" {
		for _, hw := range []int{1, 2, 3, 4, 5} {
			cfg := DefaultConfig()
			cfg.Embed = embed.BuiltinConfig{}
			cfg.HeaderWeight = hw
			p, err := Build(ctx, ds, cfg)
			require.NoError(t, err)
			for _, prm := range []bm25.Params{{K1: 1.2, B: 0.75}, {K1: 1.5, B: 0.75}, {K1: 0.9, B: 0.75}} {
				p.Index().SetParams(prm)
				m := p.expRun(ds, func(q eval.Query) []int64 {
					hits := p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: K})
					ids := make([]int64, len(hits))
					for i, h := range hits {
						ids[i] = h.ChunkID
					}
					return ids
				})
				logm(fmt.Sprintf("header x%d k1=%.1f b=%.2f", hw, prm.K1, prm.B), m)
			}
		}
		return
	}

	hw := 1
	if v := os.Getenv("BMCIS_EVAL_HW"); v != "" {
		fmt.Sscan(v, &hw)
	}
	cfg := DefaultConfig()
	cfg.HeaderWeight = hw
	if v := os.Getenv("BMCIS_EVAL_DIMS"); v != "" {
		fmt.Sscan(v, &cfg.Embed.Dims)
	}
	if os.Getenv("BMCIS_EVAL_WT") == "tfidf" {
		cfg.Embed.Weighting = embed.WeightTFIDF
	}
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	type qc struct {
		bm []fusion.Candidate
		qv []float32
	}
	cache := map[string]qc{}
	for _, q := range ds.Queries {
		hits := p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: K})
		c := qc{}
		for _, h := range hits {
			c.bm = append(c.bm, fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score})
		}
		v, err := p.model.Embed(ctx, []string{q.Text})
		require.NoError(t, err)
		c.qv = v[0]
		cache[q.ID] = c
	}
	bmM := p.expRun(ds, func(q eval.Query) []int64 { return candIDs(cache[q.ID].bm) })
	logm(fmt.Sprintf("hw=%d bm25", hw), bmM)
	// Full scores: every chunk's BM25 and cosine, so interpolation never
	// lacks a side.
	type full struct {
		bm  map[int64]float64
		top float64
	}
	fulls := map[string]full{}
	for _, q := range ds.Queries {
		hits := p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: len(p.chunkDoc)})
		f := full{bm: map[int64]float64{}}
		for _, h := range hits {
			f.bm[h.ChunkID] = h.Score
			f.top = math.Max(f.top, h.Score)
		}
		fulls[q.ID] = f
	}
	for _, m := range []int{0, 3} {
		for _, beta := range []float32{1, 2} {
			if m == 0 && beta != 1 {
				continue
			}
			vl := map[string][]fusion.Candidate{}
			qvs := map[string][]float32{}
			for _, q := range ds.Queries {
				c := cache[q.ID]
				qvs[q.ID] = prfVector(c.qv, p.vectors, c.bm, m, beta)
				vl[q.ID] = exactKNN(p.vectors, qvs[q.ID], K)
			}
			vm := p.expRun(ds, func(q eval.Query) []int64 { return candIDs(vl[q.ID]) })
			logm(fmt.Sprintf("vector prf m=%d beta=%.1f", m, beta), vm)
			for _, a := range []float64{0.3, 0.5, 0.7, 1, 1.5} {
				for _, mode := range []string{"union", "bmonly"} {
					hm := p.expRun(ds, func(q eval.Query) []int64 {
						c := cache[q.ID]
						f := fulls[q.ID]
						seen := map[int64]bool{}
						var out []fusion.Candidate
						add := func(id int64) {
							if seen[id] {
								return
							}
							seen[id] = true
							cos := float64(embed.Dot(p.vectors[id], qvs[q.ID]))
							out = append(out, fusion.Candidate{ChunkID: id, Score: f.bm[id]/f.top + a*cos})
						}
						for _, x := range c.bm {
							add(x.ChunkID)
						}
						if mode == "union" {
							for _, x := range vl[q.ID] {
								add(x.ChunkID)
							}
						}
						return resIDs(fusion.FromBM25(out))
					})
					logm(fmt.Sprintf("  interp %s w=%.1f", mode, a), hm)
				}
			}
		}
	}
}

// termScorer caches each term's per-chunk BM25 contribution, so weighted
// (fractional) queries can be scored as sums.
type termScorer struct {
	p     *Pipeline
	cache map[string]map[int64]float64
}

func (ts *termScorer) term(t string) map[int64]float64 {
	if m, ok := ts.cache[t]; ok {
		return m
	}
	m := map[int64]float64{}
	for _, h := range ts.p.index.Search([]string{t}, bm25.SearchOptions{K: len(ts.p.chunkDoc)}) {
		m[h.ChunkID] = h.Score
	}
	ts.cache[t] = m
	return m
}

func (ts *termScorer) search(w map[string]float64, k int) []fusion.Candidate {
	acc := map[int64]float64{}
	for t, x := range w {
		for id, s := range ts.term(t) {
			acc[id] += x * s
		}
	}
	out := make([]fusion.Candidate, 0, len(acc))
	for id, s := range acc {
		out = append(out, fusion.Candidate{ChunkID: id, Score: s})
	}
	r := fusion.FromBM25(out)
	if len(r) > k {
		r = r[:k]
	}
	c := make([]fusion.Candidate, len(r))
	for i := range r {
		c[i] = fusion.Candidate{ChunkID: r[i].ChunkID, Score: r[i].RawBM25}
	}
	return c
}

// rm3 returns the expanded query model: lambda*original + (1-lambda)*
// relevance model of the top fb chunks (top nTerms terms).
func rm3(p *Pipeline, hw int, q []string, top []fusion.Candidate, fb, nTerms int, lambda float64) map[string]float64 {
	orig := map[string]float64{}
	for _, t := range q {
		orig[t] += 1 / float64(len(q))
	}
	rel := map[string]float64{}
	sum := 0.0
	for i := 0; i < min(fb, len(top)); i++ {
		sum += top[i].Score
	}
	for i := 0; i < min(fb, len(top)); i++ {
		id := top[i].ChunkID
		terms := p.analyzer.Terms(p.chunkTxt[id])
		for r := 1; r < hw; r++ {
			terms = p.analyzer.AppendTerms(terms, p.chunkHdr[id])
		}
		for _, t := range terms {
			rel[t] += top[i].Score / sum / float64(len(terms))
		}
	}
	type tw struct {
		t string
		w float64
	}
	var l []tw
	for t, w := range rel {
		l = append(l, tw{t, w})
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].w != l[j].w {
			return l[i].w > l[j].w
		}
		return l[i].t < l[j].t
	})
	if len(l) > nTerms {
		l = l[:nTerms]
	}
	z := 0.0
	for _, x := range l {
		z += x.w
	}
	out := map[string]float64{}
	for t, w := range orig {
		out[t] += lambda * w
	}
	for _, x := range l {
		out[x.t] += (1 - lambda) * x.w / z
	}
	return out
}

func TestRM3Sweep(t *testing.T) {
	ds := sweepData(t, "rm3")
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.HeaderWeight = 3
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	ts := &termScorer{p: p, cache: map[string]map[int64]float64{}}
	base := map[string][]fusion.Candidate{}
	qv := map[string][]float32{}
	for _, q := range ds.Queries {
		base[q.ID] = ts.search(func() map[string]float64 {
			w := map[string]float64{}
			for _, x := range p.analyzer.Terms(q.Text) {
				w[x]++
			}
			return w
		}(), 100)
		v, _ := p.model.Embed(ctx, []string{q.Text})
		qv[q.ID] = v[0]
	}
	t.Logf("bm25 %.4f", p.expRun(ds, func(q eval.Query) []int64 { return candIDs(base[q.ID]) }).NDCG10)
	for _, fb := range []int{3, 5, 10} {
		for _, nt := range []int{10, 20} {
			for _, lam := range []float64{0.5, 0.7, 0.85} {
				exp := map[string][]fusion.Candidate{}
				for _, q := range ds.Queries {
					exp[q.ID] = ts.search(rm3(p, 3, p.analyzer.Terms(q.Text), base[q.ID], fb, nt, lam), 100)
				}
				m := p.expRun(ds, func(q eval.Query) []int64 { return candIDs(exp[q.ID]) })
				line := fmt.Sprintf("rm3 fb=%d terms=%d lambda=%.2f: %.4f / %.4f", fb, nt, lam, m.NDCG10, m.Recall100)
				vl := map[string][]fusion.Candidate{}
				for _, q := range ds.Queries {
					vl[q.ID] = exactKNN(p.vectors, prfVector(qv[q.ID], p.vectors, base[q.ID], 3, 2), 100)
				}
				for _, a := range []float64{0.7, 0.8} {
					h := p.expRun(ds, func(q eval.Query) []int64 { return resIDs(fusion.Convex(exp[q.ID], vl[q.ID], a, 0)) })
					line += fmt.Sprintf(" | convex %.1f %.4f / %.4f", a, h.NDCG10, h.Recall100)
				}
				h := p.expRun(ds, func(q eval.Query) []int64 { return resIDs(fusion.RRF(exp[q.ID], vl[q.ID], fusion.BuiltinOptions())) })
				line += fmt.Sprintf(" | rrf5 %.4f / %.4f", h.NDCG10, h.Recall100)
				t.Log(line)
			}
		}
	}
}

// TestFeedbackTuning: the feedback and convex parameters around the
// shipped preset, and the embedder trained on header-weighted text.
func TestFeedbackTuning(t *testing.T) {
	ds := sweepData(t, "tune")
	ctx := context.Background()
	for _, embHW := range []int{1, 3} {
		cfg := DefaultConfig()
		if embHW > 1 {
			cfg.Train = func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
				return embed.TrainBuiltin(ctx, a, texts, cfg.Embed)
			}
		}
		p, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		if embHW > 1 {
			// Re-embed with the header repeated (training above saw it once;
			// retrain on the weighted texts).
			wt := make([]string, len(p.chunkTxt))
			for i := range wt {
				wt[i] = p.chunkTxt[i]
				for r := 1; r < embHW; r++ {
					wt[i] = p.chunkHdr[i] + "\n" + wt[i]
				}
			}
			m, err := embed.TrainBuiltin(ctx, p.analyzer, wt, cfg.Embed)
			require.NoError(t, err)
			p.model = m
			p.vectors, err = m.Embed(ctx, wt)
			require.NoError(t, err)
		}
		bm := map[string][]fusion.Candidate{}
		qv := map[string][]float32{}
		for _, q := range ds.Queries {
			for _, h := range p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: 100}) {
				bm[q.ID] = append(bm[q.ID], fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score})
			}
			v, _ := p.model.Embed(ctx, []string{q.Text})
			qv[q.ID] = v[0]
		}
		for _, m := range []int{2, 3, 4} {
			for _, beta := range []float32{1.5, 2, 3} {
				vl := map[string][]fusion.Candidate{}
				for _, q := range ds.Queries {
					vl[q.ID] = exactKNN(p.vectors, prfVector(qv[q.ID], p.vectors, bm[q.ID], m, beta), 100)
				}
				line := fmt.Sprintf("embHW=%d m=%d beta=%.1f vec %.4f", embHW, m, beta,
					p.expRun(ds, func(q eval.Query) []int64 { return candIDs(vl[q.ID]) }).NDCG10)
				for _, a := range []float64{0.6, 0.65, 0.7, 0.75} {
					h := p.expRun(ds, func(q eval.Query) []int64 { return resIDs(fusion.Convex(bm[q.ID], vl[q.ID], a, 0)) })
					line += fmt.Sprintf(" | a=%.2f %.4f/%.4f", a, h.NDCG10, h.Recall100)
				}
				t.Log(line)
			}
		}
	}
}
