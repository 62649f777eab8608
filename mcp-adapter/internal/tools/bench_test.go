package tools_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// BenchmarkSemanticSearchMetadata measures one cached metadata page of 10
// through the adapter alone (in-process MCP client, stand-in backends over
// bufconn), to watch the adapter's own cost. The end-to-end benchmark
// against the real services is e2e.TestBenchEndToEnd (docs/BENCHMARKS.md).
func BenchmarkSemanticSearchMetadata(b *testing.B) {
	for _, format := range []string{"json", "markdown", "both"} {
		b.Run(format, func(b *testing.B) {
			h := newHarness(b, func(o *tools.Options) { o.ValidateOutput = false })
			req := mcp.CallToolRequest{}
			req.Params.Name = tools.ToolSemanticSearch
			req.Params.Arguments = map[string]any{"query": "incident severity levels", "page_size": 10, "format": format}
			ctx := context.Background()
			if _, err := h.cli.CallTool(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := h.cli.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
