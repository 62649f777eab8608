package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

// TestThrowawayTier adds a "week" tier as an operator would: one row in the
// tier list and the migration's row in rate_limit_tiers. Its variable, its
// per-key limit, its counting (both backends) and its place in Check's
// reply follow with no other change.
func TestThrowawayTier(t *testing.T) {
	saved := ratelimit.Tiers
	ratelimit.Tiers = append(append([]ratelimit.Tier(nil), saved...), ratelimit.Tier{Name: "week", Window: 7 * 24 * time.Hour, Default: 50_000})
	t.Cleanup(func() { ratelimit.Tiers = saved })

	env := config.FromMap(map[string]string{"BMCIS_RATE_LIMIT_WEEK": "3"})
	cfg := server.LoadConfig(env)
	require.NoError(t, env.Err())
	require.Equal(t, limiter.Limits{100, 1_000, 10_000, 3}, cfg.Defaults, "the variable comes from the tier list")

	eachBackend(t, func(t *testing.T, backend string) {
		c := testConfig(t, backend, authtest.NewClock())
		c.Defaults = cfg.Defaults
		pool := authtest.NewDB(t)
		_, err := pool.Exec(context.Background(), `INSERT INTO rate_limit_tiers (name) VALUES ('week')`) // the migration
		require.NoError(t, err)
		in := authtest.Start(t, c, pool)

		dflt, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "default-week"})
		own, ownKey := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "own-week", Limits: authtest.Limits("week", 2)})
		require.Equal(t, int64(2), authtest.Tier(ownKey.GetLimits(), "week"))

		resp := in.Check(t, own)
		require.True(t, resp.GetAllowed())
		require.Equal(t, []string{"minute", "hour", "day", "week"}, tierNames(resp.GetLimits()))
		require.Equal(t, int64(1), authtest.Tier(resp.GetRemaining(), "week"))
		require.True(t, in.Check(t, own).GetAllowed())
		resp = in.Check(t, own)
		require.False(t, resp.GetAllowed(), "the week tier refuses like any other")
		require.Equal(t, authv1.DenialReason_DENIAL_REASON_RATE_LIMIT, resp.GetDenialReason())
		require.Equal(t, int64(98), authtest.Tier(resp.GetRemaining(), "minute"), "two calls taken; the refusal took none")

		for range 3 {
			require.True(t, in.Check(t, dflt).GetAllowed())
		}
		require.False(t, in.Check(t, dflt).GetAllowed(), "BMCIS_RATE_LIMIT_WEEK=3")
	})
}

func tierNames(l *authv1.RateLimits) []string {
	var out []string
	for _, t := range l.GetTiers() {
		out = append(out, t.GetTier())
	}
	return out
}
