package tools

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/platform/auditlog"
)

// accepting stands for auth's reply only: the benchmark measures what the
// call pays, which never waits on the append.
type accepting struct{}

func (accepting) AppendAuditEvents(_ context.Context, in *authv1.AppendAuditEventsRequest, _ ...grpc.CallOption) (*authv1.AppendAuditEventsResponse, error) {
	return &authv1.AppendAuditEventsResponse{Appended: int32(len(in.GetEvents()))}, nil
}

// BenchmarkAuditRecordCall is the adapter's whole audit step: noting the
// chunk and document of each of the 10 results the backend answered with
// (during the call), then at its end (Server.audit) reading the principal
// and client from the context, the chunks and documents (4 distinct) of
// the 10 results the final envelope kept, and Record.
func BenchmarkAuditRecordCall(b *testing.B) {
	rec, err := auditlog.New(accepting{}, auditlog.Config{QueryText: true, BufferSize: 1 << 18,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close(context.Background())
	s := newServer(Options{Audit: rec})
	ctx := withAuditNote(context.Background())
	n := noteOf(ctx)
	n.principal, n.kind, n.query = "k7f3a9c2", auditlog.KindAPIKey, "incident severity levels"
	env := &envelope.Envelope{}
	for i := range 10 {
		env.Results = append(env.Results, envelope.Object{{Key: "chunk_id", Value: int64(1000 + i)}, {Key: "rank", Value: i + 1}})
	}
	call := &respond.Call{Operation: ToolSemanticSearch, RequestID: "req_0123456789abcdef", Started: time.Now(), Final: env}
	docs := []string{"handbook:security/incidents.md", "handbook:security/severity.md", "runbooks/paging.md", "runbooks/escalation.md"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n.results = n.results[:0]
		for i := range 10 {
			noteResult(ctx, int64(1000+i), docs[i%len(docs)])
		}
		s.audit(ctx, call, nil)
	}
}
