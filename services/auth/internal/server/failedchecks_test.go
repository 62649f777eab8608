package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

// Made-up keys cost a client at most its budget of database lookups per
// window: past it, from that client address, a key id auth does not hold
// in memory is refused (AUTH_THROTTLED) without a lookup. A key held in
// memory still works from there, other addresses are not affected, and the
// next window restores the budget.
func TestFailedChecksBudgetPerClient(t *testing.T) {
	clk := authtest.NewClock()
	cfg := testConfig(t, "memory", clk)
	cfg.FailedChecksPerClient, cfg.FailedChecksWindow = 3, time.Minute
	in := authtest.Start(t, cfg, authtest.NewDB(t))
	good, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "good"})

	check := func(key, addr string) *authv1.CheckResponse {
		t.Helper()
		resp, err := in.Client.Check(context.Background(), &authv1.CheckRequest{ApiKey: key, Operation: "semantic_search", ClientAddress: addr})
		require.NoError(t, err)
		return resp
	}
	madeUp := func() string {
		k, err := keys.Generate()
		require.NoError(t, err)
		return k.Full
	}
	lookups := func() float64 {
		return in.Metric(t, "bmcis_auth_key_lookups_total", map[string]string{"source": "database"})
	}
	const attacker, neighbour = "203.0.113.7", "198.51.100.9"

	require.True(t, check(good, attacker).GetAllowed()) // good's record is now held in memory
	for range 3 {
		require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, check(madeUp(), attacker).GetDenialReason())
	}
	before := lookups()
	for range 20 {
		resp := check(madeUp(), attacker)
		require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED, resp.GetDenialReason())
		require.Equal(t, server.MsgAuthThrottled, resp.GetMessage())
		require.Positive(t, resp.GetResetInSeconds())
		require.LessOrEqual(t, resp.GetResetInSeconds(), int32(60))
	}
	require.Equal(t, before, lookups(), "throttled checks cost no database lookup")
	require.EqualValues(t, 20, in.Metric(t, "bmcis_auth_checks_total", map[string]string{"result": "auth_throttled"}))

	require.True(t, check(good, attacker).GetAllowed(), "a key held in memory still works from the throttled address")
	require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, check(madeUp(), neighbour).GetDenialReason(), "another address has its own budget")
	// An IPv6 client is budgeted by its /64, and a port is ignored.
	for range 3 {
		check(madeUp(), "[2001:db8:1:2::10]:5555")
	}
	require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_THROTTLED, check(madeUp(), "2001:db8:1:2::ffff").GetDenialReason())
	// A call without an address (stdio, bmcisctl) is not budgeted.
	require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, check(madeUp(), "").GetDenialReason())

	clk.Advance(time.Minute)
	require.Equal(t, authv1.DenialReason_DENIAL_REASON_AUTH_INVALID, check(madeUp(), attacker).GetDenialReason(), "the next window has a budget again")
}
