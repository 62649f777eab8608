package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/docformat"
)

func TestIngestAndSearchEveryMode(t *testing.T) {
	r, pool := start(t)
	resp := mustIngest(t, r.client, corpus(40)...)
	require.EqualValues(t, 40, resp.DocumentsReceived)
	require.EqualValues(t, 40, resp.DocumentsWritten)
	require.Zero(t, resp.DocumentsFailed)
	require.Positive(t, resp.ChunksWritten)

	// The builtin model was trained and every chunk embedded before the
	// stream was answered.
	var missing int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM chunks WHERE embedding IS NULL`).Scan(&missing))
	require.Zero(t, missing)
	st, err := r.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.Equal(t, "builtin", st.EmbedderProvider)
	require.True(t, strings.HasPrefix(st.EmbedderModel, "builtin:lsa-v1:"), st.EmbedderModel)
	require.EqualValues(t, 256, st.EmbedderDimensions)
	require.EqualValues(t, 40, st.Documents)
	require.EqualValues(t, resp.ChunksWritten, st.Chunks)
	require.Positive(t, st.IndexGeneration)
	require.NotNil(t, st.LastChangeAt)

	for _, mode := range []searchv1.RetrievalMode{
		searchv1.RetrievalMode_RETRIEVAL_MODE_UNSPECIFIED, searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
		searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			out := search(t, r.client, &searchv1.SearchRequest{Query: "Firewall vulnerabilities", Mode: mode, Limit: 5})
			require.NotEmpty(t, out.Results)
			want := mode
			if want == searchv1.RetrievalMode_RETRIEVAL_MODE_UNSPECIFIED {
				want = searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
			}
			require.Equal(t, want, out.Mode)
			require.Equal(t, []string{"firewall", "vulnerabilities"}, out.QueryTerms)
			top := out.Results[0]
			require.Equal(t, "security", top.Chunk.SourceCategory)
			require.EqualValues(t, 1, top.Rank)
			for _, res := range out.Results {
				for _, s := range []float64{res.HybridScore, res.SimilarityScore, res.Bm25Score} {
					require.GreaterOrEqual(t, s, 0.0)
					require.LessOrEqual(t, s, 1.0)
				}
				require.NotNil(t, res.Chunk.UpdatedAt)
				require.NotEmpty(t, res.Chunk.ChunkText)
			}
			switch want {
			case searchv1.RetrievalMode_RETRIEVAL_MODE_BM25:
				require.Equal(t, 1.0, top.Bm25Score)
				require.Equal(t, top.Bm25Score, top.HybridScore)
				require.EqualValues(t, 1, top.Bm25Rank)
				require.Zero(t, top.VectorRank)
				require.Equal(t, []string{"firewall", "vulnerabilities"}, top.MatchedTerms)
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, top.ScoreType)
			case searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR:
				require.Zero(t, top.Bm25Rank)
				require.EqualValues(t, 1, top.VectorRank)
				require.Equal(t, top.SimilarityScore, top.HybridScore)
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, top.ScoreType)
				// Matched terms are reported for vector hits too.
				require.NotEmpty(t, top.MatchedTerms)
			default:
				// The top hybrid hit is found by both retrievers, but not
				// necessarily BM25's first: convex fusion lets a strong
				// vector score lift BM25's second or third, and the builtin
				// model's training sample depends on the ingest's timing.
				require.Positive(t, top.Bm25Rank)
				require.LessOrEqual(t, top.Bm25Rank, int32(3))
				require.Positive(t, top.VectorRank)
				require.Equal(t, searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, top.ScoreType)
				for i := 1; i < len(out.Results); i++ {
					require.GreaterOrEqual(t, out.Results[i-1].HybridScore, out.Results[i].HybridScore, "ranked by hybrid score")
				}
			}
		})
	}
}

func TestIngestBadDocumentsAreReportedOthersGoIn(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.MaxDocumentBytes = 2 << 20 // the limit is a setting (default 64 MiB)
	r := startReplica(t, pool, cfg)
	big := md("big.md", "", "Big", strings.Repeat("word ", 3<<20/5))
	docs := []*searchv1.Document{
		md("good-1.md", "ops", "Good one", "# Good one\n\nThe payroll runbook explains payroll steps."),
		md("empty.md", "ops", "Empty", "   \n\t\n"),
		md("binary.md", "ops", "Binary", "PNG\x00\x01\x02\x03 data"),
		{ExternalId: "bad-utf8.md", SourceFile: "bad-utf8.md", Content: []byte("caf\xc3 au lait")},
		{SourceFile: "", Content: []byte("no id at all")},
		big,
		txt("good-2", "Good two", "Payroll questions go to the finance team."),
	}
	resp, err := ingestDocs(t, r.client, docs...)
	require.NoError(t, err)
	require.EqualValues(t, 7, resp.DocumentsReceived)
	require.EqualValues(t, 2, resp.DocumentsWritten)
	require.EqualValues(t, 5, resp.DocumentsFailed)
	reasons := map[string]string{}
	for _, f := range resp.Failures {
		reasons[f.ExternalId] = f.Reason
		if f.ExternalId != "" {
			require.Equal(t, f.ExternalId, f.SourceFile)
		}
	}
	require.Contains(t, reasons["empty.md"], "empty")
	require.Contains(t, reasons["binary.md"], "binary")
	require.Contains(t, reasons["bad-utf8.md"], "invalid UTF-8 at byte 3")
	require.Contains(t, reasons[""], "missing external_id")
	require.Contains(t, reasons["big.md"], "too large")

	out := search(t, r.client, &searchv1.SearchRequest{Query: "payroll", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	require.ElementsMatch(t, []string{"good-1.md", "good-2"}, docIDs(out))
}

func TestIngestIdempotentReplaceAndDelete(t *testing.T) {
	r, pool := start(t)
	ctx := context.Background()
	ts := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	v1 := withTime(md("guide.md", "ops", "Guide", "# Guide\n\n## Setup\n\nInstall the zebra agent.\n\n## Usage\n\nRun the zebra agent daily."), ts)
	resp := mustIngest(t, r.client, v1, md("other.md", "ops", "Other", "# Other\n\nNothing about animals here, only tables."))
	require.EqualValues(t, 2, resp.DocumentsWritten)

	var gen1 int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT generation FROM documents WHERE external_id = 'guide.md'`).Scan(&gen1))
	var ids1 []int64
	rows, err := pool.Query(ctx, `SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.external_id = 'guide.md' ORDER BY c.id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids1 = append(ids1, id)
	}
	require.NotEmpty(t, ids1)

	// Unchanged: a no-op, same generation, same chunk ids.
	resp = mustIngest(t, r.client, withTime(md("guide.md", "ops", "Guide", "# Guide\n\n## Setup\n\nInstall the zebra agent.\n\n## Usage\n\nRun the zebra agent daily."), ts))
	require.EqualValues(t, 0, resp.DocumentsWritten)
	require.EqualValues(t, 1, resp.DocumentsUnchanged)
	var gen2 int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT generation FROM documents WHERE external_id = 'guide.md'`).Scan(&gen2))
	require.Equal(t, gen1, gen2)

	out := search(t, r.client, &searchv1.SearchRequest{Query: "zebra", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	require.Equal(t, []string{"guide.md"}, dedupe(docIDs(out)))
	require.True(t, out.Results[0].Chunk.UpdatedAt.AsTime().Equal(ts))

	// Changed: chunks replaced atomically, old text gone.
	resp = mustIngest(t, r.client, md("guide.md", "ops", "Guide", "# Guide\n\nInstall the giraffe agent instead."))
	require.EqualValues(t, 1, resp.DocumentsWritten)
	require.Empty(t, search(t, r.client, &searchv1.SearchRequest{Query: "zebra", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25}).Results)
	out = search(t, r.client, &searchv1.SearchRequest{Query: "giraffe", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	require.Equal(t, []string{"guide.md"}, docIDs(out))
	require.NotContains(t, ids1, out.Results[0].Chunk.ChunkId)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE id = ANY($1)`, ids1).Scan(&n))
	require.Zero(t, n)

	// Delete.
	del, err := r.client.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "guide.md"})
	require.NoError(t, err)
	require.EqualValues(t, 1, del.ChunksDeleted)
	require.Empty(t, search(t, r.client, &searchv1.SearchRequest{Query: "giraffe", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25}).Results)
	_, err = r.client.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "guide.md"})
	requireCode(t, err, codes.NotFound)
	_, err = r.client.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{})
	requireCode(t, err, codes.InvalidArgument)
	st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Documents)
}

func dedupe(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// The demo knowledge base `make run` loads: common queries return several
// pages, and the section copied word for word between two pages is flagged.
func TestDemoCorpus(t *testing.T) {
	r, _ := start(t)
	docs := demoDocs(t, "../../demo/docs")
	require.Len(t, docs, 46) // 40 markdown pages, two each of PDF, DOCX and HTML
	resp := mustIngest(t, r.client, docs...)
	require.EqualValues(t, 46, resp.DocumentsWritten, "%v", resp.Failures)
	for _, q := range []string{"security", "authentication"} {
		out := search(t, r.client, &searchv1.SearchRequest{Query: q, Limit: 10})
		require.Greater(t, out.TotalAvailable, int32(30), q)
		require.Len(t, out.Results, 10)
	}
	out := search(t, r.client, &searchv1.SearchRequest{Query: "reporting a security incident", Limit: 10, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	var dup *searchv1.SearchResult
	for _, res := range out.Results {
		if res.IsDuplicate {
			dup = res
			break
		}
	}
	require.NotNil(t, dup, "the copied section is flagged")
	require.NotEmpty(t, dup.SimilarChunkIds)
	cats, err := r.client.ListCategories(context.Background(), &searchv1.ListCategoriesRequest{})
	require.NoError(t, err)
	require.Len(t, cats.Categories, 5)
	st, err := r.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(st.EmbedderModel, "builtin:lsa-v1:256:"), st.EmbedderModel)
}

// demoDocs reads the files under root as bmcisctl ingest sends them, with
// no front matter read: named by their relative path, of their first
// folder's category, as bytes of their format for the service to extract.
func demoDocs(t *testing.T, root string) []*searchv1.Document {
	t.Helper()
	var docs []*searchv1.Document
	require.NoError(t, filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		f, ok := docformat.ForPath(p)
		require.True(t, ok && !f.Container(), p)
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		category, _, _ := strings.Cut(rel, "/")
		docs = append(docs, &searchv1.Document{ExternalId: rel, SourceFile: rel, Category: category, Content: data, FormatName: f.Name})
		return nil
	}))
	return docs
}

// IngestDocumentsAcked acknowledges as it goes: counts only grow, and the
// last message carries the same summary IngestDocuments would answer; a
// second run finds everything unchanged.
func TestIngestDocumentsAckedAcknowledges(t *testing.T) {
	rep, _ := start(t)
	run := func(docs []*searchv1.Document) []*searchv1.IngestDocumentsProgress {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		stream, err := rep.client.IngestDocumentsAcked(ctx)
		require.NoError(t, err)
		for _, d := range docs {
			require.NoError(t, stream.Send(&searchv1.IngestDocumentsRequest{Document: d}))
		}
		require.NoError(t, stream.CloseSend())
		var got []*searchv1.IngestDocumentsProgress
		for {
			p, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return got
			}
			require.NoError(t, err)
			got = append(got, p)
		}
	}
	var docs []*searchv1.Document
	for i := range 60 {
		docs = append(docs, md(fmt.Sprintf("acked-%d.md", i), "acked", fmt.Sprintf("Doc %d", i), fmt.Sprintf("# Doc %d\n\nText about topic %d.\n", i, i)))
	}
	docs = append(docs, md("empty.md", "acked", "Empty", "   "))
	got := run(docs)
	require.NotEmpty(t, got)
	last := got[len(got)-1]
	require.NotNil(t, last.GetSummary())
	require.EqualValues(t, 61, last.GetSummary().GetDocumentsReceived())
	require.EqualValues(t, 60, last.GetDocumentsWritten())
	require.EqualValues(t, 1, last.GetDocumentsFailed())
	require.Equal(t, last.GetDocumentsWritten(), last.GetSummary().GetDocumentsWritten())
	for i := 1; i < len(got); i++ {
		require.GreaterOrEqual(t, got[i].GetDocumentsWritten(), got[i-1].GetDocumentsWritten(), "counts only grow")
		if i < len(got)-1 {
			require.Nil(t, got[i-1].GetSummary(), "only the last message has the summary")
		}
	}
	again := run(docs)
	require.EqualValues(t, 60, again[len(again)-1].GetDocumentsUnchanged())
}

// TestIngestRefusesIdsNoLookupAccepts: an external id platform/docid
// refuses (a control character: C0, DEL or C1, NUL included) is this
// document's failure, named as any other refusal, and the rest of the
// stream goes in; in a mirroring sync the refused file keeps the run whole
// (its deletions and its record), as any failed file does.
func TestIngestRefusesIdsNoLookupAccepts(t *testing.T) {
	r, _ := start(t)
	body := "# Page\n\nThe capybara page."
	resp, err := ingestDocs(t, r.client,
		md("good-1.md", "", "Good", body),
		md("tab\there.md", "", "Tab", body),
		md("nul\x00.md", "", "NUL", body),
		md("esc\x1b[2J.md", "", "Escape", body),
		md("next\u0085line.md", "", "C1", body),
		md("good-2.md", "", "Good", body))
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.DocumentsWritten)
	require.EqualValues(t, 4, resp.DocumentsFailed)
	var refused []string
	for _, f := range resp.Failures {
		refused = append(refused, f.ExternalId)
		require.Equal(t, "external_id must not contain control characters", f.Reason, "%q", f.ExternalId)
	}
	require.ElementsMatch(t, []string{"tab\there.md", "nul\x00.md", "esc\x1b[2J.md", "next\u0085line.md"}, refused)
	require.Equal(t, []string{"good-1.md", "good-2.md"}, bm25IDs(t, r.client, "capybara"))

	// A mirror: a.md and b\nc.md, then b\nc.md again with a.md gone.
	resp, err = sendAll(t, r.client, syncHeader("notes"),
		doc(md("a.md", "", "A", "# A\n\nThe tapir page.")), doc(md("b\nc.md", "", "B", "# B\n\nThe tapir notes.")))
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DocumentsWritten)
	require.EqualValues(t, 1, resp.DocumentsFailed)
	require.Equal(t, "notes:b\nc.md", resp.Failures[0].ExternalId)
	require.Equal(t, "b\nc.md", resp.Failures[0].SourceFile)
	resp, err = sendAll(t, r.client, syncHeader("notes"),
		doc(md("b\nc.md", "", "B", "# B\n\nThe tapir notes.")), doc(md("d\x00.md", "", "D", "# D\n\nThe tapir log.")))
	require.NoError(t, err, "a refused id never reaches the mirror's query")
	require.EqualValues(t, 2, resp.DocumentsFailed)
	require.EqualValues(t, 1, resp.DocumentsDeleted)
	require.Empty(t, bm25IDs(t, r.client, "tapir"))
}
