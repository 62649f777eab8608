// Package benchutil measures the REST gateway's overhead over direct gRPC:
// the paths are timed in rotation against the same service, so drift on a
// shared machine hits them alike. Only tests and benchmarks import it.
package benchutil

import (
	"sort"
	"testing"
	"time"
)

// Path is one way to make the call under test.
type Path struct {
	Name string
	Call func() error
}

// Result holds each path's latency samples, in the order the paths were given.
type Result struct {
	Names   []string
	Samples [][]time.Duration
}

// Quantile returns the q-quantile of samples (nearest rank).
func Quantile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// P50 returns the median of the named path.
func (r Result) P50(name string) time.Duration { return r.Q(name, .5) }

// Q returns the q-quantile of the named path.
func (r Result) Q(name string, q float64) time.Duration {
	for i, n := range r.Names {
		if n == name {
			return Quantile(r.Samples[i], q)
		}
	}
	return 0
}

// Measure runs warmup rounds, then n rounds in which every path is called
// once, starting with a different path each round.
func Measure(tb testing.TB, warmup, n int, paths ...Path) Result {
	tb.Helper()
	for i := 0; i < warmup; i++ {
		for _, p := range paths {
			if err := p.Call(); err != nil {
				tb.Fatalf("%s warmup: %v", p.Name, err)
			}
		}
	}
	res := Result{Samples: make([][]time.Duration, len(paths))}
	for _, p := range paths {
		res.Names = append(res.Names, p.Name)
	}
	for i := 0; i < n; i++ {
		for j := range paths {
			k := (i + j) % len(paths)
			start := time.Now()
			if err := paths[k].Call(); err != nil {
				tb.Fatalf("%s: %v", paths[k].Name, err)
			}
			res.Samples[k] = append(res.Samples[k], time.Since(start))
		}
	}
	return res
}

// Report adds each path's p50 and p95, and each path's p50 overhead over the
// first path, to a benchmark's output.
func Report(b *testing.B, r Result) {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	for i, n := range r.Names {
		b.ReportMetric(us(Quantile(r.Samples[i], .5)), n+"-p50-µs")
		b.ReportMetric(us(Quantile(r.Samples[i], .95)), n+"-p95-µs")
	}
	for _, n := range r.Names[1:] {
		b.ReportMetric(us(r.P50(n)-r.P50(r.Names[0])), n+"-overhead-p50-µs")
	}
}
