package hnsw

import "golang.org/x/sys/cpu"

//go:noescape
func dotInt8SSE41(a, b *int8, n int) int32

var haveSSE41 = cpu.X86.HasSSE41

// dotInt8 is the dot product of two codes of one length: SSE4.1 over
// the multiple of 16, Go over the rest.
func dotInt8(a, b []int8) int32 {
	b = b[:len(a)]
	n := len(a) &^ 15
	if !haveSSE41 || n == 0 {
		return dotInt8Go(a, b)
	}
	return dotInt8SSE41(&a[0], &b[0], n) + dotInt8Go(a[n:], b[n:])
}
