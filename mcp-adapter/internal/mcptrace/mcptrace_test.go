package mcptrace_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bmcis/knowledge/mcp-adapter/internal/mcptrace"
)

// A tool call through a real mcp-go server gives the request's server span
// with the tool's span inside it; the tool's handler runs in the tool span,
// and a tool error marks both spans.
func TestToolCallSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	var inHandler trace.SpanContext
	m := server.NewMCPServer("test", "1", server.WithToolCapabilities(false), mcptrace.ServerOption())
	m.AddTool(mcp.NewTool("echo"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		inHandler = trace.SpanContextFromContext(ctx)
		return mcp.NewToolResultText("ok"), nil
	})
	m.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("no"), nil
	})
	c, err := client.NewInProcessClient(m)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	_, err = c.Initialize(ctx, mcp.InitializeRequest{})
	require.NoError(t, err)
	exp.Reset()

	for _, name := range []string{"echo", "fail"} {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		_, err = c.CallTool(ctx, req)
		require.NoError(t, err)
	}

	spans := exp.GetSpans()
	require.Len(t, spans, 4)
	byName := map[string]tracetest.SpanStub{}
	var requests []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "mcp.tools/call" {
			requests = append(requests, s)
			continue
		}
		byName[s.Name] = s
	}
	require.Len(t, requests, 2)
	for i, name := range []string{"tool.echo", "tool.fail"} {
		tool, req := byName[name], requests[i]
		require.Equal(t, trace.SpanKindServer, req.SpanKind)
		require.Equal(t, trace.SpanKindInternal, tool.SpanKind)
		require.Equal(t, req.SpanContext.SpanID(), tool.Parent.SpanID(), "%s runs inside its request's span", name)
		require.Equal(t, req.SpanContext.TraceID(), tool.SpanContext.TraceID())
	}
	require.Equal(t, byName["tool.echo"].SpanContext.SpanID(), inHandler.SpanID(), "the handler runs in the tool span")
	require.Equal(t, codes.Unset, byName["tool.echo"].Status.Code)
	require.Equal(t, codes.Error, byName["tool.fail"].Status.Code)
	require.Equal(t, codes.Error, requests[1].Status.Code, "the request's span is marked too")
}
