package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/health"
	"github.com/bmcis/knowledge/gateway/internal/stats"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/version"
)

// A real tool call through the adapter binary moves its per-tool metrics
// (bmcis_mcp_tool_calls_total{tool,outcome},
// bmcis_mcp_tool_handling_seconds{tool}), and the gateway's /api/stats reads
// them through BMCIS_MCP_METRICS_URL (source "mcp-adapter"). The same
// endpoint serves the process metrics and bmcis_build_info every binary
// serves, from which the dashboard's adapter card takes its uptime and
// version as it does for the services.
func TestToolStatsFromAdapterMetrics(t *testing.T) {
	// The adapter's metrics listener takes an address, not a socket: a port
	// the kernel just handed out and released is free in practice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := l.Addr().String()
	require.NoError(t, l.Close())
	metricsURL := "http://" + metricsAddr + "/metrics"

	adapterLn := stacktest.Listen(t)
	s := newStack(t, map[string]string{
		"BMCIS_MCP_METRICS_URL": metricsURL,
		"BMCIS_MCP_HEALTH_URL":  "http://" + adapterLn.Addr().String() + "/healthz",
	})
	s.ingest()
	key := s.createKey(`{"name":"e2e-tool-stats"}`)
	a := s.st.StartAdapterHTTPOn(t, adapterLn, map[string]string{"BMCIS_MCP_METRICS_ADDR": metricsAddr})

	call := func(key string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"cloud providers"}}}`
		req, err := http.NewRequest(http.MethodPost, a.Base+"/mcp", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
		return string(out)
	}
	require.Contains(t, call(key), `"status":"success"`)
	require.Contains(t, call(""), "AUTH_REQUIRED")

	resp, err := http.Get(metricsURL)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	metrics := string(raw)
	for _, want := range []string{
		`bmcis_mcp_tool_calls_total{outcome="ok",tool="semantic_search"} 1`,
		`bmcis_mcp_tool_calls_total{outcome="AUTH_REQUIRED",tool="semantic_search"} 1`,
		`bmcis_mcp_tool_handling_seconds_count{tool="semantic_search"} 2`,
		`bmcis_build_info{service="mcp-adapter",version="` + version.Version + `"} 1`,
		"process_start_time_seconds ",
		"go_goroutines ",
	} {
		require.Contains(t, metrics, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var tool stats.Response
	require.Eventually(t, func() bool {
		tool = s.gw.Stats(ctx)
		for _, ts := range tool.Tools {
			if ts.Name == "semantic_search" && ts.Source == backends.MCPAdapter && ts.Requests == 2 {
				return true
			}
		}
		return false
	}, 15*time.Second, 100*time.Millisecond, "the gateway never read the adapter's tool metrics: %+v", tool.Tools)
	for _, ts := range tool.Tools {
		if ts.Name == "semantic_search" {
			require.InDelta(t, 1, ts.Errors, 0, "AUTH_REQUIRED is an error, ok is not")
			require.NotNil(t, ts.P50Ms)
		}
	}

	// The adapter's answer cache is one of /api/stats's caches, read from
	// bmcis_mcp_answer_cache_requests_total{result} as the services' are
	// (the keyed call's lookup, when the index watch was current by then).
	var answers []string
	for _, c := range tool.Cache {
		if c.Service == backends.MCPAdapter {
			answers = append(answers, c.Cache)
			require.LessOrEqual(t, c.Hits+c.Misses, 1.0, "one lookup at most: the keyless call was refused first")
		}
	}
	require.Equal(t, []string{"mcp_answer"}, answers)

	// The card's lastStarted is the adapter's process start, read from its
	// metrics, not when the gateway first reached it.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(metrics))
	require.NoError(t, err)
	started := fams["process_start_time_seconds"].GetMetric()[0].GetGauge().GetValue()
	h := s.waitStatus(health.StatusConnected, backends.MCPAdapter)
	card := h.Servers[3]
	require.Equal(t, backends.MCPAdapter, card.Name)
	require.NotNil(t, card.LastStarted)
	require.NotNil(t, card.ServerInfo)
	require.Equal(t, version.Version, card.ServerInfo.Version)
	lastStarted, err := time.Parse(time.RFC3339Nano, *card.LastStarted)
	require.NoError(t, err)
	require.InDelta(t, started, float64(lastStarted.UnixMilli())/1000, 0.002, "lastStarted %s", *card.LastStarted)
	require.InDelta(t, time.Since(lastStarted).Seconds(), card.Uptime, 2, "uptime counts from the process start")
}
