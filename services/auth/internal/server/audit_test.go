package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/services/auth/internal/authtest"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

// TestAuditEvents appends batches as the two edges, lists them back as an
// operator with each filter and across pages, and shows who may do what:
// the edges append, only the admin lists.
func TestAuditEvents(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var batch []*authv1.AuditEvent
	for i := range 5 {
		batch = append(batch, &authv1.AuditEvent{
			Time: timestamppb.New(base.Add(time.Duration(i) * time.Minute)), Principal: "key1", PrincipalKind: "api_key",
			ClientAddress: "192.0.2.1", ClientName: "claude-ai", Tool: "semantic_search",
			Query: fmt.Sprintf("query %d", i), QuerySha256: "abc", ChunkIds: []int64{int64(i), 100}, Outcome: "ok", RequestId: "req",
			Edge: "forged", // the service sets the edge from the credential
		})
	}
	resp, err := in.Client.AppendAuditEvents(authtest.Adapter(ctx), &authv1.AppendAuditEventsRequest{Events: batch})
	require.NoError(t, err)
	require.Equal(t, int32(5), resp.GetAppended())
	_, err = in.Client.AppendAuditEvents(ctx, &authv1.AppendAuditEventsRequest{Events: []*authv1.AuditEvent{{
		Time: timestamppb.New(base.Add(time.Hour)), Principal: "key2", Tool: "GET /v1/chunks", Target: "/v1/chunks",
		Outcome: "NOT_FOUND",
	}}}) // the gateway's read credential
	require.NoError(t, err)

	admin := authtest.Admin(ctx)
	all, err := in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{})
	require.NoError(t, err)
	require.Len(t, all.GetEvents(), 6)
	first := all.GetEvents()[0] // newest first
	require.Equal(t, "key2", first.GetPrincipal())
	require.Equal(t, "read", first.GetEdge())
	require.Equal(t, "NOT_FOUND", first.GetOutcome())
	require.Empty(t, first.GetQuery())
	e := all.GetEvents()[1]
	require.Equal(t, "adapter", e.GetEdge())
	require.Equal(t, "query 4", e.GetQuery())
	require.Equal(t, []int64{4, 100}, e.GetChunkIds())
	require.Equal(t, "claude-ai", e.GetClientName())
	require.True(t, e.GetTime().AsTime().Equal(base.Add(4*time.Minute)))
	require.NotNil(t, e.GetRecordedAt())

	byPrincipal, err := in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{Principal: "key2"})
	require.NoError(t, err)
	require.Len(t, byPrincipal.GetEvents(), 1)
	byTool, err := in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{Tool: "semantic_search"})
	require.NoError(t, err)
	require.Len(t, byTool.GetEvents(), 5)
	since, err := in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{Since: timestamppb.New(base.Add(3 * time.Minute))})
	require.NoError(t, err)
	require.Len(t, since.GetEvents(), 3)

	// Pages of two: 2, 2, 2, and the last says there is no more.
	var seen []string
	token := ""
	for range 3 {
		page, err := in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{PageSize: 2, PageToken: token})
		require.NoError(t, err)
		require.Len(t, page.GetEvents(), 2)
		for _, e := range page.GetEvents() {
			seen = append(seen, e.GetQuery()+e.GetPrincipal())
		}
		token = page.GetNextPageToken()
	}
	require.Empty(t, token)
	require.Equal(t, []string{"key2", "query 4key1", "query 3key1", "query 2key1", "query 1key1", "query 0key1"}, seen)

	_, err = in.Client.ListAuditEvents(admin, &authv1.ListAuditEventsRequest{PageToken: "not-a-token"})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = in.Client.AppendAuditEvents(ctx, &authv1.AppendAuditEventsRequest{Events: []*authv1.AuditEvent{{Tool: "x"}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "an event without time or outcome")

	// Only operators read the trail; the edges' credentials may not.
	for name, c := range map[string]context.Context{"read": ctx, "adapter": authtest.Adapter(ctx)} {
		_, err := in.Client.ListAuditEvents(c, &authv1.ListAuditEventsRequest{})
		require.Equal(t, codes.PermissionDenied, status.Code(err), name)
	}
	_, err = in.Client.AppendAuditEvents(admin, &authv1.AppendAuditEventsRequest{Events: batch[:1]})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "the admin reads the trail, it does not write it")
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"400d": 400 * 24 * time.Hour, "0": 0, "48h": 48 * time.Hour, "1d": 24 * time.Hour} {
		got, err := server.ParseRetention(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"12h", "-1d", "x", "1.5d", ""} {
		_, err := server.ParseRetention(in)
		require.Error(t, err, in)
	}
}

// TestAuditEventsWithNUL appends an event whose caller-chosen text holds
// NUL bytes (a search query, a kb:// URI): PostgreSQL text cannot hold
// one, and a refused batch would take every other caller's entries in it
// down too (and stall the edge's recorder until its buffer drops them).
func TestAuditEventsWithNUL(t *testing.T) {
	in := authtest.Start(t, testConfig(t, "memory", nil), authtest.NewDB(t))
	ctx := context.Background()
	at := timestamppb.New(time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC))
	resp, err := in.Client.AppendAuditEvents(authtest.Adapter(ctx), &authv1.AppendAuditEventsRequest{Events: []*authv1.AuditEvent{
		{Time: at, Principal: "someone else", Tool: "semantic_search", Query: "plain", Outcome: "ok"},
		{Time: at, Principal: "key\x00", Tool: "read_resource", Target: "kb://doc/1\x00x", Query: "a\x00b",
			ClientName: "c\x00", Outcome: "ok"},
	}})
	require.NoError(t, err)
	require.Equal(t, int32(2), resp.GetAppended())
	list, err := in.Client.ListAuditEvents(authtest.Admin(ctx), &authv1.ListAuditEventsRequest{Tool: "read_resource"})
	require.NoError(t, err)
	require.Len(t, list.GetEvents(), 1)
	e := list.GetEvents()[0]
	require.Equal(t, "a\uFFFDb", e.GetQuery())
	require.Equal(t, "kb://doc/1\uFFFDx", e.GetTarget())
	require.Equal(t, "key\uFFFD", e.GetPrincipal())
	require.Equal(t, "c\uFFFD", e.GetClientName())
}
