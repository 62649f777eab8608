package e2e

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

// TestRESTForwardedClientBehindTrustedProxy: with BMCIS_TRUSTED_PROXIES
// naming 127.0.0.1, REST requests from 127.0.0.1 carrying X-Forwarded-For
// are audited with the client the header names and refusals are limited
// per that client (platform/clientaddr); entries left of it are ignored,
// and so is the header from an address not trusted. With the setting
// empty, the header is ignored: the connection's address is recorded.
func TestRESTForwardedClientBehindTrustedProxy(t *testing.T) {
	const route = "/v1/vendor-suggestions?text=Nobo"
	get := func(s *stack, from, apiKey, forwardedFor string) int {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: 20 * time.Second}
		req, err := http.NewRequest(http.MethodGet, s.url+route, nil)
		require.NoError(t, err)
		req.Header.Set(rest.HeaderAPIKey, apiKey)
		req.Header.Set("X-Forwarded-For", forwardedFor)
		resp, err := c.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	byAddress := func(s *stack, n int, since time.Time) map[string][]*authv1.AuditEvent {
		events := s.auditEvents(n, &authv1.ListAuditEventsRequest{Tool: "GET /v1/vendor-suggestions", Since: timestamppb.New(since)})
		require.Len(t, events, n)
		out := map[string][]*authv1.AuditEvent{}
		for _, e := range events {
			out[e.GetClientAddress()] = append(out[e.GetClientAddress()], e)
		}
		return out
	}

	t.Run("trusted", func(t *testing.T) {
		s := newStack(t, map[string]string{"BMCIS_TRUSTED_PROXIES": "127.0.0.1", "BMCIS_AUDIT_FLUSH_INTERVAL": "20ms",
			"BMCIS_AUDIT_REFUSALS_PER_ADDRESS": "3", "BMCIS_AUDIT_REFUSAL_WINDOW": "1h"})
		key := s.createKey(`{"name":"behind-a-proxy"}`)
		since := time.Now()
		for range 5 {
			require.Equal(t, http.StatusUnauthorized, get(s, "127.0.0.1", "not-a-key", "203.0.113.7"))
		}
		require.Equal(t, http.StatusOK, get(s, "127.0.0.1", key, "203.0.113.7"))
		// A spoofed entry left of the client's own is not believed.
		for range 2 {
			require.Equal(t, http.StatusUnauthorized, get(s, "127.0.0.1", "not-a-key", "203.0.113.66, 198.51.100.9"))
		}
		// 127.0.0.4 is no trusted proxy: its header is ignored.
		for range 2 {
			require.Equal(t, http.StatusUnauthorized, get(s, "127.0.0.4", "not-a-key", "203.0.113.77"))
		}

		// The stop writes the open windows' summaries: 3 + 1 + 1 + 2 + 2.
		s.gw.Close()
		got := byAddress(s, 9, since)
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
		require.Len(t, got["127.0.0.4"], 2)
		require.Len(t, got, 3, "the proxy, the spoofed entry and the untrusted header are never the client: %v", got)
	})

	t.Run("empty setting", func(t *testing.T) {
		s := newStack(t, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"})
		since := time.Now()
		for range 2 {
			require.Equal(t, http.StatusUnauthorized, get(s, "127.0.0.3", "not-a-key", "203.0.113.8"))
		}
		s.gw.Close()
		got := byAddress(s, 2, since)
		require.Len(t, got["127.0.0.3"], 2)
		require.Len(t, got, 1, "the header is ignored: %v", got)
	})
}
