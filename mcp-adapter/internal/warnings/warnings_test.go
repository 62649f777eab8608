package warnings_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

func TestWarnings(t *testing.T) {
	cases := []struct {
		w     envelope.Warning
		level envelope.Level
		code  string
		msg   string
	}{
		{warnings.NewTokenLimitWarning(12500, 15000, "s"), envelope.LevelWarning, "TOKEN_LIMIT_WARNING", "Response approaching context window limit (12500/15000 tokens)"},
		{warnings.NewTokenLimitExceeded(25000, 15000, "s"), envelope.LevelError, "TOKEN_LIMIT_EXCEEDED", "Response would use 25000 tokens, limit is 15000"},
		{warnings.NewCacheMissSlow(456 * time.Millisecond), envelope.LevelInfo, "CACHE_MISS_SLOW", "Cache miss resulted in slower response (456ms)"},
		{warnings.NewLowQualityResults(0.42, 0.25, 0.5), envelope.LevelInfo, "LOW_QUALITY_RESULTS", "No high-confidence results: the top result's similarity score is 0.42 and it matches 25% of the query terms, both below 0.50"},
		{warnings.NewPartialResults("m", "s"), envelope.LevelWarning, "PARTIAL_RESULTS", "m"},
		{warnings.NewDeprecatedParameter("top_k", "page_size"), envelope.LevelWarning, "DEPRECATED_PARAMETER", "Parameter 'top_k' is deprecated and was ignored because 'page_size' was also given"},
		{warnings.NewRateLimiterDegraded(), envelope.LevelWarning, "RATE_LIMITER_DEGRADED", ""},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			require.Equal(t, tc.level, tc.w.Level)
			require.Equal(t, tc.code, tc.w.Code)
			if tc.msg != "" {
				require.Equal(t, tc.msg, tc.w.Message)
			}
			require.NotNil(t, tc.w.Suggestion)
		})
	}
	require.Equal(t, 12000, warnings.Defaults.WarnAt())
	require.Nil(t, warnings.NewResolvedByElicitation("query", "x").Suggestion)
}
