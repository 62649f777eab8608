package retrieval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
	"github.com/bmcis/knowledge/services/search/experiments/retrieval"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestSciFactContrastive measures LSA fine-tuned with InfoNCE on structure
// pairs (inverse cloze, title <-> body, neighbouring chunks): vector alone
// and the shipped hybrid (feedback + convex) at a few BM25 shares.
//
//	BMCIS_EVAL_ICT=1 BMCIS_SCIFACT_DIR=... go test ./experiments/retrieval -run TestSciFactContrastive -v -timeout 60m
//
// BMCIS_EVAL_ICT_ONLY=<substring> runs the variants whose name contains it.
func TestSciFactContrastive(t *testing.T) {
	ds := sciFactFor(t, "1")
	ctx := context.Background()

	var once sync.Once
	var lsa *embed.Builtin
	var lsaErr error
	base := func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
		once.Do(func() {
			c := embed.DefaultBuiltinConfig()
			c.Contrastive = embed.ContrastiveConfig{} // plain LSA, fine-tuned per variant below
			lsa, lsaErr = embed.TrainBuiltin(ctx, a, texts, c)
		})
		return lsa, lsaErr
	}
	// The plain-LSA default before this work (feedback 3:2, BM25 share
	// 0.7): every row's hybrid is compared with it query by query.
	baseCfg := retrieval.DefaultConfig()
	baseCfg.Train = base
	baseOpts := fusion.BuiltinOptions()
	baseOpts.Alpha, baseOpts.FeedbackChunks, baseOpts.FeedbackWeight = 0.7, 3, 2
	baseCfg.Fusion = retrieval.Fusion{Method: "preset", RRF: baseOpts}
	bp, err := retrieval.Build(ctx, ds, baseCfg)
	require.NoError(t, err)
	baseRes, err := bp.Run(ctx, ds, baseCfg.Fusion)
	require.NoError(t, err)
	t.Logf("baseline (plain LSA, fb 3:2, share 0.7): hybrid %.4f / %.4f", baseRes.Hybrid.NDCG10, baseRes.Hybrid.Recall100)

	// The shipped default (DefaultContrastiveConfig, BuiltinOptions):
	// every row is also compared with it query by query.
	shipCfg := retrieval.DefaultConfig()
	shipCfg.Train = func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
		m, err := base(ctx, a, texts)
		if err != nil {
			return nil, err
		}
		return embed.FineTuneContrastive(ctx, m, texts, embed.DefaultContrastiveConfig())
	}
	shipCfg.Fusion = retrieval.Fusion{Method: "preset", RRF: fusion.BuiltinOptions()}
	sp, err := retrieval.Build(ctx, ds, shipCfg)
	require.NoError(t, err)
	shipRes, err := sp.Run(ctx, ds, shipCfg.Fusion)
	require.NoError(t, err)
	t.Logf("shipped (default fine-tuning, BuiltinOptions): hybrid %.4f / %.4f", shipRes.Hybrid.NDCG10, shipRes.Hybrid.Recall100)

	// The first sweep's base (NOTES.md): 3 epochs, temperature 0.05; the
	// "default" variant below is the shipped DefaultContrastiveConfig.
	def := embed.ContrastiveConfig{Epochs: 3, BatchSize: 256, LearningRate: 0.05, Temperature: 0.05,
		Cloze: true, Title: true, Neighbours: true, ClozeKeep: 0.1, Seed: 1}
	type variant struct {
		name string
		mod  func(c *embed.ContrastiveConfig)
	}
	variants := []variant{
		{"lsa (no fine-tuning)", func(c *embed.ContrastiveConfig) { c.Epochs = 0 }},
		{"first sweep base (3 epochs, temp 0.05)", nil},
		{"default", func(c *embed.ContrastiveConfig) { *c = embed.DefaultContrastiveConfig() }},
	}
	// The variants measured in NOTES.md, by name (BMCIS_EVAL_ICT_EXTRA).
	var extra = map[string]func(c *embed.ContrastiveConfig){
		"cloze only":          func(c *embed.ContrastiveConfig) { c.Title, c.Neighbours = false, false },
		"title only":          func(c *embed.ContrastiveConfig) { c.Cloze, c.Neighbours = false, false },
		"epochs 6":            func(c *embed.ContrastiveConfig) { c.Epochs = 6 },
		"lr 0.1":              func(c *embed.ContrastiveConfig) { c.LearningRate = 0.1 },
		"temp 0.1":            func(c *embed.ContrastiveConfig) { c.Temperature = 0.1 },
		"temp 0.2":            func(c *embed.ContrastiveConfig) { c.Temperature = 0.2 },
		"temp 0.3":            func(c *embed.ContrastiveConfig) { c.Temperature = 0.3 },
		"temp 0.1 clustered":  func(c *embed.ContrastiveConfig) { c.Temperature, c.ClusterBatches = 0.1, true },
		"temp 0.2 clustered":  func(c *embed.ContrastiveConfig) { c.Temperature, c.ClusterBatches = 0.2, true },
		"temp 0.5":            func(c *embed.ContrastiveConfig) { c.Temperature = 0.5 },
		"temp 0.3 lr 0.1":     func(c *embed.ContrastiveConfig) { c.Temperature, c.LearningRate = 0.3, 0.1 },
		"temp 0.3 epochs 1":   func(c *embed.ContrastiveConfig) { c.Temperature, c.Epochs = 0.3, 1 },
		"temp 0.3 cloze only": func(c *embed.ContrastiveConfig) { c.Temperature, c.Title, c.Neighbours = 0.3, false, false },
		"temp 0.3 title only": func(c *embed.ContrastiveConfig) { c.Temperature, c.Cloze, c.Neighbours = 0.3, false, false },
	}
	// Variations of the shipped default.
	for name, mod := range map[string]func(c *embed.ContrastiveConfig){
		"default batch 128":    func(c *embed.ContrastiveConfig) { c.BatchSize = 128 },
		"default no subwords":  func(c *embed.ContrastiveConfig) { c.Subwords = embed.SubwordConfig{} },
		"default sub3 50k 1.5": func(c *embed.ContrastiveConfig) { c.Subwords = embed.SubwordConfig{N: 3, Max: 50_000, Scale: 1.5} },
		"default sub4 50k 1.5": func(c *embed.ContrastiveConfig) { c.Subwords = embed.SubwordConfig{N: 4, Max: 50_000, Scale: 1.5} },
		"default sub4 50k 3":   func(c *embed.ContrastiveConfig) { c.Subwords = embed.SubwordConfig{N: 4, Max: 50_000, Scale: 3} },
		"default sub5 50k 2":   func(c *embed.ContrastiveConfig) { c.Subwords = embed.SubwordConfig{N: 5, Max: 50_000, Scale: 2} },
		"default sub4 20k 2":   func(c *embed.ContrastiveConfig) { c.Subwords.Max = 20_000 },
		"default sub4 30k 2":   func(c *embed.ContrastiveConfig) { c.Subwords.Max = 30_000 },
		"default temp 0.2":     func(c *embed.ContrastiveConfig) { c.Temperature = 0.2 },
		"default keep 0":       func(c *embed.ContrastiveConfig) { c.ClozeKeep = 0 },
		"default anchor 1":     func(c *embed.ContrastiveConfig) { c.Anchor = 1 },
		"default epochs 8":     func(c *embed.ContrastiveConfig) { c.Epochs = 8 },
		"default batch 512":    func(c *embed.ContrastiveConfig) { c.BatchSize = 512 },
		"default epochs 10":    func(c *embed.ContrastiveConfig) { c.Epochs = 10 },
		"default epochs 12":    func(c *embed.ContrastiveConfig) { c.Epochs = 12 },
		"default epochs 15":    func(c *embed.ContrastiveConfig) { c.Epochs = 15 },
		"default epochs 20":    func(c *embed.ContrastiveConfig) { c.Epochs = 20 },
		"default pairs 24k":    func(c *embed.ContrastiveConfig) { c.MaxPairs = 24_000 },
		"default pairs 48k":    func(c *embed.ContrastiveConfig) { c.MaxPairs = 48_000 },
	} {
		extra[name] = func(c *embed.ContrastiveConfig) { *c = embed.DefaultContrastiveConfig(); mod(c) }
	}
	for _, name := range strings.Split(os.Getenv("BMCIS_EVAL_ICT_EXTRA"), ",") {
		if mod, ok := extra[strings.TrimSpace(name)]; ok {
			variants = append(variants, variant{strings.TrimSpace(name), mod})
		}
	}
	only := os.Getenv("BMCIS_EVAL_ICT_ONLY")
	// BMCIS_EVAL_ICT_ALPHA=0.55,0.6,... replaces the BM25 shares tried.
	alphas, err := retrieval.EnvList("BMCIS_EVAL_ICT_ALPHA", []float64{0.5, 0.6, 0.7, 0.8})
	require.NoError(t, err)
	var rows []retrieval.Result
	// BMCIS_EVAL_ICT_SEEDS=1,2,3: every variant once per training seed
	// (overriding the variant's own), then the mean over seeds per fusion
	// setting (one seed's figure varies by about 0.002 nDCG@10: NOTES.md,
	// "Third round").
	seeds, err := retrieval.EnvList("BMCIS_EVAL_ICT_SEEDS", []uint64{0})
	require.NoError(t, err)
	var seeded []variant
	for _, v := range variants {
		for _, sd := range seeds {
			name := v.name
			if sd != 0 {
				name = fmt.Sprintf("%s |seed %d", v.name, sd)
			}
			seeded = append(seeded, variant{name, func(c *embed.ContrastiveConfig) {
				if v.mod != nil {
					v.mod(c)
				}
				if sd != 0 {
					c.Seed = sd
				}
			}})
		}
	}
	type mean struct {
		n                  int
		vec, hyb, hybR, dd float64
	}
	means := map[string]*mean{}
	var order []string
	defer func() {
		var b strings.Builder
		for _, k := range order {
			a := means[k]
			n := float64(a.n)
			fmt.Fprintf(&b, "%-48s seeds %d  vector %.4f  hybrid %.4f / %.4f  hybrid - BM25 %+.4f\n", k, a.n, a.vec/n, a.hyb/n, a.hybR/n, a.dd/n)
		}
		t.Logf("means over seeds:\n%s", b.String())
	}()
	for _, v := range seeded {
		if only != "" && !strings.Contains(v.name, only) {
			continue
		}
		c := def
		if v.mod != nil {
			v.mod(&c)
		}
		var trainTime time.Duration
		c.Progress = func(epoch int, loss float64) { t.Logf("%s: epoch %d loss %.4f", v.name, epoch, loss) }
		cfg := retrieval.DefaultConfig()
		cfg.Train = func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			m, err := base(ctx, a, texts)
			if err != nil {
				return nil, err
			}
			t0 := time.Now()
			defer func() { trainTime = time.Since(t0) }()
			return embed.FineTuneContrastive(ctx, m, texts, c)
		}
		// Feedback variants "chunks:weight" reuse the fine-tuned model.
		var tuned *embed.Builtin
		train := cfg.Train
		cfg.Train = func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
			if tuned != nil {
				return tuned, nil
			}
			m, err := train(ctx, a, texts)
			tuned = m
			return m, err
		}
		fbs := strings.Split(os.Getenv("BMCIS_EVAL_ICT_FB"), ",")
		for _, fb := range fbs {
			o := fusion.BuiltinOptions()
			if fb != "" {
				_, err := fmt.Sscanf(fb, "%d:%g", &o.FeedbackChunks, &o.FeedbackWeight)
				require.NoError(t, err)
			}
			cfg.Fusion = retrieval.Fusion{Method: "preset", RRF: o}
			p, err := retrieval.Build(ctx, ds, cfg)
			require.NoError(t, err)
			for _, alpha := range alphas {
				o.Alpha = alpha
				res, err := p.Run(ctx, ds, retrieval.Fusion{Method: "preset", RRF: o})
				require.NoError(t, err)
				res.Config = fmt.Sprintf("%s / fb %d:%g convex %.2f", v.name, o.FeedbackChunks, o.FeedbackWeight, alpha)
				rows = append(rows, res)
				key := fmt.Sprintf("%s / fb %d:%g convex %.2f", strings.Split(v.name, " |seed")[0], o.FeedbackChunks, o.FeedbackWeight, alpha)
				if means[key] == nil {
					means[key] = &mean{}
					order = append(order, key)
				}
				a := means[key]
				a.n++
				a.vec += res.Vector.NDCG10
				a.hyb += res.Hybrid.NDCG10
				a.hybR += res.Hybrid.Recall100
				d, se := eval.PairedNDCG10(res.HybridRun, baseRes.HybridRun, ds.Qrels)
				db, seb := eval.PairedNDCG10(res.HybridRun, res.BM25Run, ds.Qrels)
				dsh, ses := eval.PairedNDCG10(res.HybridRun, shipRes.HybridRun, ds.Qrels)
				a.dd += db
				t.Logf("fine-tune %.1fs; hybrid - baseline %+.4f (s.e. %.4f), hybrid - bm25 %+.4f (s.e. %.4f), hybrid - shipped %+.4f (s.e. %.4f)\n%s",
					trainTime.Seconds(), d, se, db, seb, dsh, ses, retrieval.FormatResults([]retrieval.Result{res}))
			}
		}
	}
	t.Logf("\n%s", retrieval.FormatResults(rows))
}

// sciFactFor loads SciFact's training split when BMCIS_EVAL_ICT is mode
// and BMCIS_SCIFACT_DIR holds it; otherwise the test is skipped.
func sciFactFor(t *testing.T, mode string) *eval.Dataset {
	t.Helper()
	dir := os.Getenv("BMCIS_SCIFACT_DIR")
	if os.Getenv("BMCIS_EVAL_ICT") != mode || dir == "" {
		t.Skipf("set BMCIS_EVAL_ICT=%s and BMCIS_SCIFACT_DIR", mode)
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Skip(err)
	}
	ds, err := eval.LoadBEIR(dir, "train")
	require.NoError(t, err)
	return ds
}

// TestSciFactContrastiveSpeed times LSA training and the default
// fine-tuning on SciFact's abstracts (BMCIS_EVAL_ICT=speed).
func TestSciFactContrastiveSpeed(t *testing.T) {
	ds := sciFactFor(t, "speed")
	var texts []string
	for _, d := range ds.Corpus {
		texts = append(texts, analysis.IndexedText(d.Title, d.Text))
	}
	timeTraining(t, "SciFact abstracts", texts)
}

// TestSyntheticContrastiveSpeed times training on the service's default
// sample size: 20,000 chunks of the synthetic corpus `bmcisctl bench`
// ingests (BMCIS_EVAL_ICT=speed; no data needed).
func TestSyntheticContrastiveSpeed(t *testing.T) {
	if os.Getenv("BMCIS_EVAL_ICT") != "speed" {
		t.Skip("set BMCIS_EVAL_ICT=speed")
	}
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	g := syntheticdocs.New(1, 50_000)
	var texts []string
	for i := 0; len(texts) < 20_000; i++ {
		d := g.Document(i)
		cs, err := ck.Split(t.Context(), chunker.Markdown, d.Title, string(d.Content))
		require.NoError(t, err)
		for _, c := range cs {
			texts = append(texts, analysis.IndexedText(c.ContextHeader, c.ChunkText))
		}
	}
	timeTraining(t, "synthetic chunks", texts[:20_000])
}

// timeTraining logs the time of plain LSA and of the default fine-tuning,
// or of each "epochs:maxPairs" in BMCIS_EVAL_ICT_SPEED (e.g. 6:12000,10:24000)
// on top of the default.
func timeTraining(t *testing.T, what string, texts []string) {
	ctx := context.Background()
	c := embed.DefaultBuiltinConfig()
	fts := []embed.ContrastiveConfig{c.Contrastive}
	if env := os.Getenv("BMCIS_EVAL_ICT_SPEED"); env != "" {
		fts = nil
		for _, f := range strings.Split(env, ",") {
			ft := embed.DefaultContrastiveConfig()
			_, err := fmt.Sscanf(f, "%d:%d", &ft.Epochs, &ft.MaxPairs)
			require.NoError(t, err)
			fts = append(fts, ft)
		}
	}
	c.Contrastive = embed.ContrastiveConfig{}
	t0 := time.Now()
	lsa, err := embed.TrainBuiltin(ctx, analysis.NewEnglish(), texts, c)
	require.NoError(t, err)
	t.Logf("lsa on %d %s: %.1fs, %d terms", len(texts), what, time.Since(t0).Seconds(), lsa.VocabSize())
	noSub := c.Contrastive
	if len(fts) == 1 {
		noSub = fts[0]
		noSub.Subwords = embed.SubwordConfig{}
		fts = append(fts, noSub)
	}
	for _, ft := range fts {
		t0 = time.Now()
		m, err := embed.FineTuneContrastive(ctx, lsa, texts, ft)
		require.NoError(t, err)
		n, rows := m.Subwords()
		t.Logf("fine-tune %d epochs of at most %d pairs, %d-gram rows %d: %.1fs", ft.Epochs, ft.MaxPairs, n, rows, time.Since(t0).Seconds())
		// Embedding is what every ingested chunk costs.
		t0 = time.Now()
		_, err = m.Embed(ctx, texts)
		require.NoError(t, err)
		el := time.Since(t0)
		t.Logf("  embedding the %d texts: %.1fs (%.0f texts/s)", len(texts), el.Seconds(), float64(len(texts))/el.Seconds())
	}
}
