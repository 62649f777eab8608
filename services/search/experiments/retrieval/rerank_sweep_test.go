package retrieval

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestRerankSweep measures second stages over the shipped hybrid (issue
// 14, NOTES.md "Third round"), each compared query by query with it:
//
//		BMCIS_EVAL_SEM=rerank BMCIS_EVAL_RERANK=coverage,feedback,rounds,maxsim \
//		  go test ./experiments/retrieval -run TestRerankSweep -v -timeout 30m
//
//	  - coverage: + mu x the mean (or weakest) cosine of each query term's own
//	    vector with the candidate (topical coverage term by term);
//	  - feedback: the feedback vector weighted by BM25 rank or score instead
//	    of a plain mean of the top m hits;
//	  - rounds: a second vector query moved towards the first fused top m;
//	  - maxsim: + mu x the best cosine of the query with one sentence of the
//	    candidate, over the fused top N;
//	  - regularize: + mu x the fused scores of the other top m results
//	    weighted by their cosine with the candidate (score regularization);
//	  - normalize: convex fusion of scores normalized otherwise than by
//	    min-max over the list; combined: that with weighted feedback.
func TestRerankSweep(t *testing.T) {
	parts := os.Getenv("BMCIS_EVAL_RERANK")
	if parts == "" {
		parts = "analysis,proximity,coverage,feedback,rounds,maxsim,regularize,normalize,combined"
	}
	ds := sweepData(t, "rerank")
	// BMCIS_EVAL_SEEDS=1,2,...: repeat everything for each fine-tuning
	// seed and log the means (one seed's figures vary by about 0.002).
	seeds, err := EnvList("BMCIS_EVAL_SEEDS", []uint64{0})
	require.NoError(t, err)
	type mean struct{ n, d, ndcg, r float64 }
	means := map[string]*mean{}
	var order []string
	for _, seed := range seeds {
		rerankSweep(t, ds, parts, seed, func(name string, m eval.Metrics, d float64) {
			if means[name] == nil {
				means[name] = &mean{}
				order = append(order, name)
			}
			a := means[name]
			a.n++
			a.d += d
			a.ndcg += m.NDCG10
			a.r += m.Recall100
		})
	}
	if len(seeds) > 1 {
		var b strings.Builder
		for _, k := range order {
			a := means[k]
			fmt.Fprintf(&b, "%-42s %.4f / %.4f  %+.4f\n", k, a.ndcg/a.n, a.r/a.n, a.d/a.n)
		}
		t.Logf("means over %d seeds (last column: - shipped):\n%s", len(seeds), b.String())
	}
}

func rerankSweep(t *testing.T, ds *eval.Dataset, parts string, seed uint64, record func(name string, m eval.Metrics, d float64)) {
	ctx := context.Background()
	cfg := DefaultConfig()
	if seed != 0 {
		cfg.Embed.Contrastive.Seed = seed
	}
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	base, err := p.Run(ctx, ds, cfg.Fusion)
	require.NoError(t, err)
	t.Logf("seed %d, shipped: %.4f / %.4f", seed, base.Hybrid.NDCG10, base.Hybrid.Recall100)
	record("shipped", base.Hybrid, 0)
	cands, _, err := p.candidates(ctx, ds, 100)
	require.NoError(t, err)
	qvec := map[string][]float32{}
	for _, q := range ds.Queries {
		v, err := p.model.Embed(ctx, []string{q.Text})
		require.NoError(t, err)
		qvec[q.ID] = v[0]
	}
	opts := fusion.BuiltinOptions()
	// report evaluates one ranking per query against the shipped hybrid.
	report := func(name string, rank func(q eval.Query) []int64) {
		run := eval.Run{}
		for _, q := range ds.Queries {
			ids := rank(q)
			run[q.ID] = p.docs(len(ids), func(i int) int64 { return ids[i] })
		}
		m := eval.Evaluate(run, ds.Qrels)
		d, se := eval.PairedNDCG10(run, base.HybridRun, ds.Qrels)
		t.Logf("%-42s %.4f / %.4f  %+.4f ± %.4f", name, m.NDCG10, m.Recall100, d, se)
		record(name, m, d)
	}
	// boosted re-sorts the first n fused results by Fused + mu x the
	// min-max of extra over them.
	boosted := func(fused []fusion.Result, n int, mu float64, extra func(chunk int64) float64) []int64 {
		n = min(n, len(fused))
		x := make([]float64, n)
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := 0; i < n; i++ {
			x[i] = extra(fused[i].ChunkID)
			lo, hi = math.Min(lo, x[i]), math.Max(hi, x[i])
		}
		score := make([]float64, n)
		for i := range score {
			score[i] = fused[i].Fused
			if hi > lo {
				score[i] += mu * (x[i] - lo) / (hi - lo)
			}
		}
		return resortTop(fused, score)
	}
	ids := func(rs []fusion.Result) []int64 {
		out := make([]int64, len(rs))
		for i, r := range rs {
			out[i] = r.ChunkID
		}
		return out
	}
	shipped := func(q eval.Query) []fusion.Result { qc := cands[q.ID]; return fusion.Fuse(qc.bm, qc.vecFB, opts) }

	if strings.Contains(parts, "analysis") {
		bucket := func(ranked []string, rels map[string]int) int {
			for i, d := range eval.Dedupe(ranked) {
				if rels[d] > 0 {
					switch {
					case i == 0:
						return 0
					case i < 3:
						return 1
					case i < 10:
						return 2
					case i < 100:
						return 3
					}
					break
				}
			}
			return 4
		}
		names := []string{"1", "2-3", "4-10", "11-100", ">100"}
		var trans [5][5]int
		var gain [5]float64
		var vecB [5][5]int
		for qid, rels := range ds.Qrels {
			b := bucket(base.BM25Run[qid], rels)
			h := bucket(base.HybridRun[qid], rels)
			qc := cands[qid]
			vr := make([]string, len(qc.vecFB))
			for i, c := range qc.vecFB {
				vr[i] = p.chunkDoc[c.ChunkID]
			}
			trans[b][h]++
			vecB[b][bucket(vr, rels)]++
			gain[b] += eval.NDCG(eval.Dedupe(base.HybridRun[qid]), rels, 10) - eval.NDCG(eval.Dedupe(base.BM25Run[qid]), rels, 10)
		}
		for b := range trans {
			t.Logf("first relevant in BM25 at %-6s -> hybrid %v, feedback vector %v; nDCG@10 change summed %+.2f", names[b], trans[b], vecB[b], gain[b])
		}
	}
	if strings.Contains(parts, "proximity") {
		// Term proximity (BM25TP-like) on the BM25 top 100: for each pair
		// of distinct query terms, acc = sum of 1/d^2 over occurrences at
		// most 5 positions apart; prox = sum min(idf) x acc / (1 + acc).
		terms := make([][]string, len(p.chunkTxt))
		df := map[string]int{}
		for i, txt := range p.chunkTxt {
			terms[i] = p.analyzer.Terms(txt)
			seen := map[string]bool{}
			for _, tm := range terms[i] {
				if !seen[tm] {
					seen[tm] = true
					df[tm]++
				}
			}
		}
		n := float64(len(p.chunkTxt))
		idf := func(tm string) float64 {
			f := float64(df[tm])
			return math.Log(1 + (n-f+0.5)/(f+0.5))
		}
		prox := func(qterms []string, chunk int64) float64 {
			pos := map[string][]int{}
			for i, tm := range terms[chunk] {
				pos[tm] = append(pos[tm], i)
			}
			var out float64
			for a := 0; a < len(qterms); a++ {
				for b := a + 1; b < len(qterms); b++ {
					pa, pb := pos[qterms[a]], pos[qterms[b]]
					if len(pa) == 0 || len(pb) == 0 {
						continue
					}
					acc := 0.0
					for _, x := range pa {
						for _, y := range pb {
							if d := math.Abs(float64(x - y)); d <= 5 && d > 0 {
								acc += 1 / (d * d)
							}
						}
					}
					out += math.Min(idf(qterms[a]), idf(qterms[b])) * acc / (1 + acc)
				}
			}
			return out
		}
		for _, lambda := range []float64{0.25, 0.5, 1, 2} {
			bmRun, hybRun := eval.Run{}, eval.Run{}
			for _, q := range ds.Queries {
				qc := cands[q.ID]
				var qterms []string
				for _, qt := range p.analyzer.QueryTerms(q.Text) {
					qterms = append(qterms, qt.Term)
				}
				bm := slices.Clone(qc.bm)
				for i := range bm {
					bm[i].Score += lambda * prox(qterms, bm[i].ChunkID)
				}
				sort.SliceStable(bm, func(a, b int) bool { return bm[a].Score > bm[b].Score })
				ids := make([]int64, len(bm))
				for i, c := range bm {
					ids[i] = c.ChunkID
				}
				bmRun[q.ID] = p.docs(len(ids), func(i int) int64 { return ids[i] })
				fused := fusion.Fuse(bm, qc.vecFB, opts)
				hybRun[q.ID] = p.docs(len(fused), func(i int) int64 { return fused[i].ChunkID })
			}
			mb, mh := eval.Evaluate(bmRun, ds.Qrels), eval.Evaluate(hybRun, ds.Qrels)
			db, seb := eval.PairedNDCG10(bmRun, base.BM25Run, ds.Qrels)
			dh, seh := eval.PairedNDCG10(hybRun, base.HybridRun, ds.Qrels)
			t.Logf("proximity lambda %.2f: BM25 %.4f / %.4f (%+.4f ± %.4f), hybrid %.4f / %.4f (%+.4f ± %.4f)",
				lambda, mb.NDCG10, mb.Recall100, db, seb, mh.NDCG10, mh.Recall100, dh, seh)
			record(fmt.Sprintf("proximity lambda %.2f: bm25", lambda), mb, db)
			record(fmt.Sprintf("proximity lambda %.2f: hybrid", lambda), mh, dh)
		}
	}
	if strings.Contains(parts, "coverage") {
		termVecs := map[string][][]float32{}
		for _, q := range ds.Queries {
			var words []string
			for _, qt := range p.analyzer.QueryTerms(q.Text) {
				words = append(words, qt.Words[0])
			}
			vs, err := p.model.Embed(ctx, words)
			require.NoError(t, err)
			for _, v := range vs {
				if embed.Dot(v, v) > 0 {
					termVecs[q.ID] = append(termVecs[q.ID], v)
				}
			}
		}
		for _, agg := range []string{"mean", "min", "mean of sqrt"} {
			for _, mu := range []float64{0.05, 0.1, 0.2, 0.3} {
				report(fmt.Sprintf("term coverage %s mu %.2f", agg, mu), func(q eval.Query) []int64 {
					tv := termVecs[q.ID]
					return boosted(shipped(q), 1000, mu, func(c int64) float64 {
						if len(tv) == 0 {
							return 0
						}
						s := 0.0
						if agg == "min" {
							s = math.Inf(1)
						}
						for _, v := range tv {
							x := float64(embed.Dot(v, p.vectors[c]))
							switch agg {
							case "min":
								s = math.Min(s, x)
							case "mean":
								s += math.Max(0, x) / float64(len(tv))
							default:
								s += math.Sqrt(math.Max(0, x)) / float64(len(tv))
							}
						}
						return s
					})
				})
			}
		}
	}
	// refuse re-queries the vectors with q moved towards vs (weights ws,
	// summing to w) and fuses at BM25 share alpha.
	refuse := func(q eval.Query, vs [][]float32, ws []float64, alpha float64) []int64 {
		qv := append([]float32(nil), qvec[q.ID]...)
		for i, v := range vs {
			for c := range qv {
				qv[c] += float32(ws[i]) * v[c]
			}
		}
		embed.Normalize(qv)
		o := opts
		o.Alpha = alpha
		return ids(fusion.Fuse(cands[q.ID].bm, exactKNN(p.vectors, qv, 100), o))
	}
	if strings.Contains(parts, "feedback") {
		for _, m := range []int{3, 5, 10} {
			for _, scheme := range []string{"rank", "score", "score^4"} {
				for _, w := range []float64{1, 1.5} {
					for _, alpha := range []float64{0.55, 0.6, 0.65} {
						report(fmt.Sprintf("feedback by %s m %d w %.1f share %.2f", scheme, m, w, alpha), func(q eval.Query) []int64 {
							bm := cands[q.ID].bm
							n := min(m, len(bm))
							ws := make([]float64, n)
							var vs [][]float32
							sum := 0.0
							for i := 0; i < n; i++ {
								r := bm[i].Score / bm[0].Score
								switch scheme {
								case "rank":
									ws[i] = 1 / float64(i+1)
								case "score":
									ws[i] = r
								default:
									ws[i] = r * r * r * r
								}
								sum += ws[i]
								vs = append(vs, p.vectors[bm[i].ChunkID])
							}
							for i := range ws {
								ws[i] *= w / sum
							}
							return refuse(q, vs, ws, alpha)
						})
					}
				}
			}
		}
	}
	if strings.Contains(parts, "rounds") {
		for _, m := range []int{2, 3, 5} {
			for _, w := range []float64{0.5, 1, 2} {
				for _, alpha := range []float64{0.6, 0.7} {
					report(fmt.Sprintf("two rounds m %d w %.1f share %.2f", m, w, alpha), func(q eval.Query) []int64 {
						fused := shipped(q)
						var vs [][]float32
						var ws []float64
						for i := 0; i < min(m, len(fused)); i++ {
							vs = append(vs, p.vectors[fused[i].ChunkID])
						}
						for range vs {
							ws = append(ws, w/float64(len(vs)))
						}
						return refuse(q, vs, ws, alpha)
					})
				}
			}
		}
	}
	if strings.Contains(parts, "regularize") {
		// Score regularization (Diaz 2005): + mu x the fused scores of the
		// other top-m results weighted by their cosine with the candidate,
		// so candidates like other strong ones rise.
		for _, n := range []int{20, 50} {
			for _, m := range []int{3, 5, 10, 20} {
				for _, mu := range []float64{0.05, 0.1, 0.2, 0.4} {
					report(fmt.Sprintf("regularize top %d by %d, mu %.2f", n, m, mu), func(q eval.Query) []int64 {
						fused := shipped(q)
						top := fused[:min(m, len(fused))]
						return boosted(fused, n, mu, func(c int64) float64 {
							sum := 0.0
							for _, r := range top {
								if r.ChunkID != c {
									sum += r.Fused * float64(embed.Dot(p.vectors[c], p.vectors[r.ChunkID]))
								}
							}
							return sum
						})
					})
				}
			}
		}
	}
	if strings.Contains(parts, "normalize") {
		// Convex fusion with other score normalizations than min-max over
		// the whole list: min at rank k (scores below it count 0), or the
		// score over the list's best (k 0).
		for _, k := range []int{0, 10, 20, 50, 100} {
			for _, alpha := range []float64{0.5, 0.55, 0.6, 0.65, 0.7} {
				name := fmt.Sprintf("normalize min at rank %d, share %.2f", k, alpha)
				if k == 0 {
					name = fmt.Sprintf("normalize by the best, share %.2f", alpha)
				}
				report(name, func(q eval.Query) []int64 { return convexBy(cands[q.ID].bm, cands[q.ID].vecFB, k, alpha) })
			}
		}
	}
	if strings.Contains(parts, "combined") {
		// The two best second stages together: feedback weighted by
		// (score / best)^4 over the top 3, weight 1, and scores over the
		// list's best.
		for _, alpha := range []float64{0.55, 0.6, 0.65} {
			report(fmt.Sprintf("feedback by score^4 + normalize by the best, share %.2f", alpha), func(q eval.Query) []int64 {
				bm := cands[q.ID].bm
				n := min(3, len(bm))
				qv := append([]float32(nil), qvec[q.ID]...)
				ws := make([]float64, n)
				sum := 0.0
				for i := 0; i < n; i++ {
					r := bm[i].Score / bm[0].Score
					ws[i] = r * r * r * r
					sum += ws[i]
				}
				for i := 0; i < n; i++ {
					for c, x := range p.vectors[bm[i].ChunkID] {
						qv[c] += float32(ws[i]/sum) * x
					}
				}
				embed.Normalize(qv)
				return convexBy(bm, exactKNN(p.vectors, qv, 100), 0, alpha)
			})
		}
	}
	if strings.Contains(parts, "maxsim") {
		sent := make([][][]float32, len(p.chunkTxt))
		parallel(len(p.chunkTxt), func(i int) {
			_, body, ok := strings.Cut(p.chunkTxt[i], "\n")
			if !ok {
				body = p.chunkTxt[i]
			}
			if vs, err := p.model.Embed(ctx, embed.SplitSentences(body)); err == nil {
				sent[i] = vs
			}
		})
		for _, topN := range []int{20, 50} {
			for _, mu := range []float64{0.05, 0.1, 0.2, 0.4} {
				report(fmt.Sprintf("sentence max-sim top %d mu %.2f", topN, mu), func(q eval.Query) []int64 {
					return boosted(shipped(q), topN, mu, func(c int64) float64 {
						best := -1.0
						for _, sv := range sent[c] {
							best = math.Max(best, float64(embed.Dot(sv, qvec[q.ID])))
						}
						return best
					})
				})
			}
		}
	}
}

// convexBy fuses two score-sorted lists convexly (alpha: BM25's share),
// each score normalized as (s - lo) / (best - lo) floored at 0, lo the
// score at rank k (k 0: lo 0, the score over the list's best).
func convexBy(bm, vec []fusion.Candidate, k int, alpha float64) []int64 {
	score := map[int64]float64{}
	add := func(list []fusion.Candidate, share float64) {
		if len(list) == 0 {
			return
		}
		hi, lo := list[0].Score, 0.0
		if k > 0 {
			lo = list[min(k, len(list))-1].Score
		}
		for _, c := range list {
			x := 0.0 // still a candidate, with nothing from this list
			if hi > lo {
				x = math.Max(0, (c.Score-lo)/(hi-lo))
			}
			score[c.ChunkID] += share * x
		}
	}
	add(bm, alpha)
	add(vec, 1-alpha)
	out := make([]int64, 0, len(score))
	for id := range score {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b int64) int {
		if score[a] != score[b] {
			if score[a] > score[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	return out
}
