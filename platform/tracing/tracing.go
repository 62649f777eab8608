// Package tracing is the one home of OpenTelemetry traces: it reads the
// standard OTEL_* variables, installs the W3C trace-context propagator and,
// when an OTLP endpoint is set, a tracer provider that batches spans to it.
// It also hands out the gRPC and HTTP instrumentation every binary wires in.
//
// Without OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// nothing is exported and the global tracer provider stays OpenTelemetry's
// no-op one: spans are not recorded, but a trace context that arrives with a
// call still flows on to the next service and into the log lines.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/stats"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/rpcauth"
	"github.com/bmcis/knowledge/platform/version"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config says whether and how spans are exported. The exporters, the
// sampler and the batcher read the rest of the standard variables
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _INSECURE, OTEL_TRACES_SAMPLER,
// OTEL_BSP_*...) themselves.
type Config struct {
	// Enabled: an endpoint is set and OTEL_SDK_DISABLED is not true.
	Enabled bool
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Endpoint is the collector's address, without credentials, for the
	// start-up log line.
	Endpoint string
}

// LoadConfig reads the OTEL_* variables; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	endpointVar := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	endpoint := env.String(endpointVar, "")
	if endpoint == "" {
		endpointVar = "OTEL_EXPORTER_OTLP_ENDPOINT"
		endpoint = env.String(endpointVar, "")
	}
	protoVar := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	proto := env.String(protoVar, "")
	if proto == "" {
		protoVar = "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	c := Config{
		// http/protobuf is the specification's default.
		Protocol: env.Enum(protoVar, ProtocolHTTP, ProtocolHTTP, ProtocolGRPC),
	}
	disabled := env.Bool("OTEL_SDK_DISABLED", false) ||
		env.Enum("OTEL_TRACES_EXPORTER", "otlp", "otlp", "none") == "none"
	if endpoint == "" || disabled {
		return c
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may carry credentials: never echo it.
		env.Failf(endpointVar, "must be an http:// or https:// URL such as http://otel-collector:4318")
		return c
	}
	c.Enabled = true
	c.Endpoint = u.Scheme + "://" + u.Host + u.Path
	return c
}

// flushTimeout bounds the wait for the last spans on the way out.
const flushTimeout = 5 * time.Second

// Start installs the propagator and, when cfg.Enabled, the exporting tracer
// provider named after service (OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override). The returned stop sends the spans
// still buffered (waiting flushTimeout at most); call it once, on the way
// out.
func Start(ctx context.Context, cfg Config, service string, log *slog.Logger) (stop func(), err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !cfg.Enabled {
		return func() {}, nil
	}
	var exp sdktrace.SpanExporter
	switch cfg.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", service),
			attribute.String("service.version", version.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler follows OTEL_TRACES_SAMPLER (default: parent-based, always
	// on) and the batcher OTEL_BSP_*.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	// Export failures go to the service log, not to stderr's bare text.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "error", err.Error())
	}))
	log.Info("tracing: exporting spans over OTLP", "protocol", cfg.Protocol, "endpoint", cfg.Endpoint)
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: flush on exit failed", "error", err.Error())
		}
	}, nil
}

// traced reports whether a gRPC method gets spans: health checks and
// reflection (probes, every few seconds) would drown the real calls.
func traced(info *stats.RPCTagInfo) bool { return !rpcauth.Exempt(info.FullMethodName) }

// ServerHandler is the gRPC server's span source (grpc.StatsHandler): one
// server span per call, the child of the caller's (traceparent metadata).
func ServerHandler() stats.Handler {
	return otelgrpc.NewServerHandler(otelgrpc.WithFilter(traced))
}

// ClientHandler is a gRPC client's span source (grpc.WithStatsHandler): one
// client span per call, its context sent along as traceparent metadata.
func ClientHandler() stats.Handler {
	return otelgrpc.NewClientHandler(otelgrpc.WithFilter(traced))
}

// probePaths are answered without spans: probes and scrapes, not work.
var probePaths = []string{"/healthz", "/readyz", "/livez", "/metrics"}

// HTTPHandler gives every request to h a server span named operation. The
// edge is public: a caller's traceparent becomes a link, not the parent, so
// outside callers can neither pick trace ids nor force sampling.
func HTTPHandler(h http.Handler, operation string) http.Handler {
	return otelhttp.NewHandler(h, operation,
		otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }),
		otelhttp.WithFilter(func(r *http.Request) bool {
			for _, p := range probePaths {
				if r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/") {
					return false
				}
			}
			return true
		}))
}
