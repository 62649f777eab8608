package faults_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRedisKilled: the shared rate limiter's Redis is killed (-9) under
// load and started again (empty: it keeps no state on disk), in both
// failure modes. Open mode keeps serving with RATE_LIMITER_DEGRADED;
// closed mode refuses with a retryable SERVICE_UNAVAILABLE, never
// RATE_LIMIT (no quota was spent). Within 2 s of Redis being back, calls
// are counted again: no warning, no refusal.
func TestRedisKilled(t *testing.T) {
	for _, mode := range []string{"open", "closed"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, envOptions{Data: true, RedisMode: mode})
			a := e.startAdapter(t, "")
			query := func(i int) result {
				return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("incident severity %d", i%5)})
			}
			require.True(t, query(0).ok())
			l := startLoad(2, 2000, query)
			time.Sleep(500 * time.Millisecond)
			down := time.Now()
			e.redis.Kill()
			time.Sleep(3 * time.Second)
			e.redis.Start()
			up := time.Now() // Redis answers again: the fault has cleared
			var back time.Duration
			require.Eventually(t, func() bool {
				r := query(1)
				back = time.Since(up)
				return r.ok() && !slices.Contains(r.Warnings, "RATE_LIMITER_DEGRADED")
			}, 10*time.Second, 20*time.Millisecond, "calls never counted again")
			time.Sleep(300 * time.Millisecond)
			results := l.finish()

			var during, degraded, refused int
			for _, r := range results {
				require.NoError(t, r.r.Transport)
				if r.start.After(down.Add(300*time.Millisecond)) && r.end.Before(up) {
					during++
				}
				if slices.Contains(r.r.Warnings, "RATE_LIMITER_DEGRADED") {
					degraded++
				}
				if r.r.Code != "" {
					refused++
					require.Equal(t, "SERVICE_UNAVAILABLE", r.r.Code, "%s", r.r)
					require.True(t, r.r.Retryable)
				}
			}
			t.Logf("%s mode: %d calls, %d during the outage, %d degraded, %d refused; counted again %s after Redis answered",
				mode, len(results), during, degraded, refused, back)
			require.Positive(t, during)
			switch mode {
			case "open":
				require.Zero(t, refused, "open mode serves through a Redis outage")
				require.Positive(t, degraded, "open mode says the limits are not enforced")
			case "closed":
				require.Positive(t, refused, "closed mode refuses while it cannot count")
			}
			require.LessOrEqual(t, back, recoveryBound)
		})
	}
}
