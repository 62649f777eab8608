package tools_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// Closed mode with the shared limiter down: a call is refused as a
// retryable SERVICE_UNAVAILABLE, never as an exhausted quota (RATE_LIMIT
// with nothing remaining, as it was), and answers again by itself once Redis
// is back. The real auth service on a private redis-server that the test kills.
func TestClosedModeLimiterOutage(t *testing.T) {
	rd := stacktest.StartRedis(t)
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Auth}, NoRedis: true,
		ServiceEnv: map[string]map[string]string{stacktest.Auth: {
			"REDIS_URL": rd.URL(), "RATE_LIMIT_ON_REDIS_FAILURE": "closed", "BMCIS_RATE_LIMIT_REDIS_TIMEOUT": "200ms",
		}}})
	key := s.CreateKey(t, stacktest.Key{Name: "closed-mode"})
	h := newRealWithClient(t, nil, []realOpt{withAddr(stacktest.Auth, s.Addr(stacktest.Auth))}, []harnessOpt{withKey(key)})
	chunks := map[string]any{"chunk_ids": []any{1}, "format": "json"}

	require.Empty(t, h.call(tools.ToolGetChunks, chunks).errCode())

	rd.Kill()
	for range 3 {
		a := h.call(tools.ToolGetChunks, chunks)
		require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode(), "not RATE_LIMIT: the key spent nothing")
		require.Equal(t, true, a.errObj()["retryable"])
		require.Contains(t, a.errObj()["message"], "rate limits cannot be counted")
	}

	rd.Start()
	back := time.Now()
	require.Eventually(t, func() bool { return h.call(tools.ToolGetChunks, chunks).errCode() == "" },
		5*time.Second, 50*time.Millisecond, "answers again once Redis is back")
	t.Logf("answering again %v after Redis came back", time.Since(back).Round(10*time.Millisecond))
}
