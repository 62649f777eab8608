package retrieval

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/stretchr/testify/require"
)

// TestSciFactSweep is the parameter search behind the defaults. It takes
// several minutes, so it only runs with BMCIS_EVAL_SWEEP set to a group:
// "bm25", "analysis", "embed", "fusion" or "all".
//
//	BMCIS_EVAL_SWEEP=bm25 go test ./experiments/retrieval -run TestSciFactSweep -v -timeout 30m
func TestSciFactSweep(t *testing.T) {
	group := os.Getenv("BMCIS_EVAL_SWEEP")
	if group == "" {
		t.Skip("set BMCIS_EVAL_SWEEP=bm25|analysis|embed|fusion|all to run the sweep")
	}
	ds := loadSciFact(t)
	ctx := context.Background()
	want := func(g string) bool { return group == "all" || group == g }
	var results []Result
	run := func(cfg Config, p *Pipeline) {
		res, err := p.Run(ctx, ds, cfg.Fusion)
		require.NoError(t, err)
		res.Config = cfg.Name
		results = append(results, res)
		t.Logf("%s", FormatResults([]Result{res}))
	}
	build := func(cfg Config) *Pipeline {
		p, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		return p
	}
	bmOnly := func(name string) Config {
		c := DefaultConfig()
		c.Name = name
		c.Embed = embed.BuiltinConfig{}
		return c
	}

	if want("bm25") {
		cfg := bmOnly("")
		p := build(cfg)
		for _, k1 := range []float64{0.6, 0.9, 1.2, 1.5, 2.0} {
			for _, b := range []float64{0.4, 0.6, 0.75, 0.9} {
				cfg.Name = fmt.Sprintf("bm25 k1=%.1f b=%.2f", k1, b)
				p.Index().SetParams(bm25.Params{K1: k1, B: b})
				run(cfg, p)
			}
		}
	}
	if want("analysis") {
		variants := []struct {
			name string
			mod  func(*Config)
		}{
			{"title in chunk (default)", func(c *Config) {}},
			{"no title", func(c *Config) { c.HeaderInText = false }},
			{"stop=snowball", func(c *Config) { c.Analyzer.Stop = analysis.StopSnowball }},
			{"stop=none", func(c *Config) { c.Analyzer.Stop = analysis.StopNone }},
			{"hyphen join", func(c *Config) { c.Analyzer.JoinHyphenated = true }},
			{"no stemming", func(c *Config) { c.Analyzer.NoStem = true }},
			{"chunk 256/25", func(c *Config) { c.Chunk = chunker.Options{TargetTokens: 256, OverlapTokens: 25} }},
			{"chunk 1024/50", func(c *Config) { c.Chunk = chunker.Options{TargetTokens: 1024, OverlapTokens: 50} }},
		}
		for _, v := range variants {
			cfg := bmOnly(v.name)
			v.mod(&cfg)
			run(cfg, build(cfg))
		}
	}
	if want("embed") {
		fusions := []Fusion{
			{RRF: fusion.Options{K: 60, BM25Weight: 1, VectorWeight: 1}},
			{RRF: fusion.Options{K: 60, BM25Weight: 1, VectorWeight: 0.3}},
			{RRF: fusion.Options{K: 10, BM25Weight: 1, VectorWeight: 0.2}},
			{RRF: fusion.Options{K: 5, BM25Weight: 1, VectorWeight: 0.15}},
			{Method: "convex", Alpha: 0.8},
			{Method: "convex", Alpha: 0.9},
		}
		fname := func(f Fusion) string {
			if f.Method == "convex" {
				return fmt.Sprintf("convex a=%.2f", f.Alpha)
			}
			return fmt.Sprintf("rrf k=%.0f vw=%.2f", f.RRF.K, f.RRF.VectorWeight)
		}
		for _, wt := range []embed.Weighting{embed.WeightTFIDF, embed.WeightLogEntropy} {
			for _, dims := range []int{256, 512} {
				cfg := DefaultConfig()
				cfg.Embed.Dims = dims
				cfg.Embed.Weighting = wt
				p := build(cfg)
				for _, f := range fusions {
					cfg.Fusion = f
					cfg.Name = fmt.Sprintf("w=%d d=%d %s", wt, dims, fname(f))
					run(cfg, p)
				}
			}
		}
	}
	if want("fusion") {
		cfg := DefaultConfig()
		p := build(cfg)
		for _, k := range []float64{5, 10, 20, 60} {
			for _, w := range []float64{1, 0.5, 0.3, 0.2, 0.15, 0.1} {
				cfg.Fusion = Fusion{RRF: fusion.Options{K: k, BM25Weight: 1, VectorWeight: w}}
				cfg.Name = fmt.Sprintf("rrf k=%.0f vw=%.2f", k, w)
				run(cfg, p)
			}
		}
		for _, a := range []float64{0.5, 0.6, 0.7, 0.8, 0.9} {
			cfg.Fusion = Fusion{Method: "convex", Alpha: a}
			cfg.Name = fmt.Sprintf("convex alpha=%.2f", a)
			run(cfg, p)
		}
	}
	t.Logf("sweep %q\n%s", group, FormatResults(results))
}
