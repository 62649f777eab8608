package apierr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
)

func TestFromBackend(t *testing.T) {
	cases := []struct {
		svc       apierr.Service
		err       error
		code      apierr.Code
		retryable bool
		message   string
	}{
		{apierr.Search, status.Error(codes.Unavailable, "database unavailable; retry shortly"), apierr.DBConnection, true, "Search failed: Database connection error"},
		{apierr.VendorGraph, status.Error(codes.Unavailable, "database unavailable; retry shortly"), apierr.DBConnection, true, "Vendor info retrieval failed: Database connection error"},
		{apierr.Search, status.Error(codes.Unavailable, "connection refused"), apierr.ServiceUnavailable, true, ""},
		{apierr.Search, status.Error(codes.DeadlineExceeded, "x"), apierr.ServiceUnavailable, true, ""},
		{apierr.Search, context.DeadlineExceeded, apierr.ServiceUnavailable, true, ""},
		{apierr.Search, fmt.Errorf("wrapped: %w", context.Canceled), apierr.ServiceUnavailable, true, ""},
		{apierr.Search, status.Error(codes.ResourceExhausted, "x"), apierr.ServiceUnavailable, true, ""},
		{apierr.Search, status.Error(codes.Unimplemented, "x"), apierr.ServiceUnavailable, false, ""},
		{apierr.VendorGraph, status.Error(codes.Unauthenticated, "x"), apierr.ServiceUnavailable, false, ""},
		{apierr.Search, status.Error(codes.InvalidArgument, "limit: must be 1..50"), apierr.InvalidParams, false, "Invalid request parameters: limit: must be 1..50"},
		{apierr.VendorGraph, status.Error(codes.InvalidArgument, "name: too long"), apierr.InvalidParams, false, "Request validation failed: name: too long"},
		{apierr.Search, status.Error(codes.Internal, "internal error (request id r)"), apierr.SearchFailed, true, "Search failed: internal error (request id r)"},
		{apierr.VendorGraph, status.Error(codes.Internal, "boom"), apierr.ServiceUnavailable, true, ""},
		{apierr.Search, errors.New("plain"), apierr.ServiceUnavailable, true, ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.svc)+"/"+tc.err.Error(), func(t *testing.T) {
			e := apierr.FromBackend(tc.svc, tc.err)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.retryable, e.Retryable)
			if tc.message != "" {
				require.Equal(t, tc.message, e.Message)
			}
			require.NotEmpty(t, e.Suggestion)
		})
	}
	own := apierr.NewQueryTooLong(600, 500)
	require.Same(t, own, apierr.FromBackend(apierr.Search, fmt.Errorf("w: %w", own)))
}

func TestReferenceMessages(t *testing.T) {
	require.Equal(t, "Authentication required. API key must be provided.", apierr.NewAuthRequired("x").Message)
	require.Equal(t, "Invalid API key. Please check your credentials.", apierr.NewAuthInvalid("AUTH_INVALID", "").Message)
	require.Equal(t, "Rate limit exceeded", apierr.NewRateLimit(envelope.Remaining{}, 3).Message)
	require.Equal(t, "Invalid request parameters: query exceeds 500 characters", apierr.NewQueryTooLong(501, 500).Message)
	require.Equal(t, "Invalid request parameters: top_k must be between 1 and 50", apierr.NewInvalidParams("top_k", "must be between 1 and 50", "").Message)
	require.Equal(t, "Vendor 'XYZ' not found. Try using semantic_search first to find exact vendor names.", apierr.NewVendorNotFound("XYZ", nil).Message)
	require.Equal(t, "semantic_search('XYZ vendors')", apierr.NewVendorNotFound("XYZ", nil).Suggestion)
	require.Equal(t, "Ambiguous vendor name. Multiple matches found: ['Acme Corp', 'ACME Inc', 'Acme Ltd']. Please use full vendor name or a more specific term.",
		apierr.NewVendorAmbiguous("Acme", []string{"Acme Corp", "ACME Inc", "Acme Ltd"}).Message)
	require.Equal(t, "Response would use 25000 tokens, limit is 15000", apierr.NewTokenLimitExceeded(25000, 15000, "s").Message)
}

func TestEnvelopeMember(t *testing.T) {
	e := apierr.NewRateLimit(envelope.NewRemaining([]envelope.TierCount{{Tier: "hour", Value: 450}, {Tier: "day", Value: 8500}}), 35).Envelope()
	require.Equal(t, "RATE_LIMIT", e.Code)
	require.True(t, e.Retryable)
	require.Equal(t, &envelope.Remaining{{Tier: "minute"}, {Tier: "hour", Value: 450}, {Tier: "day", Value: 8500}}, e.Remaining)
	require.Equal(t, 35, *e.ResetInSeconds)
	require.Equal(t, 35, e.Details["reset_in_seconds"])
	e = apierr.NewVendorAmbiguous("a", nil).Envelope()
	require.Equal(t, []string{}, e.Suggestions)
	require.NotNil(t, apierr.NewServiceUnavailable("x", "y", true).Envelope().Details)
	require.Len(t, apierr.AllCodes, 13)
}

func TestDatabaseCauseIsTyped(t *testing.T) {
	st, err := status.New(codes.Unavailable, "try later").WithDetails(&errdetails.ErrorInfo{Reason: "DATABASE_UNAVAILABLE", Domain: "db.bmcis"})
	require.NoError(t, err)
	require.Equal(t, apierr.DBConnection, apierr.FromBackend(apierr.Search, st.Err()).Code)
	require.Equal(t, apierr.ServiceUnavailable, apierr.FromBackend(apierr.Search, status.Error(codes.Unavailable, "try later")).Code)
}

// Only search and vendorgraph serve some tools and not others: with auth,
// the adapter itself or the bridge's endpoint down, no tool works, and the
// suggestion must not send the model to try the others.
func TestServiceUnavailableSaysOtherToolsWorkOnlyForABackendOfSome(t *testing.T) {
	for _, tc := range []struct {
		service    string
		retryAfter int
		suggestion string
	}{
		{"search", 0, "Retry in a few seconds; other tools keep working."},
		{"vendorgraph", 0, "Retry in a few seconds; other tools keep working."},
		{"search", 7, "Retry in 7 seconds; other tools keep working."},
		{"auth", 0, "Retry in a few seconds; no tool can answer until it is back."},
		{"mcp-adapter", 0, "Retry in a few seconds."}, // one answer of the adapter's own
		{"BMCIS MCP endpoint", 0, "Retry in a few seconds; no tool can answer until it is back."},
		{"BMCIS MCP endpoint", 7, "Retry in 7 seconds; no tool can answer until it is back."},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.service, tc.retryAfter), func(t *testing.T) {
			e := apierr.NewServiceUnavailable(tc.service, "it cannot be reached", true)
			if tc.retryAfter > 0 {
				e = e.WithRetryAfter(tc.retryAfter)
			}
			require.Equal(t, tc.suggestion, e.Suggestion)
		})
	}
	require.Equal(t, "Contact the BMCIS administrator; retrying will not help.",
		apierr.NewServiceUnavailable("auth", "not implemented", false).Suggestion, "a permanent failure keeps its own advice")
}
