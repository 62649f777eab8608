package tools_test

// Cases a real service cannot be made to produce on demand, run against the
// in-process stand-ins (internal/testfake): transient UNAVAILABLE answers
// that the client retries (the exact number of attempts is counted), an auth
// check slower than the backend (the ordering the gating must survive), and
// an expired key (the auth service's shortest key lifetime is one minute).

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

func statusErr(code codes.Code, msg string) error { return status.Error(code, msg) }

func TestStandInRetriesUnavailable(t *testing.T) {
	h := newHarness(t)
	before := h.env.Search.Calls()
	h.env.Search.FailNext(statusErr(codes.Unavailable, "transient"), statusErr(codes.Unavailable, "transient"))
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "success", a.status(), "two UNAVAILABLE answers are retried with backoff")
	require.Equal(t, before+3, h.env.Search.Calls())

	h.env.Search.FailNext(statusErr(codes.Unavailable, "x"), statusErr(codes.Unavailable, "x"), statusErr(codes.Unavailable, "x"))
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode(), "three attempts, then the error")
	require.True(t, a.errObj()["retryable"].(bool))
}

func TestStandInDeniedCallReturnsNothingFromBackend(t *testing.T) {
	h := newHarness(t, withKey(testfake.KeyRevoked))
	h.env.Auth.SetDelay(50 * time.Millisecond) // the backend answers first
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}, "format": "both"})
	require.Equal(t, "AUTH_INVALID", a.errCode())
	for _, b := range a.blocks {
		require.NotContains(t, b, "Data Platform Overview", "no backend data leaks into a denied answer")
	}
}

func TestStandInExpiredKey(t *testing.T) {
	h := newHarness(t, withKey(testfake.KeyExpired))
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "AUTH_INVALID", a.errCode())
	require.Equal(t, "AUTH_EXPIRED", a.errObj()["details"].(map[string]any)["reason"])
	require.Equal(t, "Invalid API key. Please check your credentials.", a.errObj()["message"], "the contract's message")
	require.Equal(t, "This API key has expired; ask your BMCIS administrator for a new key, or to rotate this one.", a.errObj()["suggestion"])
	md := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}, "format": "markdown"})
	require.Contains(t, md.blocks[0], "Suggestion: This API key has expired", "the markdown says so")
}
