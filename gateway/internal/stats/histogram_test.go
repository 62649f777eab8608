package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	h := hist{bounds: []float64{.001, .002, .005, .01}, cum: []float64{0, 50, 90, 100}, count: 100}
	require.InDelta(t, .0015, h.quantile(.25), 1e-9)
	require.InDelta(t, .002, h.quantile(.5), 1e-9)
	require.InDelta(t, .0075, h.quantile(.95), 1e-9)
	require.True(t, math.IsNaN(hist{}.quantile(.5)))
	over := hist{bounds: []float64{.001}, cum: []float64{1}, count: 10}
	require.Equal(t, .001, over.quantile(.99), "beyond the last bucket: its bound")
	d := h.sub(hist{bounds: h.bounds, cum: []float64{0, 50, 50, 50}, count: 50})
	require.Equal(t, 50.0, d.count)
	require.InDelta(t, .002+.003*(25.0/40.0), d.quantile(.5), 1e-9)
	// After a restart (counts went down) the new counts stand alone.
	require.Equal(t, 100.0, h.sub(hist{bounds: h.bounds, cum: []float64{0, 0, 0, 500}, count: 500}).count)
}
