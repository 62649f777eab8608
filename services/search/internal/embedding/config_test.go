package embedding

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/services/search/internal/embed"
)

// The builtin model fine-tunes contrastively by default;
// BMCIS_BUILTIN_CONTRASTIVE_EPOCHS=0 switches back to plain LSA, and a bad
// value is refused.
func TestLoadConfigContrastiveEpochs(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int
		bad  bool
	}{
		{env: map[string]string{}, want: embed.DefaultContrastiveConfig().Epochs},
		{env: map[string]string{"BMCIS_BUILTIN_CONTRASTIVE_EPOCHS": "0"}, want: 0},
		{env: map[string]string{"BMCIS_BUILTIN_CONTRASTIVE_EPOCHS": "2"}, want: 2},
		{env: map[string]string{"BMCIS_BUILTIN_CONTRASTIVE_EPOCHS": "-1"}, bad: true},
	} {
		env := config.FromMap(tc.env)
		c := LoadConfig(env)
		if tc.bad {
			require.ErrorContains(t, env.Err(), "BMCIS_BUILTIN_CONTRASTIVE_EPOCHS")
			continue
		}
		require.NoError(t, env.Err())
		require.Equal(t, tc.want, c.Builtin.Contrastive.Epochs)
		require.Equal(t, 256, c.Builtin.Dims)
	}
	require.Positive(t, DefaultConfig().Builtin.Contrastive.Epochs)
}
