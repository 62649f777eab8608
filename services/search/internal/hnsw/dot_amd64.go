package hnsw

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func dotInt8SSE41(a, b *int8, n int) int32

//go:noescape
func dotInt8AVX2(a, b *int8, n int) int32

var haveSSE41, haveAVX2 = cpu.X86.HasSSE41, cpu.X86.HasAVX2

// dotInt8 is the dot product of two codes of one length: AVX2 or SSE4.1
// over the multiple of 32 or 16, Go over the rest.
func dotInt8(a, b []int8) int32 {
	b = b[:len(a)]
	switch {
	case haveAVX2 && len(a) >= 32:
		n := len(a) &^ 31
		return dotInt8AVX2(&a[0], &b[0], n) + dotInt8Go(a[n:], b[n:])
	case haveSSE41 && len(a) >= 16:
		n := len(a) &^ 15
		return dotInt8SSE41(&a[0], &b[0], n) + dotInt8Go(a[n:], b[n:])
	}
	return dotInt8Go(a, b)
}

// prefetch asks the CPU to start fetching, for each node n, lines cache
// lines from base + n*stride; it does not wait for them.
//
//go:noescape
func prefetch(base unsafe.Pointer, stride uintptr, lines int, nodes []int32)

//go:noescape
func prefetchFrom(p unsafe.Pointer, lines int)

// prefetchVector asks the CPU to start fetching v (not empty).
func prefetchVector(v []float32) { prefetchFrom(unsafe.Pointer(&v[0]), (len(v)*4+63)/64) }
