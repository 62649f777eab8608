package vecmath

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDot(t *testing.T) {
	require.Equal(t, float32(0), Dot(nil, []float32{1}))
	require.Equal(t, float32(11), Dot([]float32{1, 2}, []float32{3, 4, 5}))
	a := make([]float32, 37)
	b := make([]float32, 37)
	var want float32
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i+1)
		want += a[i] * b[i]
	}
	require.InDelta(t, want, Dot(a, b), 1e-3)
}

var sink float32

func BenchmarkDot256(b *testing.B) {
	x, y := make([]float32, 256), make([]float32, 256)
	for i := range x {
		x[i], y[i] = float32(i%7)/7, float32(i%5)/5
	}
	for b.Loop() {
		sink += Dot(x, y)
	}
}
