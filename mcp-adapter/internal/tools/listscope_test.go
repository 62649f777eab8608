package tools_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// A key's repeated tools/list within the allow cache's TTL asks auth once
// (an unscoped key pays one rate-limit unit, not one a list); that memory
// never starts a tool call's work early, and a refused or failed call
// forgets it, so the next list asks auth again.
func TestRepeatedListsAskAuthOnce(t *testing.T) {
	cache := allowcache.New(time.Minute, allowcache.DefaultMaxEntries)
	var scope tools.ListScope
	h := newHarness(t, func(o *tools.Options) {
		o.AllowCache = cache
		scope = tools.NewListScope(*o)
	})
	lists := func() int {
		return len(slices.DeleteFunc(h.env.Auth.Operations(), func(op string) bool { return op != tools.OpToolsList }))
	}
	ctx := context.Background()
	for range 3 {
		allowed, e := scope(ctx)
		require.Nil(t, e)
		require.Nil(t, allowed, "every tool")
	}
	require.Equal(t, 1, lists(), "one check for three lists")

	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "success", a.status())
	require.Zero(t, cache.Stats().Started, "a list's allow starts no call early")

	h.env.Auth.FailNext(statusErr(codes.PermissionDenied, "refused"))
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.NotEqual(t, "success", a.status())
	_, e := scope(ctx)
	require.Nil(t, e)
	require.Equal(t, 2, lists(), "a failed call's key is asked about again")
}

// A refused call forgets the list's memory and its own tool's allow, not
// another tool's: that allow still answers the key's lists until it ends
// (BMCIS_AUTH_ALLOW_CACHE_TTL), the staleness bound MCP.md states.
func TestListAfterARefusalReadsAnotherToolsAllow(t *testing.T) {
	cache := allowcache.New(time.Minute, allowcache.DefaultMaxEntries)
	var scope tools.ListScope
	h := newHarness(t, func(o *tools.Options) {
		o.AllowCache = cache
		scope = tools.NewListScope(*o)
	})
	lists := func() int {
		return len(slices.DeleteFunc(h.env.Auth.Operations(), func(op string) bool { return op != tools.OpToolsList }))
	}
	require.Equal(t, "success", h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}}).status())
	h.env.Auth.FailNext(statusErr(codes.PermissionDenied, "refused"))
	require.NotEqual(t, "success", h.call(tools.ToolSemanticSearch, map[string]any{"query": "backups"}).status())
	allowed, e := scope(context.Background())
	require.Nil(t, e)
	require.Nil(t, allowed, "every tool, as get_chunks was allowed")
	require.Zero(t, lists(), "answered from get_chunks's remembered allow")
}
