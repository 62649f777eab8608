// Package vecmath is the vector arithmetic of the query path: one dot
// product, through gonum's assembly kernel (about 2.4× the unrolled Go
// loop at 256 dimensions, measured in hnsw's benchmarks). Training keeps
// embed.Dot, whose rounding its stored models were built with.
package vecmath

import "gonum.org/v1/gonum/blas/blas32"

// Dot is the dot product of a and b over the shorter one's length.
func Dot(a, b []float32) float32 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	return blas32.Dot(blas32.Vector{N: n, Data: a, Inc: 1}, blas32.Vector{N: n, Data: b, Inc: 1})
}
