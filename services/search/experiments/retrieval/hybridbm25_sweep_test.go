package retrieval

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestHybridBM25Params: the hybrid with BM25 parameters of its own (the
// lexical mode keeps k1 1.2, b 0.75). BMCIS_EVAL_SEM=hybridbm25.
func TestHybridBM25Params(t *testing.T) {
	ds := sweepData(t, "hybridbm25")
	ctx := context.Background()
	for _, p := range []bm25.Params{{K1: 1.2, B: 0.75}, {K1: 0.9, B: 0.75}, {K1: 1.5, B: 0.75}, {K1: 2.0, B: 0.75}, {K1: 1.2, B: 0.6}, {K1: 1.2, B: 0.9}, {K1: 2.0, B: 0.9}} {
		cfg := DefaultConfig()
		cfg.BM25 = p
		pl, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		for _, alpha := range []float64{0.55, 0.6, 0.65} {
			o := fusion.BuiltinOptions()
			o.Alpha = alpha
			res, err := pl.Run(ctx, ds, Fusion{Method: "preset", RRF: o})
			require.NoError(t, err)
			t.Logf("k1 %.1f b %.2f share %.2f: bm25 %.4f / %.4f  hybrid %.4f / %.4f", p.K1, p.B, alpha,
				res.BM25.NDCG10, res.BM25.Recall100, res.Hybrid.NDCG10, res.Hybrid.Recall100)
		}
	}
}
