package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
)

// TestRedisFailure kills a private redis-server under a running service and
// restarts it: checks follow RATE_LIMIT_ON_REDIS_FAILURE while it is gone,
// say so (limiter_degraded, metric, log), and recover without help.
func TestRedisFailure(t *testing.T) {
	tests := []struct {
		name          string
		failOpen      bool
		downAtStartup bool
	}{
		{"open", true, false},
		{"closed", false, false},
		{"open, Redis down at startup", true, true},
		{"closed, Redis down at startup", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rp := authtest.StartRedis(t)
			cfg := authtest.Config()
			cfg.RedisURL = rp.URL()
			cfg.FailOpen = tc.failOpen
			cfg.RedisRetry = 100 * time.Millisecond
			if tc.downAtStartup {
				rp.Kill()
			}
			in := authtest.Start(t, cfg, authtest.NewDB(t))
			full, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "r", Limits: authtest.Limits("minute", 1_000)})

			if !tc.downAtStartup {
				resp := in.Check(t, full)
				require.True(t, resp.GetAllowed())
				require.False(t, resp.GetLimiterDegraded())
				require.Equal(t, int64(999), authtest.Tier(resp.GetRemaining(), "minute"))
				require.Equal(t, float64(0), in.Metric(t, "bmcis_auth_limiter_degraded", nil))
				rp.Kill()
			}

			for range 20 { // the first fails on Redis; the rest skip it until the next probe
				resp := in.Check(t, full)
				require.True(t, resp.GetLimiterDegraded())
				require.Equal(t, tc.failOpen, resp.GetAllowed())
				require.Nil(t, resp.GetRemaining(), "counts are unknown while degraded")
				require.Equal(t, "r", resp.GetPrincipal().GetName(), "the key itself was verified")
				if !tc.failOpen {
					// Not the key's quota: its own, retryable reason.
					require.Equal(t, authv1.DenialReason_DENIAL_REASON_LIMITER_UNAVAILABLE, resp.GetDenialReason())
					require.NotEqual(t, limited, resp.GetDenialReason())
					require.Contains(t, resp.GetMessage(), "retry")
					require.Positive(t, resp.GetResetInSeconds())
				}
			}
			require.Equal(t, float64(1), in.Metric(t, "bmcis_auth_limiter_degraded", nil))
			require.Positive(t, in.Metric(t, "bmcis_auth_limiter_backend_errors_total", nil))
			outcome := "refused"
			if tc.failOpen {
				outcome = "allowed"
			}
			require.Equal(t, float64(20), in.Metric(t, "bmcis_auth_limiter_degraded_decisions_total", map[string]string{"outcome": outcome}))
			// Nothing counts the units a lease would prepay: none is granted.
			leased, err := in.Client.Check(authtest.Adapter(context.Background()), &authv1.CheckRequest{ApiKey: full, LeaseUnits: 8})
			require.NoError(t, err)
			require.True(t, leased.GetLimiterDegraded())
			require.Nil(t, leased.GetLease())
			require.True(t, in.Logs.Contains("rate limiter degraded"))

			rp.Start()
			var resp *authv1.CheckResponse
			require.Eventually(t, func() bool {
				resp = in.Check(t, full)
				return !resp.GetLimiterDegraded()
			}, 10*time.Second, 20*time.Millisecond)
			require.True(t, resp.GetAllowed())
			require.Equal(t, int64(999), authtest.Tier(resp.GetRemaining(), "minute"), "counting again (the restarted Redis kept no state)")
			require.Equal(t, float64(0), in.Metric(t, "bmcis_auth_limiter_degraded", nil))
			require.True(t, in.Logs.Contains("rate limiter recovered"))
		})
	}
}
