package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// TestLimitsEnforced holds the service to every limit of its requests in
// platform/limits, the table the MCP adapter's tests hold the adapter to:
// at either end of a limit the request is not refused as invalid (an
// unknown name is NOT_FOUND), one past it is refused with INVALID_ARGUMENT
// naming the field.
func TestLimitsEnforced(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	call := map[protoreflect.FullName]func(limits.Limit, int) error{
		"bmcis.vendorgraph.v1.GetVendorRequest": func(l limits.Limit, n int) error {
			_, err := rep.client.GetVendor(ctx, limits.With(l, &vendorgraphv1.GetVendorRequest{Name: "Initech"}, n))
			return err
		},
		"bmcis.vendorgraph.v1.SuggestVendorsRequest": func(l limits.Limit, n int) error {
			_, err := rep.client.SuggestVendors(ctx, limits.With(l, &vendorgraphv1.SuggestVendorsRequest{Text: "ini"}, n))
			return err
		},
	}
	accepted := func(t *testing.T, err error, n int) {
		t.Helper()
		require.NotEqual(t, codes.InvalidArgument, status.Code(err), "at %d: %v", n, err)
	}
	refused := func(t *testing.T, err error, field string) {
		t.Helper()
		requireCode(t, err, codes.InvalidArgument)
		require.Equal(t, field, detail[*errdetails.BadRequest](t, err).GetFieldViolations()[0].GetField())
	}
	checked := 0
	for _, l := range limits.All() {
		do, ok := call[l.Message()]
		if !ok {
			continue
		}
		checked++
		t.Run(string(l.Message().Name())+"."+l.Name(), func(t *testing.T) {
			accepted(t, do(l, l.Min), l.Min)
			if n, ok := l.Over(); ok {
				accepted(t, do(l, l.Max), l.Max)
				refused(t, do(l, n), l.Name())
			}
			if n, ok := l.Under(); ok {
				refused(t, do(l, n), l.Name())
			}
		})
	}
	require.Equal(t, 7, checked, "GetVendor's five limits and SuggestVendors' two")
}
