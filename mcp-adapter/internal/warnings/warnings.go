// Package warnings builds the warnings an answer may carry and holds the
// thresholds that trigger them.
package warnings

import (
	"fmt"
	"time"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
)

// Warning codes.
const (
	TokenLimitWarning     = "TOKEN_LIMIT_WARNING"
	TokenLimitExceeded    = "TOKEN_LIMIT_EXCEEDED"
	PartialResults        = "PARTIAL_RESULTS"
	CacheMissSlow         = "CACHE_MISS_SLOW"
	LowQualityResults     = "LOW_QUALITY_RESULTS"
	DeprecatedParameter   = "DEPRECATED_PARAMETER"
	RateLimiterDegraded   = "RATE_LIMITER_DEGRADED"
	ResolvedByElicitation = "RESOLVED_BY_ELICITATION"
	AuthDegraded          = "AUTH_DEGRADED"
)

// Codes lists every warning code; the output schemas' enum is read from it.
var Codes = []string{TokenLimitWarning, TokenLimitExceeded, PartialResults, CacheMissSlow,
	LowQualityResults, DeprecatedParameter, RateLimiterDegraded, ResolvedByElicitation, AuthDegraded}

// Thresholds configure when warnings fire.
type Thresholds struct {
	// MaxTokens is the most tokens an answer may use (MAX_TOKENS_PER_RESPONSE).
	MaxTokens int
	// WarnRatio is the share of MaxTokens above which TOKEN_LIMIT_WARNING
	// fires (TOKEN_WARNING_THRESHOLD).
	WarnRatio float64
	// LowQuality is the bound under which both the top result's
	// similarity score and its query-term coverage must fall, on a first
	// page, for LOW_QUALITY_RESULTS (LOW_QUALITY_THRESHOLD).
	LowQuality float64
	// CacheMissSlow is the backend time above which a cache miss is
	// reported (CACHE_MISS_SLOW_THRESHOLD).
	CacheMissSlow time.Duration
}

// Defaults are the documented defaults.
var Defaults = Thresholds{MaxTokens: 15000, WarnRatio: 0.8, LowQuality: 0.5, CacheMissSlow: 250 * time.Millisecond}

// WarnAt is the token count above which TOKEN_LIMIT_WARNING fires.
func (t Thresholds) WarnAt() int { return int(float64(t.MaxTokens) * t.WarnRatio) }

func w(level envelope.Level, code, msg, suggestion string) envelope.Warning {
	return envelope.Warning{Level: level, Code: code, Message: msg, Suggestion: envelope.Ptr(suggestion)}
}

// NewTokenLimitWarning reports an answer close to the limit.
func NewTokenLimitWarning(used, limit int, suggestion string) envelope.Warning {
	return w(envelope.LevelWarning, TokenLimitWarning,
		fmt.Sprintf("Response approaching context window limit (%d/%d tokens)", used, limit), suggestion)
}

// NewTokenLimitExceeded reports, as a warning entry, an answer that could
// not be made to fit.
func NewTokenLimitExceeded(needed, limit int, suggestion string) envelope.Warning {
	return w(envelope.LevelError, TokenLimitExceeded,
		fmt.Sprintf("Response would use %d tokens, limit is %d", needed, limit), suggestion)
}

// NewPartialResults reports results left out of an answer.
func NewPartialResults(msg, suggestion string) envelope.Warning {
	return w(envelope.LevelWarning, PartialResults, msg, suggestion)
}

// NewCacheMissSlow reports a slow uncached backend call.
func NewCacheMissSlow(elapsed time.Duration) envelope.Warning {
	return w(envelope.LevelInfo, CacheMissSlow,
		fmt.Sprintf("Cache miss resulted in slower response (%dms)", elapsed.Milliseconds()),
		"The ranking is now cached: further pages and repeats of this query will be fast.")
}

// NewLowQualityResults reports a first page whose top result is neither
// semantically close (similarity below the threshold) nor a good keyword
// match (covers less than the threshold's share of the query terms).
func NewLowQualityResults(similarity, coverage, threshold float64) envelope.Warning {
	return w(envelope.LevelInfo, LowQualityResults,
		fmt.Sprintf("No high-confidence results: the top result's similarity score is %.2f and it matches %.0f%% of the query terms, both below %.2f",
			similarity, coverage*100, threshold),
		"Try different keywords, more specific terms, or the exact names used in the documents.")
}

// NewNoResults reports an empty first page.
func NewNoResults() envelope.Warning {
	return w(envelope.LevelInfo, LowQualityResults, "No results matched the query",
		"Try broader or different keywords.")
}

// NewDeprecatedParameter reports a deprecated parameter that lost to its
// replacement.
func NewDeprecatedParameter(old, replacement string) envelope.Warning {
	return w(envelope.LevelWarning, DeprecatedParameter,
		fmt.Sprintf("Parameter '%s' is deprecated and was ignored because '%s' was also given", old, replacement),
		fmt.Sprintf("Use '%s' only.", replacement))
}

// NewRateLimiterDegraded reports that rate limits are not being enforced
// precisely because the shared limiter is unreachable.
func NewRateLimiterDegraded() envelope.Warning {
	return w(envelope.LevelWarning, RateLimiterDegraded,
		"Rate limiting is degraded: the shared limiter is unreachable and the auth service fell back to its local policy",
		"No action needed; limits may be enforced loosely until the limiter recovers.")
}

// NewAuthDegraded reports that the key was vouched for from a cached record
// because the auth service's database is unreachable.
func NewAuthDegraded() envelope.Warning {
	return w(envelope.LevelWarning, AuthDegraded,
		"Key checks are degraded: the auth database is unreachable and the key was accepted from a recent cached record",
		"No action needed; a revocation made meanwhile applies once the database is back.")
}

// NewResolvedByElicitation reports that the user supplied a parameter when
// asked.
func NewResolvedByElicitation(param, value string) envelope.Warning {
	return w(envelope.LevelInfo, ResolvedByElicitation,
		fmt.Sprintf("The user chose %s '%s' when asked", param, value), "")
}
