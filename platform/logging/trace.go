package logging

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the trace context on a log line.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// traceHandler adds the trace and span ids of the span in a record's
// context. A line logged without a context (logger.Info) falls back to the
// span the logger was bound to by FromContext, if any.
type traceHandler struct {
	next  slog.Handler
	bound trace.SpanContext
}

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = h.bound
	}
	if sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()), slog.String(SpanIDKey, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{next: h.next.WithAttrs(attrs), bound: h.bound}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{next: h.next.WithGroup(name), bound: h.bound}
}

// bindSpan returns l bound to ctx's span, when ctx has one and l is one of
// this package's loggers.
func bindSpan(l *slog.Logger, ctx context.Context) *slog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return l
	}
	h, ok := l.Handler().(traceHandler)
	if !ok || h.bound.Equal(sc) {
		return l
	}
	h.bound = sc
	return slog.New(h)
}
