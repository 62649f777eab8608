package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// economyQuery is the demo-data query the token targets are measured on.
const economyQuery = "how do we handle a suspected security incident"

// figures measures an answer: its total tokens (the content blocks the
// model reads) and its overhead, everything but the results.
func figures(t *testing.T, a answer) (total, overhead int) {
	t.Helper()
	total = int(a.execution()["tokens_used"].(float64))
	results, err := json.Marshal(a.env["results"])
	require.NoError(t, err)
	return total, total - tokens.Count(string(results))
}

func TestTokenEconomyFigures(t *testing.T) {
	h := newReal(t)
	for _, format := range []string{"", "json", "markdown"} {
		for _, mode := range modes {
			args := map[string]any{"query": economyQuery, "response_mode": mode, "page_size": 10}
			if format != "" {
				args["format"] = format
			}
			a := h.call(tools.ToolSemanticSearch, args)
			total := int(a.execution()["tokens_used"].(float64))
			results, _ := json.Marshal(a.env["results"])
			var block string
			if len(a.blocks) > 0 {
				block = a.blocks[len(a.blocks)-1]
			}
			t.Logf("format=%q mode=%s total=%d results-json=%d cursor=%q", format, mode, total, tokens.Count(string(results)), a.pagination()["cursor"])
			if mode == "metadata" {
				t.Logf("%s", block[:min(len(block), 3000)])
			}
		}
	}
	tl, err := h.cli.ListTools(t.Context(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	var desc, input, output int
	for _, tool := range tl.Tools {
		desc += tokens.Count(tool.Description)
		in, _ := json.Marshal(tool.InputSchema)
		input += tokens.Count(string(in))
		out, _ := json.Marshal(tool.RawOutputSchema)
		output += tokens.Count(string(out))
	}
	t.Logf("tools/list: descriptions %d, input schemas %d, output schemas %d", desc, input, output)
	_ = strings.TrimSpace
}
