package procmetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/procmetrics"
	"github.com/bmcis/knowledge/platform/version"
)

func TestRegisterServesProcessAndBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, procmetrics.Register(reg, "mcp-adapter"))
	fams, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]bool{}
	for _, f := range fams {
		byName[f.GetName()] = true
		if f.GetName() != procmetrics.BuildInfo {
			continue
		}
		require.Len(t, f.GetMetric(), 1)
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		require.Equal(t, map[string]string{"service": "mcp-adapter", "version": version.Version}, labels)
		require.InDelta(t, 1, f.GetMetric()[0].GetGauge().GetValue(), 0)
	}
	for _, want := range []string{"process_start_time_seconds", "go_goroutines", procmetrics.BuildInfo} {
		require.True(t, byName[want], want)
	}

	// Registering twice on one registry is an error, not a panic.
	require.ErrorContains(t, procmetrics.Register(reg, "mcp-adapter"), "register the process metrics")
}
