package retrieval

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvList(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    []float64
		wantErr string
	}{
		{env: "", want: []float64{0.6}},
		{env: "0.55,0.6, 0.65", want: []float64{0.55, 0.6, 0.65}},
		{env: "1,x", wantErr: `BMCIS_TEST_LIST: "x" is not a number`},
	} {
		t.Setenv("BMCIS_TEST_LIST", tc.env)
		got, err := EnvList("BMCIS_TEST_LIST", []float64{0.6})
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	t.Setenv("BMCIS_TEST_LIST", "1,2,3")
	seeds, err := EnvList("BMCIS_TEST_LIST", []uint64{0})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, seeds)
}
