package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// TestIngestOfALargeDocumentStopsAtItsDeadline: a document far too large
// to prepare before the call's deadline (a 600 KB DOCX of 60,000 pages:
// about 7 s to extract and chunk on two busy cores, 80,000 chunks) ends
// the call with DeadlineExceeded soon after the deadline, by the service's
// own account (its edge's status and latency), and nothing is written.
func TestIngestOfALargeDocumentStopsAtItsDeadline(t *testing.T) {
	r, pool := start(t)
	var big sample.Doc
	for range 20000 {
		big.Pages = append(big.Pages, sample.Handbook.Pages...)
	}
	doc := &searchv1.Document{ExternalId: "big.docx", SourceFile: "big.docx", FormatName: "docx", Content: sample.DOCX(big)}

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	stream, err := r.client.IngestDocuments(ctx)
	require.NoError(t, err)
	err = stream.Send(&searchv1.IngestDocumentsRequest{Document: doc})
	if err == nil {
		_, err = stream.CloseAndRecv()
	}
	requireCode(t, err, codes.DeadlineExceeded)

	method := searchv1.SearchService_IngestDocuments_FullMethodName
	// The service's context ends by its own timer (DeadlineExceeded) or by
	// the client's cancel at the same deadline (Canceled), whichever lands
	// first; either way the handler returns that error, typed at the edge.
	require.Eventually(t, func() bool {
		return handled(t, r.reg, method, codes.DeadlineExceeded.String())+handled(t, r.reg, method, codes.Canceled.String()) == 1
	}, time.Minute, 10*time.Millisecond, "the handler ends with the context's error")
	// 0.5 s measured; the whole preparation takes about 7 s, so 4 s still
	// tells the two apart on a loaded machine.
	require.Less(t, handlingSeconds(t, r.reg, method), 4.0, "the preparation stopped at the deadline, not at its end")

	var docs, chunks int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)`).Scan(&docs, &chunks))
	require.Zero(t, docs, "nothing written")
	require.Zero(t, chunks, "nothing written")
}

// handled is the edge's count of calls to method that ended with code.
func handled(t *testing.T, reg *prometheus.Registry, method, code string) float64 {
	t.Helper()
	for _, m := range gather(t, reg, "bmcis_grpc_server_handled_total") {
		if label(m.GetLabel(), "method") == method && label(m.GetLabel(), "code") == code {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// handlingSeconds is the edge's total handling time of calls to method.
func handlingSeconds(t *testing.T, reg *prometheus.Registry, method string) float64 {
	t.Helper()
	for _, m := range gather(t, reg, "bmcis_grpc_server_handling_seconds") {
		if label(m.GetLabel(), "method") == method {
			return m.GetHistogram().GetSampleSum()
		}
	}
	return 0
}

func gather(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func label(ls []*dto.LabelPair, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
