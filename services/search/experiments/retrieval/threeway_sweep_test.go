package retrieval

import (
	"context"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestThreeWayFusion: the shipped hybrid fuses BM25 with the vector list
// of the feedback vector only; this adds the query's own vector list as a
// third, with share g of the vector side: score = a·mm(BM25) + (1-a)·((1-g)·
// mm(feedback) + g·mm(query)), min-max per list, 0 where a list lacks the
// chunk (as fusion.Convex). g = 0 is the shipped fusion.
// BMCIS_EVAL_SEM=threeway go test ./experiments/retrieval -run TestThreeWayFusion -v
func TestThreeWayFusion(t *testing.T) {
	ds := sweepData(t, "threeway")
	ctx := context.Background()
	p, err := Build(ctx, ds, DefaultConfig())
	require.NoError(t, err)
	cands, _, err := p.candidates(ctx, ds, 100)
	require.NoError(t, err)
	norm := func(list []fusion.Candidate) map[int64]float64 {
		out := make(map[int64]float64, len(list))
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, c := range list {
			lo, hi = math.Min(lo, c.Score), math.Max(hi, c.Score)
		}
		for _, c := range list {
			out[c.ChunkID] = 1
			if hi > lo {
				out[c.ChunkID] = (c.Score - lo) / (hi - lo)
			}
		}
		return out
	}
	var base float64
	for _, a := range []float64{0.55, 0.6, 0.65} {
		for _, g := range []float64{0, 0.1, 0.2, 0.3, 0.5} {
			run := eval.Run{}
			for qid, qc := range cands {
				bm, fb, raw := norm(qc.bm), norm(qc.vecFB), norm(qc.vec)
				score := map[int64]float64{}
				for _, m := range []map[int64]float64{bm, fb, raw} {
					for id := range m {
						score[id] = a*bm[id] + (1-a)*((1-g)*fb[id]+g*raw[id])
					}
				}
				ids := make([]int64, 0, len(score))
				for id := range score {
					ids = append(ids, id)
				}
				sort.Slice(ids, func(i, j int) bool {
					if score[ids[i]] != score[ids[j]] {
						return score[ids[i]] > score[ids[j]]
					}
					return ids[i] < ids[j]
				})
				run[qid] = p.docs(len(ids), func(i int) int64 { return ids[i] })
			}
			m := eval.Evaluate(run, ds.Qrels)
			if a == 0.6 && g == 0 {
				base = m.NDCG10
			}
			t.Logf("share %.2f, query-vector share %.1f: nDCG@10 %.4f  Recall@100 %.4f", a, g, m.NDCG10, m.Recall100)
		}
	}
	require.Greater(t, base, 0.7, "g = 0 at share 0.6 is the shipped hybrid")
}
