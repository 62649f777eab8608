package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// A builtin model fuses with the preset measured for its kind: the
// fine-tuned one, or plain LSA's (a model stored before fine-tuning, or
// BMCIS_BUILTIN_CONTRASTIVE_EPOCHS=0); a configured field still wins.
func TestFusionPresetFollowsTheActiveModel(t *testing.T) {
	topics := [][2]string{{"heart cardiology", "artery stent statin ventricle"}, {"brain neurology", "neuron synapse cortex axon"}}
	var texts []string
	for i := 0; i < 20; i++ {
		for _, tp := range topics {
			texts = append(texts, fmt.Sprintf("%s review %d\nThe %s in patients. The %s again in trials. Results %d were clear.", tp[0], i, tp[1], tp[1], i))
		}
	}
	train := func(epochs int) *embed.Builtin {
		cfg := embed.DefaultBuiltinConfig()
		cfg.Dims = 4
		cfg.Contrastive.Epochs = epochs
		m, err := embed.TrainBuiltin(context.Background(), analysis.NewEnglish(), texts, cfg)
		require.NoError(t, err)
		return m
	}
	tuned, plain := train(2), train(0)
	require.True(t, tuned.FineTuned())
	require.False(t, plain.FineTuned())

	var cfg Config
	require.Equal(t, fusion.BuiltinOptions(), cfg.fusionFor(embedding.ProviderBuiltin, &embedding.Active{Builtin: tuned}))
	require.Equal(t, fusion.BuiltinLSAOptions(), cfg.fusionFor(embedding.ProviderBuiltin, &embedding.Active{Builtin: plain}))
	require.Equal(t, fusion.BuiltinOptions(), cfg.fusionFor(embedding.ProviderBuiltin, nil), "no model yet: the default training's preset")
	require.Equal(t, fusion.DefaultOptions(), cfg.fusionFor("openai", nil))
	require.NotEqual(t, fusion.BuiltinOptions().Alpha, fusion.BuiltinLSAOptions().Alpha)

	cfg.Fusion.Alpha = 0.9
	require.Equal(t, 0.9, cfg.fusionFor(embedding.ProviderBuiltin, &embedding.Active{Builtin: plain}).Alpha)
}
