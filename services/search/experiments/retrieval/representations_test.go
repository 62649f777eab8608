package retrieval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/experiments/retrieval"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestSciFactRepresentations measures the representations that were tried
// instead of LSA (random indexing, PPMI/SVD word vectors with SIF pooling,
// more LSA dimensions) with the shipped hybrid (feedback + convex) and
// with RRF k=5 0.15:
//
//	BMCIS_EVAL_REPR=1 BMCIS_SCIFACT_DIR=... go test ./experiments/retrieval -run TestSciFactRepresentations -v -timeout 30m
func TestSciFactRepresentations(t *testing.T) {
	dir := os.Getenv("BMCIS_SCIFACT_DIR")
	if os.Getenv("BMCIS_EVAL_REPR") == "" || dir == "" {
		t.Skip("set BMCIS_EVAL_REPR=1 and BMCIS_SCIFACT_DIR")
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Skip(err)
	}
	ds, err := eval.LoadBEIR(dir, "train")
	require.NoError(t, err)
	ctx := context.Background()
	variants := []struct {
		name  string
		train func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error)
	}{
		{"random indexing 256 nnz 8", func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			return embed.ExperimentRandomIndexing(ctx, a, texts, 256, 8)
		}},
		{"random indexing 1024 nnz 8", func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			return embed.ExperimentRandomIndexing(ctx, a, texts, 1024, 8)
		}},
		{"ppmi-svd 256 window 5 + sif", func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			return embed.ExperimentPPMISIF(ctx, a, texts, 256, 5, 1e-3)
		}},
		{"lsa 512", func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			c := embed.DefaultBuiltinConfig()
			c.Dims = 512
			return embed.TrainBuiltin(ctx, a, texts, c)
		}},
	}
	var rows []retrieval.Result
	for _, v := range variants {
		for _, f := range []retrieval.Fusion{
			{Method: "preset", RRF: fusion.BuiltinOptions()},
			{Method: "rrf", RRF: fusion.Options{K: 5, BM25Weight: 1, VectorWeight: 0.15}},
		} {
			cfg := retrieval.DefaultConfig()
			cfg.Train = v.train
			cfg.Fusion = f
			cfg.Name = fmt.Sprintf("%s / %s", v.name, f.Method)
			p, err := retrieval.Build(ctx, ds, cfg)
			require.NoError(t, err)
			res, err := p.Run(ctx, ds, f)
			require.NoError(t, err)
			res.Config = cfg.Name
			t.Logf("%s", retrieval.FormatResults([]retrieval.Result{res}))
			rows = append(rows, res)
		}
	}
	t.Logf("\n%s", retrieval.FormatResults(rows))
}

// TestSciFactQueryExpansion: each query term adds its nearest terms in the
// LSA term space as BM25 terms; the original terms count `orig` times, an
// expansion term once.
//
//	BMCIS_EVAL_REPR=1 BMCIS_SCIFACT_DIR=... go test ./experiments/retrieval -run TestSciFactQueryExpansion -v
func TestSciFactQueryExpansion(t *testing.T) {
	dir := os.Getenv("BMCIS_SCIFACT_DIR")
	if os.Getenv("BMCIS_EVAL_REPR") == "" || dir == "" {
		t.Skip("set BMCIS_EVAL_REPR=1 and BMCIS_SCIFACT_DIR")
	}
	ds, err := eval.LoadBEIR(dir, "train")
	require.NoError(t, err)
	ctx := context.Background()
	p, err := retrieval.Build(ctx, ds, retrieval.DefaultConfig())
	require.NoError(t, err)
	nearest := embed.ExperimentNeighbours(p.Model())
	an := p.Model().Analyzer()
	// The 3 nearest terms with cosine >= 0.5 of each query term, once.
	type nb struct {
		terms []string
		cos   []float32
	}
	memo := map[string]nb{}
	for _, q := range ds.Queries {
		for _, term := range an.Terms(q.Text) {
			if _, ok := memo[term]; !ok {
				ts, cs := nearest(term, 3, 0.5)
				memo[term] = nb{ts, cs}
			}
		}
	}
	near := func(term string, n int, minCos float32) []string {
		var out []string
		e := memo[term]
		for i := range e.terms {
			if i < n && e.cos[i] >= minCos {
				out = append(out, e.terms[i])
			}
		}
		return out
	}
	for _, orig := range []int{2, 4} {
		for _, n := range []int{1, 2, 3} {
			for _, minCos := range []float32{0.5, 0.7} {
				run := eval.Run{}
				for _, q := range ds.Queries {
					var terms []string
					for _, term := range an.Terms(q.Text) {
						for r := 0; r < orig; r++ {
							terms = append(terms, term)
						}
						terms = append(terms, near(term, n, minCos)...)
					}
					var docs []string
					for _, h := range p.Index().Search(terms, bm25.SearchOptions{K: 100}) {
						docs = append(docs, p.DocOf(h.ChunkID))
					}
					run[q.ID] = docs
				}
				m := eval.Evaluate(run, ds.Qrels)
				t.Logf("expansion orig x%d, %d neighbours, cos >= %.1f: %.4f / %.4f", orig, n, minCos, m.NDCG10, m.Recall100)
			}
		}
	}
}
