package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

// TestLeases: Check prepays what the adapter asks, within the key's limits
// and BMCIS_AUTH_LEASE_MAX and never past its expiry; ReleaseLease gives
// back the unspent units of a lease auth recorded, for its key, once.
func TestLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		clk := authtest.NewClock()
		cfg := testConfig(t, backend, clk)
		if backend == "redis" {
			cfg.RedisTestClock = clk.Now // a lease's record expires on this clock too
		}
		in := authtest.Start(t, cfg, authtest.NewDB(t))
		adapter := authtest.Adapter(context.Background())
		check := func(ctx context.Context, key string, units int32) *authv1.CheckResponse {
			t.Helper()
			resp, err := in.Client.Check(ctx, &authv1.CheckRequest{ApiKey: key, Operation: "semantic_search",
				Tool: "semantic_search", LeaseUnits: units})
			require.NoError(t, err)
			require.True(t, resp.GetAllowed())
			return resp
		}
		minute := func(r *authv1.CheckResponse) int64 { return authtest.Tier(r.GetRemaining(), "minute") }

		key, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "busy", Limits: authtest.Limits("minute", 20)})
		id, _, _ := keys.Parse(key)
		soon, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "soon", ExpiresIn: durationpb.New(time.Hour)})
		plain, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "plain"})
		small, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "small", Limits: authtest.Limits("minute", 3)})

		tests := []struct {
			name      string
			ctx       context.Context
			key       string
			units     int32
			advance   time.Duration
			wantUnits int32
			wantValid int32
			minute    int64
		}{
			{"the adapter gets what it asks", adapter, key, 8, 0, 8, 2000, 11},
			{"none asked, none given", adapter, key, 0, 0, 0, 0, 10},
			{"another edge may not lease", context.Background(), key, 8, 0, 0, 0, 9},
			{"at most 64", adapter, plain, 1000, 0, 64, 2000, 100 - 65},
			{"never past the key's limits", adapter, small, 8, 0, 2, 2000, 0},
			{"never past the key's expiry", adapter, soon, 1, time.Hour - 500*time.Millisecond, 1, 500, 98},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				clk.Advance(tc.advance)
				resp := check(tc.ctx, tc.key, tc.units)
				require.Equal(t, tc.wantUnits, resp.GetLease().GetUnits())
				require.Equal(t, tc.wantValid, resp.GetLease().GetValidMs())
				require.Equal(t, tc.minute, minute(resp), "leased units are counted in remaining")
			})
		}

		t.Run("release refunds only a recorded lease's units, once", func(t *testing.T) {
			fresh, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "fresh", Limits: authtest.Limits("minute", 20)})
			fid, _, _ := keys.Parse(fresh)
			other, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "other", Limits: authtest.Limits("minute", 20)})
			oid, _, _ := keys.Parse(other)
			release := func(keyID, leaseID string, units int32) int32 {
				t.Helper()
				resp, err := in.Client.ReleaseLease(adapter, &authv1.ReleaseLeaseRequest{KeyId: keyID, Tool: "semantic_search",
					UnusedUnits: units, LeaseId: leaseID, LastUsed: timestamppb.New(clk.Now())})
				require.NoError(t, err)
				return resp.GetRefundedUnits()
			}
			forged, err := limiter.NewLeaseID()
			require.NoError(t, err)

			granted := check(adapter, fresh, 8)
			require.Equal(t, int64(11), minute(granted))
			lease := granted.GetLease().GetId()
			require.True(t, limiter.ValidLeaseID(lease), "an unguessable id: %q", lease)
			require.Equal(t, int32(5), release(fid, lease, 5))
			require.Equal(t, int64(15), minute(check(adapter, fresh, 0)), "20 - 1 - 8 + 5 - 1")
			require.Zero(t, release(fid, lease, 3), "a second release refunds nothing")
			require.Zero(t, release(fid, forged, 64), "an unknown lease refunds nothing")
			require.Equal(t, int64(14), minute(check(adapter, fresh, 0)))

			theirs := check(adapter, other, 4).GetLease().GetId()
			require.Zero(t, release(fid, theirs, 4), "another key's lease refunds nothing")
			require.Equal(t, int32(4), release(oid, theirs, 64), "at most what was granted, to its own key")
			require.Equal(t, int64(18), minute(check(adapter, other, 0)), "20 - 5 + 4 - 1")

			late := check(adapter, fresh, 4)
			require.Equal(t, int64(9), minute(late))
			clk.Advance(time.Duration(late.GetLease().GetValidMs())*time.Millisecond + limiter.ReleaseSlack)
			require.Zero(t, release(fid, late.GetLease().GetId(), 4), "an expired lease refunds nothing")
		})

		t.Run("bad releases are refused", func(t *testing.T) {
			for _, tc := range []struct {
				ctx  context.Context
				req  *authv1.ReleaseLeaseRequest
				code codes.Code
			}{
				{context.Background(), &authv1.ReleaseLeaseRequest{KeyId: id, UnusedUnits: 1}, codes.PermissionDenied},
				{adapter, &authv1.ReleaseLeaseRequest{KeyId: "nope", UnusedUnits: 1}, codes.InvalidArgument},
				{adapter, &authv1.ReleaseLeaseRequest{KeyId: id, UnusedUnits: 65}, codes.InvalidArgument},
				{adapter, &authv1.ReleaseLeaseRequest{KeyId: id, UnusedUnits: -1}, codes.InvalidArgument},
				{adapter, &authv1.ReleaseLeaseRequest{KeyId: id, UnusedUnits: 1}, codes.InvalidArgument},
				{adapter, &authv1.ReleaseLeaseRequest{KeyId: id, UnusedUnits: 1, LeaseId: "short"}, codes.InvalidArgument},
			} {
				_, err := in.Client.ReleaseLease(tc.ctx, tc.req)
				require.Equal(t, tc.code, status.Code(err), "%v", tc.req)
			}
		})
	})
}

// TestLeasesOff: BMCIS_AUTH_LEASE_MAX=0 grants none.
func TestLeasesOff(t *testing.T) {
	cfg := testConfig(t, "memory", nil)
	cfg.LeaseMax = 0
	in := authtest.Start(t, cfg, authtest.NewDB(t))
	key, _ := in.CreateKey(t, &authv1.CreateKeyRequest{Name: "k"})
	resp, err := in.Client.Check(authtest.Adapter(context.Background()), &authv1.CheckRequest{ApiKey: key, LeaseUnits: 8})
	require.NoError(t, err)
	require.True(t, resp.GetAllowed())
	require.Nil(t, resp.GetLease())
	require.Equal(t, int64(99), authtest.Tier(resp.GetRemaining(), "minute"))
}
