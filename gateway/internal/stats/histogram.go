package stats

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// A Prometheus library that computes histogram_quantile exists only in
// github.com/prometheus/prometheus (promql.BucketQuantile), and importing it
// links the PromQL engine, tsdb and storage into this light binary (about
// 165 more packages and 9.7 MB for that one function, measured 2026-11-27 at
// v0.316.0) and would move the module's Go, grpc-gateway and genproto
// versions. client_golang and prometheus/common parse and gather, they do
// not estimate quantiles; so the estimate stays here, small. Every case of
// TestQuantile gives the same value from promql.BucketQuantile (v0.316.0,
// run outside this module on 2026-11-27).

// hist is a cumulative Prometheus histogram.
type hist struct {
	bounds []float64 // upper bounds, +Inf excluded
	cum    []float64 // cumulative counts per bound
	count  float64
}

func histFrom(h *dto.Histogram) hist {
	var out hist
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.cum = append(out.cum, float64(b.GetCumulativeCount()))
	}
	out.count = float64(h.GetSampleCount())
	return out
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// add merges b into h (equal bounds only).
func (h hist) add(b hist) hist {
	if h.count == 0 && len(h.bounds) == 0 {
		return hist{bounds: b.bounds, cum: append([]float64(nil), b.cum...), count: b.count}
	}
	if !sameBounds(h.bounds, b.bounds) {
		return h
	}
	out := hist{bounds: h.bounds, cum: make([]float64, len(h.cum)), count: h.count + b.count}
	for i := range h.cum {
		out.cum[i] = h.cum[i] + b.cum[i]
	}
	return out
}

// sub returns h minus an earlier prev of the same series; after a counter
// reset (a restarted service) h alone is the difference.
func (h hist) sub(prev hist) hist {
	if !sameBounds(h.bounds, prev.bounds) || h.count < prev.count {
		return h
	}
	out := hist{bounds: h.bounds, cum: make([]float64, len(h.cum)), count: h.count - prev.count}
	for i := range h.cum {
		out.cum[i] = max(h.cum[i]-prev.cum[i], 0)
	}
	return out
}

// quantile estimates the q-quantile in seconds the way histogram_quantile
// does: linear within the bucket holding the rank. NaN when empty.
func (h hist) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, prevCum := 0.0, 0.0
	for i, ub := range h.bounds {
		if h.cum[i] >= rank {
			inBucket := h.cum[i] - prevCum
			if inBucket <= 0 {
				return ub
			}
			return lower + (ub-lower)*(rank-prevCum)/inBucket
		}
		lower, prevCum = ub, h.cum[i]
	}
	return h.bounds[len(h.bounds)-1] // in the +Inf bucket: the highest finite bound
}
