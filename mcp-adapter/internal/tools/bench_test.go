package tools_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/platform/auditlog"
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

// BenchmarkAuthFirst is what authenticating before any backend work costs
// a tool call against the real services (demo stack, in-process MCP
// client): "check-then-call" waits for auth.Check before the backend call
// (allow cache off); "allow-cache" lets a key allowed a moment ago run
// both at once (the default). docs/BENCHMARKS.md records the figures.
func BenchmarkAuthFirst(b *testing.B) {
	calls := []struct {
		name string
		args map[string]any
	}{
		{tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "page_size": 10}},
		{tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"}},
	}
	for _, c := range calls {
		for _, mode := range []string{"check-then-call", "allow-cache"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				var hopts []harnessOpt
				if mode == "check-then-call" {
					hopts = append(hopts, func(o *tools.Options) { o.AllowCache = nil })
				}
				h := newRealWithClient(b, nil, nil, hopts)
				req := mcp.CallToolRequest{}
				req.Params.Name = c.name
				req.Params.Arguments = c.args
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
}

// BenchmarkAuditOverhead is what the audit trail adds to a tool call
// against the real services (demo stack, in-process MCP client, a cached
// metadata page of 10): "off" records nothing, "on" records every call
// through platform/auditlog to the real auth service. docs/BENCHMARKS.md
// ("Audit trail") records the figures.
func BenchmarkAuditOverhead(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			var hopts []harnessOpt
			if mode == "on" {
				hopts = append(hopts, func(o *tools.Options) {
					rec, err := auditlog.New(o.Clients.Auth, auditlog.Config{QueryText: true})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { rec.Close(context.Background()) })
					o.Audit = rec
				})
			}
			h := newRealWithClient(b, nil, nil, hopts)
			req := mcp.CallToolRequest{}
			req.Params.Name = tools.ToolSemanticSearch
			req.Params.Arguments = map[string]any{"query": "incident severity levels", "page_size": 10}
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
