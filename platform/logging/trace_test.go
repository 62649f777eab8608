package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func spanCtx(t *testing.T, traceHex, spanHex string) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceHex)
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex(spanHex)
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// Every line logged inside a traced call carries its trace and span ids:
// logged with the context, or through the logger FromContext bound to it.
func TestLogLinesCarryTheTraceContext(t *testing.T) {
	const (
		traceA = "0af7651916cd43dd8448eb211c80319c"
		spanA  = "b7ad6b7169203331"
		traceB = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanB  = "00f067aa0ba902b7"
	)
	tests := []struct {
		name      string
		log       func(l *testingLogger)
		wantTrace string
		wantSpan  string
	}{
		{"no span, no ids", func(l *testingLogger) { l.base.InfoContext(context.Background(), "x") }, "", ""},
		{"span in the record's context", func(l *testingLogger) { l.base.InfoContext(spanCtx(t, traceA, spanA), "x") }, traceA, spanA},
		{"logger bound by FromContext, logged without a context", func(l *testingLogger) {
			ctx := WithLogger(spanCtx(t, traceA, spanA), l.base.With("request_id", "req_1"))
			FromContext(ctx).Info("x")
		}, traceA, spanA},
		{"the record's own span wins over the bound one", func(l *testingLogger) {
			ctx := WithLogger(spanCtx(t, traceA, spanA), l.base)
			FromContext(ctx).InfoContext(spanCtx(t, traceB, spanB), "x")
		}, traceB, spanB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestingLogger()
			tc.log(l)
			line := l.line(t)
			require.Equal(t, "svc", line["service"])
			if tc.wantTrace == "" {
				require.NotContains(t, line, TraceIDKey)
				require.NotContains(t, line, SpanIDKey)
				return
			}
			require.Equal(t, tc.wantTrace, line[TraceIDKey])
			require.Equal(t, tc.wantSpan, line[SpanIDKey])
		})
	}
}

type testingLogger struct {
	buf  bytes.Buffer
	base *slog.Logger
}

func newTestingLogger() *testingLogger {
	l := &testingLogger{}
	l.base = New(&l.buf, "svc", "info")
	return l
}

func (l *testingLogger) line(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(l.buf.Bytes(), &m), l.buf.String())
	return m
}
