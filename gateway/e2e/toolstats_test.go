package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/gateway/internal/stats"
)

// A real tool call through the adapter binary moves its per-tool metrics
// (bmcis_mcp_tool_calls_total{tool,outcome},
// bmcis_mcp_tool_handling_seconds{tool}), and the gateway's /api/stats reads
// them through BMCIS_MCP_METRICS_URL (source "mcp-adapter").
func TestToolStatsFromAdapterMetrics(t *testing.T) {
	// The adapter's metrics listener takes an address, not a socket: a port
	// the kernel just handed out and released is free in practice.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := l.Addr().String()
	require.NoError(t, l.Close())
	metricsURL := "http://" + metricsAddr + "/metrics"

	s := newStack(t, map[string]string{"BMCIS_MCP_METRICS_URL": metricsURL})
	s.ingest()
	key := s.createKey(`{"name":"e2e-tool-stats"}`)
	a := s.st.StartAdapterHTTP(t, map[string]string{"BMCIS_MCP_METRICS_ADDR": metricsAddr})

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
}
