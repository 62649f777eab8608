package retrieval

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/eval"
)

func TestEdgeSentences(t *testing.T) {
	lead, last := edgeSentences("A first one. Then 2 more. And the End.")
	require.Equal(t, "A first one.", lead)
	require.Equal(t, "And the End.", last)
	lead, last = edgeSentences("only one")
	require.Equal(t, "only one", lead)
	require.Empty(t, last)
}

// TestPositionalWeights: BM25 with a chunk's first and/or last sentence
// counted more (an abstract states its finding last; a claim restates a
// finding). BMCIS_EVAL_SEM=position; BMCIS_EVAL_POS_HYBRID=1 also trains the
// builtin model (one seed) and reports the hybrid.
func TestPositionalWeights(t *testing.T) {
	ds := sweepData(t, "position")
	ctx := context.Background()
	hybrid := os.Getenv("BMCIS_EVAL_POS_HYBRID") == "1"
	var base eval.Run
	var baseHybrid eval.Run
	for _, w := range [][2]int{{1, 1}, {1, 2}, {1, 3}, {2, 1}, {2, 2}, {1, 4}} {
		cfg := DefaultConfig()
		cfg.LeadWeight, cfg.LastWeight = w[0], w[1]
		if !hybrid {
			cfg.Embed.Dims = 0
		}
		pl, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		res, err := pl.Run(ctx, ds, cfg.Fusion)
		require.NoError(t, err)
		if base == nil {
			base, baseHybrid = res.BM25Run, res.HybridRun
		}
		d, se := eval.PairedNDCG10(res.BM25Run, base, ds.Qrels)
		t.Logf("lead x%d last x%d: bm25 %.4f / %.4f (%+.4f ± %.4f)", w[0], w[1], res.BM25.NDCG10, res.BM25.Recall100, d, se)
		if hybrid {
			d, se := eval.PairedNDCG10(res.HybridRun, baseHybrid, ds.Qrels)
			t.Logf("   hybrid %.4f / %.4f (%+.4f ± %.4f)", res.Hybrid.NDCG10, res.Hybrid.Recall100, d, se)
		}
	}
}
