package tools

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

func TestWellFormedKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"bmcis_l5rpjostovdel7ay_zcbnwrzc6ajyise3ju6xpm33rgqjjgf4ijd5axjhbjaeib353fta", true},
		{"bmcis_abcdefgh_abcdefghijklmnop", true},
		{"", false},
		{"sk-live-123", false},
		{"bmcis_short_abcdefghijklmnop", false},
		{"bmcis_abcdefgh_short", false},
		{"bmcis_ABCDEFGH_abcdefghijklmnop", false},
		{"bmcis_abcdefgh", false},
		{"bmcis_abcdefgh_abcdefghijklmnop; DROP", false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, wellFormedKey(tc.key), tc.key)
	}
}

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
