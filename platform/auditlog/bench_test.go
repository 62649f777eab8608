package auditlog_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
)

// accepting stands for the auth service's reply only: the benchmark
// measures what a read pays (Record), which never waits on the append.
type accepting struct{}

func (accepting) AppendAuditEvents(_ context.Context, in *authv1.AppendAuditEventsRequest, _ ...grpc.CallOption) (*authv1.AppendAuditEventsResponse, error) {
	return &authv1.AppendAuditEventsResponse{Appended: int32(len(in.GetEvents()))}, nil
}

// BenchmarkRecord is the audit's cost on a read's path: one Record of a
// search's entry (a query, ten chunk ids), with the sender draining the
// buffer beside it. "queued": the buffer has room (run it with a fixed
// -benchtime of at most 200000x); "full": every entry is dropped and
// counted, as while auth is down. docs/BENCHMARKS.md, "Audit trail".
func BenchmarkRecord(b *testing.B) {
	b.Run("queued", func(b *testing.B) { benchRecord(b, 1<<18) })
	b.Run("full", func(b *testing.B) { benchRecord(b, 1) })
}

func benchRecord(b *testing.B, buffer int) {
	r, err := auditlog.New(accepting{}, auditlog.Config{QueryText: true, BufferSize: buffer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(context.Background())
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r.Record(auditlog.Entry{
			Time: now, Principal: "k7f3a9c2", PrincipalKind: auditlog.KindAPIKey, ClientAddress: "192.0.2.10",
			ClientName: "claude-ai", Tool: "semantic_search", Query: "which vendors handle payroll in the EU",
			ChunkIDs: ids, Outcome: auditlog.OK, RequestID: "req_0123456789abcdef",
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(r.Dropped()), "dropped")
}
