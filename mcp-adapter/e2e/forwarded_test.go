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
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// TestForwardedClientBehindTrustedProxy: with BMCIS_TRUSTED_PROXIES
// naming 127.0.0.1, a call from 127.0.0.1 carrying X-Forwarded-For is
// audited with the client the header names, and refusals are limited per
// that client (platform/clientaddr); entries left of it are the client's
// own and ignored; another address's header is ignored. With the setting
// empty the header is ignored and the connection's address is recorded.
func TestForwardedClientBehindTrustedProxy(t *testing.T) {
	s := demo(t)
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 20 * time.Second}
	}
	call := func(base string, c *http.Client, apiKey, forwardedFor string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"incident severity levels"}}}`
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-API-Key", apiKey)
		req.Header.Set("X-Forwarded-For", forwardedFor)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(out)
	}
	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	// The trail's semantic_search entries since since, by client address.
	byAddress := func(since time.Time) map[string][]*authv1.AuditEvent {
		resp, err := authv1.NewAuthServiceClient(conn).ListAuditEvents(context.Background(),
			&authv1.ListAuditEventsRequest{Tool: "semantic_search", Since: timestamppb.New(since), PageSize: 1000})
		require.NoError(t, err)
		out := map[string][]*authv1.AuditEvent{}
		for _, e := range resp.GetEvents() {
			out[e.GetClientAddress()] = append(out[e.GetClientAddress()], e)
		}
		return out
	}
	stop := func(base string) {
		a, ok := adapterLogs.Load(base)
		require.True(t, ok)
		// The stop sends every entry and the open windows' summaries.
		a.(*stacktest.Adapter).Stop()
	}
	good := key(t)

	t.Run("trusted", func(t *testing.T) {
		base := adapterHTTP(t, s, map[string]string{
			"BMCIS_TRUSTED_PROXIES": "127.0.0.1", "BMCIS_AUDIT_FLUSH_INTERVAL": "20ms",
			"BMCIS_AUDIT_REFUSALS_PER_ADDRESS": "3", "BMCIS_AUDIT_REFUSAL_WINDOW": "1h",
		})
		since := time.Now()
		proxy := from("127.0.0.1")
		for range 5 {
			require.Contains(t, call(base, proxy, "not-a-key", "203.0.113.7"), "AUTH_INVALID")
		}
		require.Contains(t, call(base, proxy, good, "203.0.113.7"), `"status":"success"`)
		// A spoofed entry left of the client's own is not believed.
		for range 2 {
			require.Contains(t, call(base, proxy, "not-a-key", "203.0.113.66, 198.51.100.9"), "AUTH_INVALID")
		}
		// 127.0.0.4 is no trusted proxy: its header is ignored.
		for range 2 {
			require.Contains(t, call(base, from("127.0.0.4"), "not-a-key", "203.0.113.77"), "AUTH_INVALID")
		}
		stop(base)

		got := byAddress(since)
		forwarded := got["203.0.113.7"]
		require.Len(t, forwarded, 5, "3 refusals, their summary, the authenticated read")
		var refusals, summaries, authenticated int
		for _, e := range forwarded {
			switch {
			case e.GetPrincipal() != "":
				authenticated++
			case e.GetTarget() == "2 further refusals from 203.0.113.7 suppressed":
				summaries++
			default:
				refusals++
				require.Equal(t, "AUTH_INVALID", e.GetOutcome())
			}
		}
		require.Equal(t, []int{3, 1, 1}, []int{refusals, summaries, authenticated})
		require.Len(t, got["198.51.100.9"], 2)
		require.Empty(t, got["203.0.113.66"])
		require.Len(t, got["127.0.0.4"], 2)
		require.Empty(t, got["203.0.113.77"])
		for addr := range got {
			require.NotEqual(t, "127.0.0.1", addr, "the proxy is never the client: %v", got[addr])
		}
	})

	t.Run("empty setting", func(t *testing.T) {
		base := adapterHTTP(t, s, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"})
		since := time.Now()
		for range 2 {
			require.Contains(t, call(base, from("127.0.0.3"), "not-a-key", "203.0.113.8"), "AUTH_INVALID")
		}
		stop(base)
		got := byAddress(since)
		require.Len(t, got["127.0.0.3"], 2)
		require.Empty(t, got["203.0.113.8"])
		for _, e := range got["127.0.0.3"] {
			require.False(t, strings.Contains(e.GetTarget(), "suppressed"))
		}
	})
}
