package tools

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// How the key was checked shows in the answer's warnings: a degraded
// limiter, and a key vouched for from a stale record during an auth
// database outage.
func TestAuthInfoWarnings(t *testing.T) {
	codes := func(a authInfo) []string {
		var out []string
		for _, w := range a.warnings() {
			out = append(out, w.Code)
		}
		return out
	}
	require.Empty(t, codes(authInfo{}))
	require.Equal(t, []string{warnings.RateLimiterDegraded}, codes(authInfo{degraded: true}))
	require.Equal(t, []string{warnings.AuthDegraded}, codes(authInfo{staleKey: true}))
	require.Equal(t, []string{warnings.RateLimiterDegraded, warnings.AuthDegraded}, codes(authInfo{degraded: true, staleKey: true}))
}
