package hnsw

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func dotInt8SSE41(a, b *int8, n int) int32

//go:noescape
func dotInt8AVX2(a, b *int8, n int) int32

//go:noescape
func dotsInt8AVX2(q, base *int8, stride uintptr, n int, nodes []int32, out *int32)

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

// dotsInt8 sets out[i] to the dot product of q and node nodes[i]'s code,
// dims long at codes[nodes[i]*dims:]: with AVX2, one call for a walk's
// batch (dotsInt8AVX2), the codes' loads overlapping; else dotInt8 by node.
// The integer sums are exact, so either way gives dotInt8's values.
func dotsInt8(q, codes []int8, dims int, nodes []int32, out []int32) {
	out = out[:len(nodes)]
	q = q[:dims]
	if len(nodes) == 0 {
		return
	}
	if !haveAVX2 || dims < 32 || !codesHold(codes, dims, nodes) {
		dotsInt8Go(q, codes, dims, nodes, out)
		return
	}
	n := dims &^ 31
	dotsInt8AVX2(&q[0], &codes[0], uintptr(dims), n, nodes, &out[0])
	if n < dims {
		for i, o := range nodes {
			at := int(o) * dims
			out[i] += dotInt8Go(q[n:], codes[at+n:at+dims])
		}
	}
}

// codesHold reports whether codes holds every node's code: the kernel
// reads without bounds checks (dotsInt8Go then panics as Go does).
func codesHold(codes []int8, dims int, nodes []int32) bool {
	lo, hi := int32(0), int32(-1)
	for _, o := range nodes {
		lo, hi = min(lo, o), max(hi, o)
	}
	return lo >= 0 && (int(hi)+1)*dims <= len(codes)
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
