package embedding

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embed"
)

// terms is an indexed vocabulary for Assess.
type terms struct {
	df     map[string]int
	chunks int
}

func (s terms) EachTerm(fn func(string, int)) {
	for t, df := range s.df {
		fn(t, df)
	}
}

func (s terms) LiveChunks() int { return s.chunks }

func TestRetrainRule(t *testing.T) {
	an := analysis.NewEnglish()
	var texts []string
	for i := 0; i < 10; i++ {
		words := "alpha beta"
		if i%2 == 1 {
			words = "gamma delta"
		}
		texts = append(texts, fmt.Sprintf("%s doc%d", words, i%5))
	}
	b, err := embed.TrainBuiltin(context.Background(), an, texts, embed.BuiltinConfig{Dims: 4})
	require.NoError(t, err)
	require.Equal(t, 10, b.TrainedOn())
	// Each in half the chunks: the model's vocabulary (df 2 .. 50 %).
	known := map[string]int{"alpha": 5, "beta": 5, "gamma": 5, "delta": 5}

	cases := []struct {
		name     string
		df       map[string]int
		chunks   int
		growth   float64
		coverage float64
		maxTrain int
		pending  bool
		cov      float64
	}{
		{"same corpus", known, 10, 2, 0.8, 0, false, 1},
		{"grown x2", known, 20, 2, 0.8, 0, true, 1},
		{"grown x1.9", known, 19, 2, 0.8, 0, false, 1},
		{"sample at the cap does not grow", known, 1000, 2, 0.8, 10, false, 1},
		{"growth rule off", known, 1000, 0, 0.8, 0, false, 1},
		// Two of five learnable terms (df >= 2*MinDF = 4) unknown: 60 %.
		{"new words", map[string]int{"alpha": 4, "beta": 4, "gamma": 4, "kinase": 4, "enzyme": 5}, 10, 2, 0.8, 0, true, 0.6},
		// Terms in too few chunks for a retrain to learn, or in more than
		// half of them, do not count.
		{"unlearnable terms ignored", map[string]int{"alpha": 4, "beta": 4, "rare": 3, "everywhere": 9}, 10, 2, 0.8, 0, false, 1},
		// Beyond the sample cap (10) the bar scales: 100 chunks, sample 10,
		// so a term needs df >= 4*100/10 = 40 to count.
		{"sampled corpus", map[string]int{"alpha": 40, "kinase": 39}, 100, 2, 0.8, 10, false, 1},
		{"coverage rule off", map[string]int{"kinase": 4, "enzyme": 4}, 10, 2, 0, 0, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RetrainGrowth, cfg.RetrainCoverage = tc.growth, tc.coverage
			if tc.maxTrain > 0 {
				cfg.Builtin.MaxTrainDocs = tc.maxTrain
			}
			m := &Manager{cfg: cfg}
			m.cur.Store(&Active{Row: 7, Provider: ProviderBuiltin, Builtin: b})
			f := m.Assess(terms{df: tc.df, chunks: tc.chunks})
			require.Equal(t, tc.pending, f.Pending, f.Reason)
			require.InDelta(t, tc.cov, f.Coverage, 1e-9)
			require.Equal(t, tc.pending, f.Reason != "")
			require.EqualValues(t, 7, f.ModelRow)
		})
	}

	t.Run("no model, remote model", func(t *testing.T) {
		m := &Manager{cfg: DefaultConfig()}
		require.False(t, m.Assess(terms{df: known, chunks: 100}).Pending)
		m.cur.Store(&Active{Row: 1, Provider: ProviderOpenAI})
		f := m.Assess(terms{df: map[string]int{"kinase": 3}, chunks: 100})
		require.False(t, f.Pending)
		require.InDelta(t, 1, f.Coverage, 1e-9)
	})
}
