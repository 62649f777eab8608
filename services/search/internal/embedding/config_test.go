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

// The builtin model gets 4-gram rows by default; BMCIS_BUILTIN_SUBWORD_N
// picks another length or 0 for none, and refuses what cannot be one.
func TestLoadConfigSubwords(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		bad   bool
	}{
		{value: "", want: embed.DefaultContrastiveConfig().Subwords.N},
		{value: "0", want: 0},
		{value: "3", want: 3},
		{value: "1", bad: true},
		{value: "9", bad: true},
		{value: "four", bad: true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			vars := map[string]string{}
			if tc.value != "" {
				vars["BMCIS_BUILTIN_SUBWORD_N"] = tc.value
			}
			env := config.FromMap(vars)
			c := LoadConfig(env)
			if tc.bad {
				require.ErrorContains(t, env.Err(), "BMCIS_BUILTIN_SUBWORD_N")
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, tc.want, c.Builtin.Contrastive.Subwords.N)
		})
	}
	require.Equal(t, 4, DefaultConfig().Builtin.Contrastive.Subwords.N)
}
