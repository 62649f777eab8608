package eval

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// Second-stage experiments over the shipped hybrid (BMCIS_EVAL_SEM=rerank).
func TestRerankSweep(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_SEM") != "rerank" {
		t.Skip("set BMCIS_EVAL_SEM=rerank")
	}
	ds := loadSciFact(t)
	ctx := context.Background()
	cfg := DefaultConfig()
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	base, err := p.Run(ctx, ds, cfg.Fusion)
	require.NoError(t, err)
	t.Logf("shipped: %.4f / %.4f", base.Hybrid.NDCG10, base.Hybrid.Recall100)
	cands, _, err := p.candidates(ctx, ds, 100)
	require.NoError(t, err)

	// Sentence vectors of every chunk (header line excluded).
	sent := make([][][]float32, len(p.chunkTxt))
	parallel(len(p.chunkTxt), func(i int) {
		_, body, ok := strings.Cut(p.chunkTxt[i], "\n")
		if !ok {
			body = p.chunkTxt[i]
		}
		ss := splitSent(body)
		vs, err := p.model.Embed(ctx, ss)
		if err == nil {
			sent[i] = vs
		}
	})
	qvec := map[string][]float32{}
	for _, q := range ds.Queries {
		v, err := p.model.Embed(ctx, []string{q.Text})
		require.NoError(t, err)
		qvec[q.ID] = v[0]
	}
	opts := fusion.BuiltinOptions()
	type row struct {
		name string
		res  Metrics
		d    float64
		se   float64
	}
	var rows []row
	// Per-term topical coverage: each distinct query term's own vector
	// against the candidate, averaged (soft OR) or the weakest (soft AND).
	termVecs := map[string][][]float32{}
	for _, q := range ds.Queries {
		var words []string
		for _, qt := range p.analyzer.QueryTerms(q.Text) {
			words = append(words, qt.Words[0])
		}
		vs, err := p.model.Embed(ctx, words)
		require.NoError(t, err)
		var keep [][]float32
		for _, v := range vs {
			if embed.Dot(v, v) > 0 {
				keep = append(keep, v)
			}
		}
		termVecs[q.ID] = keep
	}
	for _, agg := range []string{"mean", "min", "mean2"} {
		for _, mu := range []float64{0.05, 0.1, 0.2, 0.3} {
			run := Run{}
			for _, q := range ds.Queries {
				qc := cands[q.ID]
				fused := fusion.Fuse(qc.bm, qc.vecFB, opts)
				tv := termVecs[q.ID]
				cov := make([]float64, len(fused))
				lo, hi := math.Inf(1), math.Inf(-1)
				for i, r := range fused {
					dv := p.vectors[r.ChunkID]
					var c float64
					switch agg {
					case "mean", "mean2":
						for _, v := range tv {
							x := math.Max(0, float64(embed.Dot(v, dv)))
							if agg == "mean2" {
								x = math.Sqrt(x)
							}
							c += x
						}
						c /= math.Max(1, float64(len(tv)))
					case "min":
						c = math.Inf(1)
						for _, v := range tv {
							c = math.Min(c, float64(embed.Dot(v, dv)))
						}
						if len(tv) == 0 {
							c = 0
						}
					}
					cov[i] = c
					lo, hi = math.Min(lo, c), math.Max(hi, c)
				}
				type sc struct {
					id int64
					s  float64
				}
				top := make([]sc, len(fused))
				for i, r := range fused {
					v := 0.0
					if hi > lo {
						v = (cov[i] - lo) / (hi - lo)
					}
					top[i] = sc{r.ChunkID, r.Fused + mu*v}
				}
				sort.SliceStable(top, func(a, b int) bool { return top[a].s > top[b].s })
				run[q.ID] = p.docs(len(top), func(i int) int64 { return top[i].id })
			}
			m2 := Evaluate(run, ds.Qrels)
			d, se := PairedNDCG10(run, base.HybridRun, ds.Qrels)
			t.Logf("%-40s %.4f / %.4f  %+.4f ± %.4f", fmt.Sprintf("term coverage %s mu %.2f", agg, mu), m2.NDCG10, m2.Recall100, d, se)
		}
	}
	if os.Getenv("BMCIS_EVAL_FBW") == "" {
		return
	}
	// Feedback weighted by BM25 score or rank instead of a plain mean.
	for _, m := range []int{3, 5, 10} {
		for _, scheme := range []string{"rank", "score", "score2"} {
			for _, w := range []float64{1, 1.5} {
				for _, alpha := range []float64{0.55, 0.6, 0.65} {
					run := Run{}
					for _, q := range ds.Queries {
						qc := cands[q.ID]
						qv := append([]float32(nil), qvec[q.ID]...)
						n := min(m, len(qc.bm))
						var wsum float64
						ws := make([]float64, n)
						for i := 0; i < n; i++ {
							switch scheme {
							case "rank":
								ws[i] = 1 / float64(i+1)
							case "score":
								ws[i] = qc.bm[i].Score / qc.bm[0].Score
							case "score2":
								r := qc.bm[i].Score / qc.bm[0].Score
								ws[i] = r * r * r * r
							}
							wsum += ws[i]
						}
						for i := 0; i < n; i++ {
							v := p.vectors[qc.bm[i].ChunkID]
							for c := range qv {
								qv[c] += float32(w * ws[i] / wsum * float64(v[c]))
							}
						}
						embed.Normalize(qv)
						v2 := exactKNN(p.vectors, qv, 100)
						o := opts
						o.Alpha = alpha
						f2 := fusion.Fuse(qc.bm, v2, o)
						run[q.ID] = p.docs(len(f2), func(i int) int64 { return f2[i].ChunkID })
					}
					m2 := Evaluate(run, ds.Qrels)
					d, se := PairedNDCG10(run, base.HybridRun, ds.Qrels)
					t.Logf("%-40s %.4f / %.4f  %+.4f ± %.4f", fmt.Sprintf("fb %s m %d w %.1f alpha %.2f", scheme, m, w, alpha), m2.NDCG10, m2.Recall100, d, se)
				}
			}
		}
	}
	if os.Getenv("BMCIS_EVAL_ROUNDS") == "" {
		return
	}
	// Two rounds: the vector query moved towards the top hits of the
	// first fused ranking, then fused again.
	for _, m := range []int{2, 3, 5} {
		for _, w := range []float64{0.5, 1, 2} {
			for _, alpha := range []float64{0.6, 0.7} {
				run := Run{}
				for _, q := range ds.Queries {
					qc := cands[q.ID]
					fused := fusion.Fuse(qc.bm, qc.vecFB, opts)
					var vs [][]float32
					for i := 0; i < min(m, len(fused)); i++ {
						vs = append(vs, p.vectors[fused[i].ChunkID])
					}
					q2 := embed.Feedback(qvec[q.ID], vs, float32(w))
					v2 := exactKNN(p.vectors, q2, 100)
					o := opts
					o.Alpha = alpha
					f2 := fusion.Fuse(qc.bm, v2, o)
					run[q.ID] = p.docs(len(f2), func(i int) int64 { return f2[i].ChunkID })
				}
				m2 := Evaluate(run, ds.Qrels)
				d, se := PairedNDCG10(run, base.HybridRun, ds.Qrels)
				t.Logf("%-36s %.4f / %.4f  %+.4f ± %.4f", fmt.Sprintf("2 rounds m %d w %.1f alpha %.2f", m, w, alpha), m2.NDCG10, m2.Recall100, d, se)
			}
		}
	}
	if os.Getenv("BMCIS_EVAL_MAXSIM") == "" {
		return
	}
	for _, topN := range []int{20, 50} {
		for _, mu := range []float64{0.05, 0.1, 0.2, 0.4} {
			for _, fb := range []bool{false, true} {
				run := Run{}
				for _, q := range ds.Queries {
					qc := cands[q.ID]
					fused := fusion.Fuse(qc.bm, qc.vecFB, opts)
					qv := qvec[q.ID]
					if fb {
						var vs [][]float32
						for i := 0; i < min(3, len(qc.bm)); i++ {
							vs = append(vs, p.vectors[qc.bm[i].ChunkID])
						}
						qv = embed.Feedback(qv, vs, 1)
					}
					n := min(topN, len(fused))
					ms := make([]float64, n)
					lo, hi := math.Inf(1), math.Inf(-1)
					for i := 0; i < n; i++ {
						best := -1.0
						for _, sv := range sent[fused[i].ChunkID] {
							best = math.Max(best, float64(embed.Dot(sv, qv)))
						}
						ms[i] = best
						lo, hi = math.Min(lo, best), math.Max(hi, best)
					}
					type sc struct {
						id int64
						s  float64
					}
					top := make([]sc, n)
					for i := 0; i < n; i++ {
						v := 0.0
						if hi > lo {
							v = (ms[i] - lo) / (hi - lo)
						}
						top[i] = sc{fused[i].ChunkID, fused[i].Fused + mu*v}
					}
					sort.SliceStable(top, func(a, b int) bool { return top[a].s > top[b].s })
					ids := make([]int64, 0, len(fused))
					for _, x := range top {
						ids = append(ids, x.id)
					}
					for _, r := range fused[n:] {
						ids = append(ids, r.ChunkID)
					}
					run[q.ID] = p.docs(len(ids), func(i int) int64 { return ids[i] })
				}
				m := Evaluate(run, ds.Qrels)
				d, se := PairedNDCG10(run, base.HybridRun, ds.Qrels)
				rows = append(rows, row{fmt.Sprintf("maxsim top%d mu %.2f fb %v", topN, mu, fb), m, d, se})
				t.Logf("%-36s %.4f / %.4f  %+.4f ± %.4f", rows[len(rows)-1].name, m.NDCG10, m.Recall100, d, se)
			}
		}
	}
}

func splitSent(s string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(s); i++ {
		c := s[i]
		if c != '.' && c != '?' && c != '!' {
			continue
		}
		if s[i+1] != ' ' && s[i+1] != '\n' {
			continue
		}
		n := s[i+2]
		if (n >= 'A' && n <= 'Z') || (n >= '0' && n <= '9') {
			out = append(out, s[start:i+1])
			start = i + 2
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
