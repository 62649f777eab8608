//go:build !amd64

package hnsw

import "unsafe"

// No kernels here: the flags exist so tests can name them on every
// architecture.
var haveSSE41, haveAVX2 = false, false

func dotInt8(a, b []int8) int32 { return dotInt8Go(a, b) }

// dotsInt8 sets out[i] to the dot product of q and node nodes[i]'s code.
func dotsInt8(q, codes []int8, dims int, nodes []int32, out []int32) {
	dotsInt8Go(q, codes, dims, nodes, out)
}

// prefetch has no instruction here: the walk fetches as it reads.
func prefetch(unsafe.Pointer, uintptr, int, []int32) {}

func prefetchVector([]float32) {}
