package tools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
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

// TestParseChunkIDs: the length of chunk_ids is checked first, then the ids
// collapse, in the order asked.
func TestParseChunkIDs(t *testing.T) {
	s := newServer(Options{})
	list := func(n int, distinct int64) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = float64(1 + int64(i)%distinct)
		}
		return out
	}
	tooMany := func(n int) string {
		return fmt.Sprintf("Invalid request parameters: chunk_ids must hold 1 to %d ids (got %d)", limits.ChunkIDs.Max, n)
	}
	cases := []struct {
		name string
		ids  any
		want []int64
		err  string
	}{
		{name: "duplicates collapse in order", ids: []any{float64(3), float64(1), float64(3), "1", float64(2)}, want: []int64{3, 1, 2}},
		{name: "the cap, all duplicates", ids: list(limits.ChunkIDs.Max, 2), want: []int64{1, 2}},
		{name: "over the cap with few distinct ids", ids: list(limits.ChunkIDs.Max+1, 2), err: tooMany(limits.ChunkIDs.Max + 1)},
		{name: "far over the cap", ids: list(140_000, 140_000), err: tooMany(140_000)},
		{name: "far over the cap as a string", ids: strings.Repeat("7,", 140_000), err: tooMany(140_000)},
		{name: "empty", ids: []any{}, err: tooMany(0)},
		{name: "not positive", ids: []any{float64(4), float64(-3)}, err: "Invalid request parameters: chunk_ids must hold positive ids"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.parseChunks(map[string]any{"chunk_ids": tc.ids})
			if tc.err != "" {
				require.NotNil(t, err)
				require.Equal(t, tc.err, err.Message)
				return
			}
			require.Nil(t, err)
			require.Equal(t, tc.want, p.ids)
		})
	}
}
