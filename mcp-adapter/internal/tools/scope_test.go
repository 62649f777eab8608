package tools_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// scopedKeys are keys of the demo stack with read scopes, made once.
var scopedKeys = map[string]string{}

func scopedKey(t *testing.T, name string, k stacktest.Key) string {
	t.Helper()
	s := demoStack(t)
	realKeys.Lock()
	defer realKeys.Unlock()
	if scopedKeys[name] == "" {
		k.Name, k.Owner = name, "mcp-tests"
		k.PerMinute, k.PerHour, k.PerDay = 1_000_000, 10_000_000, 100_000_000
		scopedKeys[name] = s.CreateKey(t, k)
	}
	return scopedKeys[name]
}

// allPages follows the cursor of a query to the end and returns every
// result.
func allPages(h *harness, args map[string]any) ([]map[string]any, int) {
	var out []map[string]any
	total := -1
	for {
		a := h.call(tools.ToolSemanticSearch, args)
		require.Equal(h.t, "success", a.status(), "%v", a.env["error"])
		out = append(out, a.results()...)
		p := a.pagination()
		if total < 0 {
			total = int(p["total_available"].(float64))
		}
		if p["has_more"] != true {
			return out, total
		}
		args = map[string]any{"query": args["query"], "cursor": p["cursor"], "response_mode": args["response_mode"], "page_size": args["page_size"]}
	}
}

// TestCategoryScopedKey: a key limited to one category never sees another
// category's chunk through semantic_search (any page, any mode), get_chunks
// or kb://chunks, and the totals count only its category.
func TestCategoryScopedKey(t *testing.T) {
	open := newReal(t)
	key := scopedKey(t, "security-only", stacktest.Key{Categories: []string{"security"}})
	h := newRealWithClient(t, nil, nil, []harnessOpt{withKey(key)})

	queries := []string{"security incident reporting", "oauth2 authorization code flow", "cloud provider data platform vendor"}
	others := map[string]int64{} // category -> a chunk of it
	var mine int64
	for _, q := range queries {
		openAll, openTotal := allPages(open, map[string]any{"query": q, "response_mode": "ids_only", "page_size": 50})
		require.Len(t, openAll, openTotal)
		for _, mode := range []string{"metadata", "preview", "full"} {
			t.Run(fmt.Sprintf("%s/%s", q, mode), func(t *testing.T) {
				got, total := allPages(h, map[string]any{"query": q, "response_mode": mode, "page_size": 7})
				require.Len(t, got, total, "total_available counts exactly what the key can page through")
				require.Less(t, total, openTotal, "the open list holds other categories")
				for _, r := range got {
					require.Equal(t, "security", r["source_category"], "chunk %v", r["chunk_id"])
					mine = int64(r["chunk_id"].(float64))
				}
			})
		}
		meta, _ := allPages(open, map[string]any{"query": q, "response_mode": "metadata", "page_size": 50})
		for _, r := range meta {
			if c := r["source_category"].(string); c != "security" {
				others[c] = int64(r["chunk_id"].(float64))
			}
		}
	}
	require.NotZero(t, mine)
	require.GreaterOrEqual(t, len(others), 2, "the queries reach other categories: %v", others)

	for cat, id := range others {
		t.Run("get_chunks "+cat, func(t *testing.T) {
			a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{id, mine}, "response_mode": "metadata"})
			res := a.results()
			require.Len(t, res, 1)
			require.Equal(t, float64(mine), res[0]["chunk_id"])
			require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS", "the other chunk is reported missing, like an unknown id")

			full := open.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{id}})
			text := full.results()[0]["chunk_text"].(string)
			rc, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: fmt.Sprintf("kb://chunks/%d", id)}})
			require.NoError(t, err)
			for _, c := range rc.Contents {
				require.NotContains(t, c.(mcp.TextResourceContents).Text, text)
			}
			require.Contains(t, rc.Contents[len(rc.Contents)-1].(mcp.TextResourceContents).Text, "PARTIAL_RESULTS")
		})
	}
	t.Run("kb://chunks of its own category", func(t *testing.T) {
		rc, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: fmt.Sprintf("kb://chunks/%d", mine)}})
		require.NoError(t, err)
		require.Contains(t, rc.Contents[len(rc.Contents)-1].(mcp.TextResourceContents).Text, `"status":"success"`)
	})
}

// TestToolScopedKey: a key limited to tools gets a clear refusal on the
// others, as a tool and as a resource, and works on its own.
func TestToolScopedKey(t *testing.T) {
	key := scopedKey(t, "no-vendor-graph", stacktest.Key{Tools: []string{tools.ToolSemanticSearch, tools.ToolGetChunks}})
	h := newRealWithClient(t, nil, nil, []harnessOpt{withKey(key)})

	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "security incident reporting", "page_size": 2})
	require.Equal(t, "success", a.status())

	a = h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Acme Corp"})
	require.Equal(t, "AUTH_INVALID", a.errCode())
	e := a.errObj()
	require.Equal(t, "This API key may not use find_vendor_info; it may use: semantic_search, get_chunks.", e["message"])
	require.Equal(t, "TOOL_NOT_ALLOWED", e["details"].(map[string]any)["reason"])
	require.Contains(t, e["suggestion"], "ask your BMCIS administrator")

	rc, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "kb://vendors/Acme%20Corp"}})
	require.NoError(t, err)
	last := rc.Contents[len(rc.Contents)-1].(mcp.TextResourceContents).Text
	require.Contains(t, last, "TOOL_NOT_ALLOWED")
	require.NotContains(t, last, "Acme Cloud Platform")
}
