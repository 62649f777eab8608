//go:build !unix

package engine

// processCPU is not measured here: BenchmarkRankHybrid reports no cpu-ns/op.
func processCPU() (int64, bool) { return 0, false }
