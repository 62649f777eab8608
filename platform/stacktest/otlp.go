package stacktest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one span an OTLPReceiver received, flattened for assertions.
type Span struct {
	// Service is the exporting process's service.name resource attribute.
	Service  string
	Name     string
	Kind     tracepb.Span_SpanKind
	TraceID  string // hex
	SpanID   string // hex
	ParentID string // hex; empty for a trace's root
	// Attrs holds the span's string, integer and boolean attributes as text.
	Attrs map[string]string
}

// OTLPReceiver is a small OpenTelemetry collector for tests: it accepts
// trace exports over OTLP/gRPC and OTLP/HTTP (protobuf), the two protocols
// platform/tracing exports with, and keeps every span.
type OTLPReceiver struct {
	collectortrace.UnimplementedTraceServiceServer

	grpcAddr, httpAddr string

	mu    sync.Mutex
	spans []Span
}

// StartOTLP starts a receiver on loopback ports; it stops when the test ends.
func StartOTLP(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, r)
	go func() { _ = gs.Serve(gl) }()
	r.grpcAddr = gl.Addr().String()

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	r.httpAddr = hl.Addr().String()

	t.Cleanup(func() {
		gs.Stop()
		_ = hs.Close()
	})
	return r
}

// Env is the environment that makes a BMCIS binary export its spans here
// over protocol ("grpc" or "http/protobuf"), in batches sent every 100 ms.
func (r *OTLPReceiver) Env(protocol string) map[string]string {
	addr := r.httpAddr
	if protocol == "grpc" {
		addr = r.grpcAddr
	}
	return map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr,
		"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_BSP_SCHEDULE_DELAY":     "100",
	}
}

// Export is the OTLP/gRPC trace service.
func (r *OTLPReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveHTTP is the OTLP/HTTP trace endpoint (binary protobuf).
func (r *OTLPReceiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not an OTLP protobuf trace export: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *OTLPReceiver) add(req *collectortrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					Service:  service,
					Name:     s.GetName(),
					Kind:     s.GetKind(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Attrs:    attrs(s.GetAttributes()),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		}
	}
	return out
}

// Spans returns every span received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Trace returns the spans received so far of one trace.
func (r *OTLPReceiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// RequireOneTree fails the test unless the spans received of traceID form
// one tree: a single root, and every other span's parent in the trace. It
// returns the root and the spans by span id.
func (r *OTLPReceiver) RequireOneTree(t testing.TB, traceID string) (root Span, byID map[string]Span) {
	t.Helper()
	spans := r.Trace(traceID)
	byID = make(map[string]Span, len(spans))
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentID == "" {
			roots = append(roots, s)
		} else if _, ok := byID[s.ParentID]; !ok {
			t.Fatalf("stacktest: span %s %q of trace %s has a parent outside the trace", s.Service, s.Name, traceID)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("stacktest: trace %s has %d roots, want 1: %v", traceID, len(roots), roots)
	}
	return roots[0], byID
}
