package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/mcp-adapter/internal/backend"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/platform/limits"
)

// TestLimitsAgreeWithTheServices takes each tool argument a contract limit
// bounds (platform/limits, read from the protos' protovalidate rules) to the
// limit and one past it, at both layers over the real stack: the tool's
// input schema declares the limit; the tool takes the argument at the limit
// (and the service serves it) and refuses it one past with today's error
// code; the service, called directly, refuses the same request one past
// with INVALID_ARGUMENT naming its field.
func TestLimitsAgreeWithTheServices(t *testing.T) {
	h := newReal(t)
	ctx := context.Background()
	schemas := inputSchemas(t, h)
	ids := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	for _, c := range []struct {
		tool, arg string
		limit     limits.Limit
		args      func(n int) map[string]any
		refused   string // the tool's error code one past the limit
		service   func(c *backend.Clients, n int) error
	}{
		{
			tool: tools.ToolSemanticSearch, arg: "query", limit: limits.SearchQuery, refused: "QUERY_TOO_LONG",
			args: func(n int) map[string]any { return map[string]any{"query": strings.Repeat("é", n)} },
			service: func(c *backend.Clients, n int) error {
				_, err := c.Search.Search(ctx, limits.With(limits.SearchQuery, &searchv1.SearchRequest{Limit: 10}, n))
				return err
			},
		},
		{
			tool: tools.ToolSemanticSearch, arg: "page_size", limit: limits.SearchPageSize, refused: "INVALID_PARAMS",
			args: func(n int) map[string]any { return map[string]any{"query": "security", "page_size": n} },
			service: func(c *backend.Clients, n int) error {
				_, err := c.Search.Search(ctx, limits.With(limits.SearchPageSize, &searchv1.SearchRequest{Query: "security"}, n))
				return err
			},
		},
		{
			tool: tools.ToolSemanticSearch, arg: "top_k", limit: limits.SearchPageSize, refused: "INVALID_PARAMS",
			args: func(n int) map[string]any { return map[string]any{"query": "security", "top_k": n} },
		},
		{
			tool: tools.ToolGetChunks, arg: "chunk_ids", limit: limits.ChunkIDs, refused: "INVALID_PARAMS",
			args: func(n int) map[string]any { return map[string]any{"chunk_ids": ids(n)} },
			service: func(c *backend.Clients, n int) error {
				_, err := c.Search.GetChunks(ctx, limits.With(limits.ChunkIDs, &searchv1.GetChunksRequest{}, n))
				return err
			},
		},
		{
			tool: tools.ToolFindVendorInfo, arg: "vendor_name", limit: limits.VendorName, refused: "INVALID_PARAMS",
			args: func(n int) map[string]any { return map[string]any{"vendor_name": strings.Repeat("é", n)} },
			service: func(c *backend.Clients, n int) error {
				_, err := c.VendorGraph.GetVendor(ctx, limits.With(limits.VendorName, &vendorgraphv1.GetVendorRequest{}, n))
				return err
			},
		},
	} {
		t.Run(c.tool+"."+c.arg, func(t *testing.T) {
			prop, ok := schemas[c.tool]["properties"].(map[string]any)[c.arg].(map[string]any)
			require.True(t, ok, "%s has no input property %s", c.tool, c.arg)
			switch c.limit.Kind {
			case limits.Characters:
				require.EqualValues(t, c.limit.Max, prop["maxLength"])
			case limits.Value:
				require.EqualValues(t, c.limit.Min, prop["minimum"])
				require.EqualValues(t, c.limit.Max, prop["maximum"])
			case limits.Items:
				require.EqualValues(t, c.limit.Min, prop["minItems"])
				require.EqualValues(t, c.limit.Max, prop["maxItems"])
			}

			over, _ := c.limit.Over()
			at := h.call(c.tool, c.args(c.limit.Max))
			require.NotContains(t, []string{"INVALID_PARAMS", "QUERY_TOO_LONG"}, at.errCode(), "at the limit %d", c.limit.Max)
			require.Equal(t, c.refused, h.call(c.tool, c.args(over)).errCode(), "one past the limit, %d", over)
			if under, ok := c.limit.Under(); ok && c.limit.Kind != limits.Characters {
				// An empty string asks the user instead (needs_input).
				require.Equal(t, c.refused, h.call(c.tool, c.args(under)).errCode(), "one under the limit, %d", under)
			}
			if c.service == nil {
				return
			}
			require.NotEqual(t, codes.InvalidArgument, status.Code(c.service(h.realClients(), c.limit.Max)))
			err := c.service(h.realClients(), over)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			require.True(t, strings.HasPrefix(status.Convert(err).Message(), c.limit.Name()+": "), "%v", err)
		})
	}
}

// inputSchemas lists each tool's input schema as plain JSON values.
func inputSchemas(t *testing.T, h *harness) map[string]map[string]any {
	t.Helper()
	res, err := h.cli.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		out[tool.Name] = m
	}
	return out
}
