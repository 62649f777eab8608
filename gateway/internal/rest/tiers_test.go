package rest

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

// TestHeadersFollowTheTierList: a tier the gateway was never told about (a
// throwaway "week") gets its headers and error metadata from the reply alone.
func TestHeadersFollowTheTierList(t *testing.T) {
	withWeek := func(minute, hour, day, week int64) *authv1.RateLimits {
		l := rateLimits(minute, hour, day)
		l.Tiers = append(l.Tiers, &authv1.TierLimit{Tier: "week", Value: week})
		return l
	}
	resp := &authv1.CheckResponse{Allowed: true, Limits: withWeek(100, 1000, 10000, 50000),
		Remaining: withWeek(99, 999, 9999, 49999), ResetInSeconds: 1}
	w := httptest.NewRecorder()
	setRateLimitHeaders(w, resp)
	tests := []struct{ header, want string }{
		{"X-RateLimit-Limit", "100"},
		{"X-RateLimit-Remaining", "99"},
		{"X-RateLimit-Limit-Minute", "100"},
		{"X-RateLimit-Remaining-Hour", "999"},
		{"X-RateLimit-Limit-Week", "50000"},
		{"X-RateLimit-Remaining-Week", "49999"},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, w.Header().Get(tc.header), tc.header)
	}

	resp = &authv1.CheckResponse{DenialReason: authv1.DenialReason_DENIAL_REASON_RATE_LIMIT,
		Limits: withWeek(100, 1000, 10000, 50000), Remaining: withWeek(40, 500, 900, 0), ResetInSeconds: 3600}
	var info *errdetails.ErrorInfo
	for _, d := range denialStatus(resp).Details() {
		if e, ok := d.(*errdetails.ErrorInfo); ok {
			info = e
		}
	}
	require.NotNil(t, info)
	require.Equal(t, "0", info.GetMetadata()["remaining_week"])
	require.Equal(t, "50000", info.GetMetadata()["limit_week"])
	require.Equal(t, "40", info.GetMetadata()["remaining_minute"])
}
