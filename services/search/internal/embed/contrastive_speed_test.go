package embed_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
)

// TestSciFactContrastiveSpeed times LSA training and fine-tuning alone on
// SciFact's chunk texts (BMCIS_EVAL_ICT=speed).
func TestSciFactContrastiveSpeed(t *testing.T) {
	dir := os.Getenv("BMCIS_SCIFACT_DIR")
	if os.Getenv("BMCIS_EVAL_ICT") != "speed" || dir == "" {
		t.Skip("set BMCIS_EVAL_ICT=speed and BMCIS_SCIFACT_DIR")
	}
	ds, err := eval.LoadBEIR(dir, "train")
	require.NoError(t, err)
	var texts []string
	for _, d := range ds.Corpus {
		texts = append(texts, analysis.IndexedText(d.Title, d.Text))
	}
	ctx := context.Background()
	c := embed.DefaultBuiltinConfig()
	ft := c.Contrastive
	c.Contrastive = embed.ContrastiveConfig{}
	t0 := time.Now()
	lsa, err := embed.TrainBuiltin(ctx, analysis.NewEnglish(), texts, c)
	require.NoError(t, err)
	t.Logf("lsa %d texts: %.1fs", len(texts), time.Since(t0).Seconds())
	ft.Epochs = 1
	t0 = time.Now()
	_, err = embed.FineTuneContrastive(ctx, lsa, texts, ft)
	require.NoError(t, err)
	t.Logf("fine-tune 1 epoch: %.1fs", time.Since(t0).Seconds())
}
