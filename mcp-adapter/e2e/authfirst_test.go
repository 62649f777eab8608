package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// handled sums bmcis_grpc_server_handled_total of a service's own RPCs
// (health checks left out), from its Prometheus endpoint.
func handled(t *testing.T, s *stacktest.Stack, service string) float64 {
	t.Helper()
	resp, err := http.Get(s.Service(service).MetricsURL())
	require.NoError(t, err)
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "bmcis_grpc_server_handled_total{") || strings.Contains(line, "grpc.health") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		sum += v
	}
	require.NoError(t, sc.Err())
	return sum
}

// A key auth does not allow starts no backend work: the search and
// vendorgraph services handle no RPC for it, counted from their metrics.
// The allow cache is on (its default), and the exhausted key was allowed
// just before it ran out.
func TestRefusedKeysStartNoBackendWork(t *testing.T) {
	s := demo(t)
	a := adapterHTTP(t, s, map[string]string{"BMCIS_AUTH_ALLOW_CACHE_TTL": "10s"})
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"semantic_search", map[string]any{"query": "incident severity levels"}},
		{"find_vendor_info", map[string]any{"vendor_name": "Globex"}},
		{"get_chunks", map[string]any{"chunk_ids": []any{1, 2}}},
	}

	const perMinute = 3
	exhausted := s.CreateKey(t, stacktest.Key{Name: "auth-first-exhausted", PerMinute: perMinute, PerHour: 1000, PerDay: 1000})
	ce := httpClient(t, a, map[string]string{"X-API-Key": exhausted})
	for range perMinute {
		require.Equal(t, "success", status(callTool(t, ce, "semantic_search", calls[0].args)))
	}
	unknown := httpClient(t, a, map[string]string{"X-API-Key": "bmcis_abcdefgh23456789_" + strings.Repeat("q", 40)})

	search0, vendor0 := handled(t, s, stacktest.Search), handled(t, s, stacktest.VendorGraph)
	for range 10 {
		for _, c := range calls {
			require.Equal(t, "RATE_LIMIT", code(callTool(t, ce, c.tool, c.args)), c.tool)
			require.Equal(t, "AUTH_INVALID", code(callTool(t, unknown, c.tool, c.args)), c.tool)
		}
	}
	require.Equal(t, search0, handled(t, s, stacktest.Search), "search RPCs started for refused keys")
	require.Equal(t, vendor0, handled(t, s, stacktest.VendorGraph), "vendorgraph RPCs started for refused keys")

	// The counters do move for an allowed key (the test can see work).
	require.Equal(t, "success", status(callTool(t, httpClient(t, a, map[string]string{"X-API-Key": key(t)}), "find_vendor_info", calls[1].args)))
	require.Greater(t, handled(t, s, stacktest.VendorGraph), vendor0)
}
