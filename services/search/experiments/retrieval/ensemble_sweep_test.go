package retrieval

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestEnsembleSweep: the vector side as the mean cosine of k builtin
// models fine-tuned with different seeds (the same as one vector of k x
// 256 dims, each model's part normalized), against one model
// (BMCIS_EVAL_SEM=ensemble; BMCIS_EVAL_ENSEMBLE=1:2,3:4,5:6 the seed groups).
func TestEnsembleSweep(t *testing.T) {
	ds := sweepData(t, "ensemble")
	ctx := context.Background()
	groups := os.Getenv("BMCIS_EVAL_ENSEMBLE")
	if groups == "" {
		groups = "1:2,3:4,5:6"
	}
	pipes := map[uint64]*Pipeline{}
	pipe := func(seed uint64) *Pipeline {
		if p := pipes[seed]; p != nil {
			return p
		}
		cfg := DefaultConfig()
		cfg.Embed.Contrastive.Seed = seed
		p, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		pipes[seed] = p
		return p
	}
	for _, g := range strings.Split(groups, ",") {
		var members []*Pipeline
		for _, f := range strings.Split(g, ":") {
			var sd uint64
			_, err := fmt.Sscanf(f, "%d", &sd)
			require.NoError(t, err)
			members = append(members, pipe(sd))
		}
		first := members[0]
		for _, alpha := range []float64{0.5, 0.55, 0.6, 0.65} {
			for _, fbw := range []float64{1, 1.5} {
				run := eval.Run{}
				for _, q := range ds.Queries {
					qcs, _, err := first.candidates(ctx, ds, 100)
					require.NoError(t, err)
					bm := qcs[q.ID].bm
					score := make([]float64, len(first.vectors))
					for _, p := range members {
						qv, err := p.model.Embed(ctx, []string{q.Text})
						require.NoError(t, err)
						var fb [][]float32
						for i := 0; i < min(3, len(bm)); i++ {
							fb = append(fb, p.vectors[bm[i].ChunkID])
						}
						v := embed.Feedback(qv[0], fb, float32(fbw))
						for c, dv := range p.vectors {
							score[c] += float64(embed.Dot(dv, v)) / float64(len(members))
						}
					}
					vec := make([]fusion.Candidate, len(score))
					for c, s := range score {
						vec[c] = fusion.Candidate{ChunkID: int64(c), Score: s}
					}
					sort.Slice(vec, func(i, j int) bool {
						if vec[i].Score != vec[j].Score {
							return vec[i].Score > vec[j].Score
						}
						return vec[i].ChunkID < vec[j].ChunkID
					})
					vec = vec[:100]
					o := fusion.BuiltinOptions()
					o.Alpha = alpha
					fused := fusion.Fuse(bm, vec, o)
					run[q.ID] = first.docs(len(fused), func(i int) int64 { return fused[i].ChunkID })
				}
				m := eval.Evaluate(run, ds.Qrels)
				t.Logf("ensemble %s, fb weight %.1f, share %.2f: hybrid %.4f / %.4f", g, fbw, alpha, m.NDCG10, m.Recall100)
			}
		}
	}
}
