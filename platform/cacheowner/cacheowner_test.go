package cacheowner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/bmcis/knowledge/platform/cacheowner"
)

// asReceived is ctx's outgoing metadata as the service receives it.
func asReceived(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	return metadata.NewIncomingContext(context.Background(), md)
}

func TestOwnerTravelsAsDigest(t *testing.T) {
	ctx := cacheowner.With(context.Background(), "bmcis_live_secretkey")
	got := cacheowner.FromIncoming(asReceived(cacheowner.Outgoing(ctx)))
	require.Equal(t, cacheowner.Digest("bmcis_live_secretkey"), got)
	require.Len(t, got, 32)
	require.NotContains(t, got, "secretkey", "the key itself never travels")
	require.NotEqual(t, got, cacheowner.Digest("bmcis_live_otherkey"))

	// No credential, no owner: every such caller shares the owner "".
	none := cacheowner.With(context.Background(), "")
	require.Empty(t, cacheowner.FromIncoming(asReceived(cacheowner.Outgoing(none))))
}

// What an edge did not send well names no owner: two values, or a value
// that is not a digest (its size would go into every cache key).
func TestMalformedOwnerIsNone(t *testing.T) {
	d := cacheowner.Digest("k")
	for name, vals := range map[string][]string{
		"two owners": {d, cacheowner.Digest("other")},
		"not hex":    {"zz" + d[2:]},
		"too long":   {d + d},
		"empty":      {""},
	} {
		md := metadata.MD{cacheowner.Header: vals}
		require.Empty(t, cacheowner.FromIncoming(metadata.NewIncomingContext(context.Background(), md)), name)
	}
}
