package tools_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// Prompts, vendor_name completions, resource links, titles and icons,
// against the real services with the demo data.
func TestPromptsCompletionsLinksTitles(t *testing.T) {
	h := newReal(t)
	ctx := t.Context()

	t.Run("prompts", func(t *testing.T) {
		pl, err := h.cli.ListPrompts(ctx, mcp.ListPromptsRequest{})
		require.NoError(t, err)
		names := map[string]mcp.Prompt{}
		for _, p := range pl.Prompts {
			names[p.Name] = p
			require.NotEmpty(t, p.Title, p.Name)
			require.NotEmpty(t, p.Icons, p.Name)
			require.True(t, p.Arguments[0].Required, p.Name)
		}
		require.Contains(t, names, tools.PromptResearchVendor)
		require.Contains(t, names, tools.PromptFindAndCite)

		req := mcp.GetPromptRequest{}
		req.Params.Name = tools.PromptResearchVendor
		req.Params.Arguments = map[string]string{"vendor_name": "Globex"}
		res, err := h.cli.GetPrompt(ctx, req)
		require.NoError(t, err)
		text := res.Messages[0].Content.(mcp.TextContent).Text
		require.Contains(t, text, `find_vendor_info with vendor_name "Globex"`)
		require.Contains(t, text, "kb://chunks/")

		req.Params.Name = tools.PromptFindAndCite
		req.Params.Arguments = map[string]string{"question": "  "}
		_, err = h.cli.GetPrompt(ctx, req)
		require.ErrorContains(t, err, "question argument is required")
	})

	complete := func(h *harness, ref any, name, value string) []string {
		req := mcp.CompleteRequest{}
		req.Params.Ref = ref
		req.Params.Argument = mcp.CompleteArgument{Name: name, Value: value}
		res, err := h.cli.Complete(ctx, req)
		require.NoError(t, err)
		return res.Completion.Values
	}
	promptRef := mcp.PromptReference{Type: "ref/prompt", Name: tools.PromptResearchVendor}
	templateRef := mcp.ResourceReference{Type: "ref/resource", URI: tools.VendorURITemplate}

	t.Run("vendor_name completes from the graph", func(t *testing.T) {
		for _, ref := range []any{promptRef, templateRef} {
			got := complete(h, ref, "vendor_name", "acm")
			require.Subset(t, got, []string{"ACME Inc", "Acme Corp", "Acme Ltd"}, "%T", ref)
		}
		require.Empty(t, complete(h, mcp.PromptReference{Type: "ref/prompt", Name: tools.PromptFindAndCite}, "question", "acm"))
	})

	t.Run("no key, no vendor names", func(t *testing.T) {
		keyless := newRealWithClient(t, nil, nil, []harnessOpt{func(o *tools.Options) {
			o.Key = func(context.Context) string { return "" }
		}})
		require.Empty(t, complete(keyless, promptRef, "vendor_name", "acm"))
	})

	t.Run("resource links to the top results", func(t *testing.T) {
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": economyQuery, "response_mode": "ids_only", "page_size": 10})
		require.Len(t, a.links, 3)
		for i, l := range a.links {
			id := int64(a.results()[i]["chunk_id"].(float64))
			require.Equal(t, "kb://chunks/"+strconv.FormatInt(id, 10), l.URI)
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = l.URI
			res, err := h.cli.ReadResource(ctx, rr)
			require.NoError(t, err, "the link opens")
			require.NotEmpty(t, res.Contents)
		}
		checkTokens(t, a) // tokens_used counts the links
		full := h.call(tools.ToolSemanticSearch, map[string]any{"query": economyQuery, "response_mode": "full", "page_size": 3})
		require.Empty(t, full.links, "results that carry their text need no link")
	})

	t.Run("titles and icons", func(t *testing.T) {
		tl, err := h.cli.ListTools(ctx, mcp.ListToolsRequest{})
		require.NoError(t, err)
		for _, tool := range tl.Tools {
			require.NotEmpty(t, tool.Title, tool.Name)
			require.Equal(t, tool.Title, tool.Annotations.Title, tool.Name)
			require.Len(t, tool.Icons, 1, tool.Name)
			require.Equal(t, "image/svg+xml", tool.Icons[0].MIMEType)
		}
	})
}
