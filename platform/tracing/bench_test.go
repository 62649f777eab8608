package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/tracing"
)

type emptyService struct {
	testpb.UnimplementedTestServiceServer
}

func (emptyService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// BenchmarkUnaryCall measures one empty unary call over loopback TCP
// through the product's server (grpcserver: interceptors, a JSON log line
// per call) and client (grpcclient), with tracing off (no endpoint: the
// instrumentation runs against the no-op provider) and on (every call
// sampled, spans batched over OTLP/gRPC to a receiver in this process).
// "bare" is plain gRPC without the product's server and client, and
// "bare+otel-off" adds only the otelgrpc handlers with tracing off: their
// difference is the instrumentation's own cost when tracing is off.
//
//	go test -run '^$' -bench UnaryCall -benchmem ./platform/tracing/
func BenchmarkUnaryCall(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchBare(b, false) })
	b.Run("bare+otel-off", func(b *testing.B) { benchBare(b, true) })
	b.Run("product/tracing-off", func(b *testing.B) { benchProduct(b, false) })
	b.Run("product/tracing-on", func(b *testing.B) { benchProduct(b, true) })
}

func benchBare(b *testing.B, instrumented bool) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	var sopts []grpc.ServerOption
	copts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if instrumented {
		sopts = append(sopts, grpc.StatsHandler(tracing.ServerHandler()))
		copts = append(copts, grpc.WithStatsHandler(tracing.ClientHandler()))
	}
	gs := grpc.NewServer(sopts...)
	testpb.RegisterTestServiceServer(gs, emptyService{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), copts...)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	run(b, testpb.NewTestServiceClient(conn))
}

func benchProduct(b *testing.B, on bool) {
	otel.SetTracerProvider(noop.NewTracerProvider())
	stop := func() {}
	if on {
		rcv := stacktest.StartOTLP(b)
		for k, v := range rcv.Env(tracing.ProtocolGRPC) {
			b.Setenv(k, v)
		}
		b.Setenv("OTEL_BSP_SCHEDULE_DELAY", "") // the default batching
		cfg := tracing.LoadConfig(config.FromEnv())
		var err error
		stop, err = tracing.Start(context.Background(), cfg, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { otel.SetTracerProvider(noop.NewTracerProvider()) }()
	}
	defer stop()
	srv := grpcserver.New(grpcserver.Settings{Name: "bench", LogLevel: "info"}, grpcserver.WithLogOutput(io.Discard))
	testpb.RegisterTestServiceServer(srv.GRPC(), emptyService{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	conn, err := grpcclient.Dial(lis.Addr().String(), "")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	run(b, testpb.NewTestServiceClient(conn))
}

func run(b *testing.B, c testpb.TestServiceClient) {
	ctx := context.Background()
	if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil { // connect first
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time (client, server and exporter: one process) varies less than
	// wall time on a machine shared with other work.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
