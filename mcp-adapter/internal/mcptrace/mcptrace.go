// Package mcptrace connects mcp-go's tracing hooks to OpenTelemetry: every
// MCP request gets a span ("mcp.tools/call", a server span, the root of the
// trace on stdio and the child of the HTTP span on streamable HTTP), and
// every tool handler a "tool.<name>" span inside it. The gRPC calls a tool
// makes are children of that span, so one tool call is one trace down to
// the services' database queries.
//
// The spans come from the global tracer provider, which platform/tracing
// sets up; without an OTLP endpoint it is the no-op one.
package mcptrace

import (
	"context"

	"github.com/mark3labs/mcp-go/server"
	mcptracing "github.com/mark3labs/mcp-go/tracing"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names the spans' source.
const instrumentation = "github.com/bmcis/knowledge/mcp-adapter/internal/mcptrace"

// ServerOption installs the tracer on an MCP server.
func ServerOption() server.ServerOption { return server.WithTracer(tracer{}) }

type tracer struct{}

var kinds = map[mcptracing.SpanKind]trace.SpanKind{
	mcptracing.SpanKindServer:   trace.SpanKindServer,
	mcptracing.SpanKindClient:   trace.SpanKindClient,
	mcptracing.SpanKindInternal: trace.SpanKindInternal,
}

func (tracer) Start(ctx context.Context, name string, kind mcptracing.SpanKind, attrs ...mcptracing.Attribute) (context.Context, mcptracing.Span) {
	kv := make([]attribute.KeyValue, len(attrs))
	for i, a := range attrs {
		kv[i] = attribute.String(a.Key, a.Value)
	}
	k, ok := kinds[kind]
	if !ok {
		k = trace.SpanKindInternal
	}
	// The tracer is looked up per span so a provider installed after the
	// server was built is used.
	ctx, s := otel.Tracer(instrumentation).Start(ctx, name, trace.WithSpanKind(k), trace.WithAttributes(kv...))
	sp := span{s}
	// mcp-go finds the request's span here to tag it with the tool name.
	return mcptracing.ContextWithSpan(ctx, sp), sp
}

type span struct{ s trace.Span }

func (s span) SetAttributes(attrs ...mcptracing.Attribute) {
	for _, a := range attrs {
		s.s.SetAttributes(attribute.String(a.Key, a.Value))
	}
}

func (s span) RecordError(err error) { s.s.RecordError(err) }

func (s span) SetStatus(code mcptracing.StatusCode, description string) {
	switch code {
	case mcptracing.StatusError:
		s.s.SetStatus(codes.Error, description)
	case mcptracing.StatusOK:
		s.s.SetStatus(codes.Ok, description)
	}
}

func (s span) End() { s.s.End() }
