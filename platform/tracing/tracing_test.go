package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/tracing"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    tracing.Config
		wantErr string
	}{
		{"unset: off", map[string]string{}, tracing.Config{Protocol: tracing.ProtocolHTTP}, ""},
		{"endpoint: on over http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			tracing.Config{Enabled: true, Protocol: tracing.ProtocolHTTP, Endpoint: "http://collector:4318"}, ""},
		{"traces endpoint and grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			tracing.Config{Enabled: true, Protocol: tracing.ProtocolGRPC, Endpoint: "https://collector:4317"}, ""},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			tracing.Config{Enabled: true, Protocol: tracing.ProtocolGRPC, Endpoint: "http://c:4317"}, ""},
		{"credentials never kept", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:s3cret@collector:4318/otlp?token=x"},
			tracing.Config{Enabled: true, Protocol: tracing.ProtocolHTTP, Endpoint: "https://collector:4318/otlp"}, ""},
		{"SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"},
			tracing.Config{Protocol: tracing.ProtocolHTTP}, ""},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"},
			tracing.Config{Protocol: tracing.ProtocolHTTP}, ""},
		{"bad protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			tracing.Config{}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"unsupported exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, tracing.Config{}, "OTEL_TRACES_EXPORTER"},
		{"not a URL, and the value is not echoed", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector-s3cret:4318"},
			tracing.Config{}, "OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := config.FromMap(tc.env)
			got := tracing.LoadConfig(env)
			if tc.wantErr != "" {
				require.ErrorContains(t, env.Err(), tc.wantErr)
				require.NotContains(t, env.Err().Error(), "s3cret")
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, tc.want, got)
		})
	}
}

// Start exports to a real OTLP receiver over both protocols, and flushes
// what is buffered when stopped.
func TestStartExportsOverOTLP(t *testing.T) {
	for _, protocol := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			rcv := stacktest.StartOTLP(t)
			env := rcv.Env(protocol)
			env["OTEL_BSP_SCHEDULE_DELAY"] = "60000" // only the stop flushes
			for k, v := range env {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_SERVICE_NAME", "renamed")
			cfg := tracing.LoadConfig(config.FromEnv())
			require.True(t, cfg.Enabled)
			stop, err := tracing.Start(context.Background(), cfg, "unit", slog.New(slog.NewTextHandler(io.Discard, nil)))
			require.NoError(t, err)
			t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
			_, span := otel.Tracer("test").Start(context.Background(), "work")
			span.End()
			stop()
			spans := rcv.Spans()
			require.Len(t, spans, 1)
			require.Equal(t, "work", spans[0].Name)
			require.Equal(t, "renamed", spans[0].Service, "OTEL_SERVICE_NAME overrides the binary's name")
		})
	}
}

// Off, Start installs only the W3C propagator: no exporter, no provider.
func TestStartOffExportsNothing(t *testing.T) {
	stop, err := tracing.Start(context.Background(), tracing.Config{Protocol: tracing.ProtocolHTTP}, "unit", slog.Default())
	require.NoError(t, err)
	stop()
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	require.False(t, span.IsRecording())
	span.End()
	require.ElementsMatch(t, []string{"traceparent", "tracestate"}, otel.GetTextMapPropagator().Fields())
}

// The HTTP edge is public: a caller's trace context is linked, not adopted;
// probes get no span.
func TestHTTPHandler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	var seen trace.SpanContext
	h := tracing.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			seen = trace.SpanContextFromContext(r.Context())
		}
		_, _ = io.WriteString(w, "ok")
	}), "edge")
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Eventually(t, func() bool { return len(exp.GetSpans()) > 0 }, 5*time.Second, 10*time.Millisecond)
	spans := exp.GetSpans()
	require.Len(t, spans, 1, "probes have no spans")
	s := spans[0]
	require.True(t, seen.IsValid())
	require.Equal(t, s.SpanContext.TraceID(), seen.TraceID(), "the handler runs inside the server span")
	require.NotEqual(t, callerTrace, s.SpanContext.TraceID().String(), "a caller cannot choose the trace id")
	require.False(t, s.Parent.IsValid(), "the server span is a root")
	require.Len(t, s.Links, 1)
	require.Equal(t, callerTrace, s.Links[0].SpanContext.TraceID().String(), "the caller's span is linked")
}
