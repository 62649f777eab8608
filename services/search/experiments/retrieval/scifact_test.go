package retrieval

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/eval"
)

// sciFactDir is $BMCIS_SCIFACT_DIR or <repo>/../shared/data/scifact.
func sciFactDir() string {
	if d := os.Getenv("BMCIS_SCIFACT_DIR"); d != "" {
		return d
	}
	// This package is <repo>/services/search/experiments/retrieval.
	return filepath.Join("..", "..", "..", "..", "..", "shared", "data", "scifact")
}

func loadSciFact(t *testing.T) *eval.Dataset {
	t.Helper()
	dir := sciFactDir()
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Skipf("SciFact not found at %s (set BMCIS_SCIFACT_DIR): %v", dir, err)
	}
	ds, err := eval.LoadBEIR(dir, "train")
	require.NoError(t, err)
	return ds
}

// sweepData skips unless BMCIS_EVAL_SEM names this experiment group, then
// loads SciFact: the gate every sweep of this package shares.
func sweepData(t *testing.T, group string) *eval.Dataset {
	t.Helper()
	if os.Getenv("BMCIS_EVAL_SEM") != group {
		t.Skipf("set BMCIS_EVAL_SEM=%s", group)
	}
	return loadSciFact(t)
}

// TestSciFact measures the default pipeline on the SciFact training split:
// go test ./experiments/retrieval -run TestSciFact -v
func TestSciFact(t *testing.T) {
	ds := loadSciFact(t)
	ctx := context.Background()
	cfg := DefaultConfig()
	t0 := time.Now()
	p, err := Build(ctx, ds, cfg)
	require.NoError(t, err)
	res, err := p.Run(ctx, ds, cfg.Fusion)
	require.NoError(t, err)
	t.Logf("SciFact train (%d queries, %d docs) in %v\n%s", res.BM25.Queries, len(ds.Corpus), time.Since(t0), FormatResults([]Result{res}))
	t.Logf("timings: %v", res.Timings)
	// Regression guards (measured BM25 0.7061 / 0.9326, vector 0.5983,
	// hybrid 0.7195 / 0.9545 with the contrastively fine-tuned builtin
	// model; the pipeline is deterministic up to float order across CPUs).
	require.GreaterOrEqual(t, res.BM25.NDCG10, 0.70)
	require.GreaterOrEqual(t, res.BM25.Recall100, 0.925)
	require.GreaterOrEqual(t, res.Vector.NDCG10, 0.58)
	require.GreaterOrEqual(t, res.Hybrid.NDCG10, res.BM25.NDCG10+0.008)
	require.GreaterOrEqual(t, res.Hybrid.Recall100, 0.95)
}
