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

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// TestRefusalsAreLimitedPerAddress: a flood of bad keys from one address
// leaves its first BMCIS_AUDIT_REFUSALS_PER_ADDRESS refusals in the trail
// and, once its window ends, one entry counting the rest (also counted in
// bmcis_audit_refusals_suppressed_total); here the window ends at the
// adapter's stop, which writes the windows still open (an hour's window
// holds all the calls however slow the machine); another address's refusals and
// an authenticated caller's reads from the flooding address are all
// recorded.
func TestRefusalsAreLimitedPerAddress(t *testing.T) {
	s := demo(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := l.Addr().String()
	require.NoError(t, l.Close())
	base := adapterHTTP(t, s, map[string]string{
		"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms", "BMCIS_MCP_METRICS_ADDR": metricsAddr,
		"BMCIS_AUDIT_REFUSALS_PER_ADDRESS": "3", "BMCIS_AUDIT_REFUSAL_WINDOW": "1h",
	})
	// A client whose connections come from ip (any of 127/8 reaches the
	// adapter's 127.0.0.1 on Linux).
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 20 * time.Second}
	}
	call := func(c *http.Client, header, value string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"incident severity levels"}}}`
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(header, value)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(out)
	}
	flooder, other := from("127.0.0.1"), from("127.0.0.2")
	good := key(t)
	since := time.Now()

	// Bad keys in both places a key is read (malformed: auth refuses them
	// without a lookup, so its failed-check budget does not turn them into
	// RATE_LIMIT), interleaved with a good key's reads from the same address.
	const flood, goodReads = 10, 3
	for i := range flood {
		header, value := "X-API-Key", "not-a-key"
		if i%2 == 1 {
			header, value = "Authorization", "Bearer not-a-key"
		}
		require.Contains(t, call(flooder, header, value), "AUTH_INVALID")
		if i < goodReads {
			require.Contains(t, call(flooder, "X-API-Key", good), `"status":"success"`)
		}
	}
	for range 2 {
		require.Contains(t, call(other, "X-API-Key", "not-a-key"), "AUTH_INVALID")
	}

	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	entries := func(addr string) (refusals, summaries, authenticated int, summary *authv1.AuditEvent) {
		resp, err := authv1.NewAuthServiceClient(conn).ListAuditEvents(context.Background(),
			&authv1.ListAuditEventsRequest{Tool: "semantic_search", PageSize: 1000})
		require.NoError(t, err)
		for _, e := range resp.GetEvents() {
			if e.GetTime().AsTime().Before(since) || e.GetClientAddress() != addr {
				continue
			}
			switch {
			case e.GetPrincipal() != "":
				authenticated++
			case strings.HasSuffix(e.GetTarget(), " suppressed"):
				summaries++
				summary = e
			default:
				refusals++
				require.Equal(t, "AUTH_INVALID", e.GetOutcome())
			}
		}
		return refusals, summaries, authenticated, summary
	}
	// Counted as each refusal is answered (read before the stop ends the
	// metrics endpoint).
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		metrics, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return strings.Contains(string(metrics), "\nbmcis_audit_refusals_suppressed_total 7\n")
	}, 20*time.Second, 50*time.Millisecond)

	// The stop sends every entry and the open windows' summaries before
	// the process ends: the trail is then complete.
	a, ok := adapterLogs.Load(base)
	require.True(t, ok)
	a.(*stacktest.Adapter).Stop()
	refusals, summaries, authenticated, summary := entries("127.0.0.1")
	require.Equal(t, 3, refusals, "the limit")
	require.Equal(t, 1, summaries)
	require.Equal(t, goodReads, authenticated, "authenticated reads are never limited")
	require.Equal(t, "7 further refusals from 127.0.0.1 suppressed", summary.GetTarget())
	require.Equal(t, "AUTH_INVALID", summary.GetOutcome())
	require.Equal(t, "semantic_search", summary.GetTool())
	require.Empty(t, summary.GetPrincipal())
	require.Equal(t, "adapter", summary.GetEdge())

	refusals, summaries, _, _ = entries("127.0.0.2")
	require.Equal(t, 2, refusals, "another address is not affected")
	require.Zero(t, summaries)
}
