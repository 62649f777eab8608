package server_test

import (
	"bytes"
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// sendAll streams raw requests and returns the response.
func sendAll(t testing.TB, c searchv1.SearchServiceClient, reqs ...*searchv1.IngestDocumentsRequest) (*searchv1.IngestDocumentsResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := c.IngestDocuments(ctx)
	require.NoError(t, err)
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			break // the server ended the stream; CloseAndRecv says why
		}
	}
	return stream.CloseAndRecv()
}

func syncHeader(name string) *searchv1.IngestDocumentsRequest {
	return &searchv1.IngestDocumentsRequest{Sync: &searchv1.SyncSource{Name: name, Root: "/srv/" + name, Mirror: true}}
}

func doc(d *searchv1.Document) *searchv1.IngestDocumentsRequest {
	return &searchv1.IngestDocumentsRequest{Document: d}
}

func bm25IDs(t testing.TB, c searchv1.SearchServiceClient, q string) []string {
	t.Helper()
	ids := dedupe(docIDs(search(t, c, &searchv1.SearchRequest{Query: q, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})))
	sort.Strings(ids)
	return ids
}

// A mirroring sync adds, updates and deletes the documents of its own
// source only: another source with the same file names, and plainly
// ingested documents, are never touched.
func TestSyncMirrorsOneSourceOnly(t *testing.T) {
	r, _ := start(t)
	ctx := context.Background()
	mustIngest(t, r.client, md("a.md", "", "Plain", "# Plain\n\nThe plain walrus document."))

	resp, err := sendAll(t, r.client, syncHeader("handbook"),
		doc(md("a.md", "", "A", "# A\n\nThe first walrus page.")),
		doc(md("b.md", "", "B", "# B\n\nThe narwhal page.")))
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.DocumentsWritten)
	resp, err = sendAll(t, r.client, syncHeader("wiki"),
		doc(md("a.md", "", "A", "# A\n\nThe wiki walrus page.")),
		doc(md("b.md", "", "B", "# B\n\nThe wiki narwhal page.")))
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.DocumentsWritten)
	require.Equal(t, []string{"a.md", "handbook:a.md", "wiki:a.md"}, bm25IDs(t, r.client, "walrus"))

	// handbook: a.md kept unchanged (not resent), b.md gone, c.md new.
	resp, err = sendAll(t, r.client, syncHeader("handbook"),
		&searchv1.IngestDocumentsRequest{KeepExternalIds: []string{"a.md"}},
		doc(md("c.md", "", "C", "# C\n\nThe new beluga page.")))
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DocumentsWritten)
	require.EqualValues(t, 1, resp.DocumentsDeleted)
	require.Equal(t, []string{"wiki:b.md"}, bm25IDs(t, r.client, "narwhal"))
	require.Equal(t, []string{"a.md", "handbook:a.md", "wiki:a.md"}, bm25IDs(t, r.client, "walrus"))
	require.Equal(t, []string{"handbook:c.md"}, bm25IDs(t, r.client, "beluga"))

	// An empty mirror empties its source and nothing else.
	resp, err = sendAll(t, r.client, syncHeader("wiki"))
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.DocumentsDeleted)
	require.Equal(t, []string{"a.md", "handbook:a.md"}, bm25IDs(t, r.client, "walrus"))

	// A plain ingest cannot overwrite a synced document.
	resp = mustIngest(t, r.client, md("handbook:a.md", "", "Hijack", "# Hijack\n\nOverwritten orca."))
	require.EqualValues(t, 1, resp.DocumentsFailed)
	require.Contains(t, resp.Failures[0].Reason, "belongs to another source")
	require.Empty(t, bm25IDs(t, r.client, "orca"))

	list, err := r.client.ListSources(ctx, &searchv1.ListSourcesRequest{})
	require.NoError(t, err)
	require.Len(t, list.Sources, 2)
	hb, wiki := list.Sources[0], list.Sources[1]
	require.Equal(t, "handbook", hb.Name)
	require.Equal(t, "/srv/handbook", hb.Root)
	require.EqualValues(t, 2, hb.DocumentCount)
	require.NotNil(t, hb.LastSyncAt)
	require.EqualValues(t, 1, hb.LastWritten)
	require.EqualValues(t, 1, hb.LastUnchanged)
	require.EqualValues(t, 1, hb.LastDeleted)
	require.Equal(t, "wiki", wiki.Name)
	require.Zero(t, wiki.DocumentCount)
	require.EqualValues(t, 2, wiki.LastDeleted)

	// A scoped key sees no source holding none of its documents.
	scoped, err := r.client.ListSources(ctx, &searchv1.ListSourcesRequest{Scope: &searchv1.ReadScope{Categories: []string{"nothing-here"}}})
	require.NoError(t, err)
	require.Empty(t, scoped.Sources)
}

// ListSources shows a category-scoped key only the sources holding its
// categories' documents, with those documents' counts and not the last
// sync's (which count the whole source); and it shows the sources' roots
// (paths on the syncing machine) only to the ingest role, never to the read
// credential the gateway and the dashboard hold.
func TestListSourcesScopeAndRoots(t *testing.T) {
	r, _ := start(t)
	ctx := context.Background()
	_, err := sendAll(t, r.client, syncHeader("hr"),
		doc(md("leave.md", "hr", "Leave", "# Leave\n\nThe walrus leave policy.")),
		doc(md("pay.md", "finance", "Pay", "# Pay\n\nThe walrus pay policy.")))
	require.NoError(t, err)
	_, err = sendAll(t, r.client, syncHeader("secret-projects"),
		doc(md("plan.md", "finance", "Plan", "# Plan\n\nThe narwhal plan.")))
	require.NoError(t, err)

	conn, err := grpcclient.Dial(r.addr, readToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	reader := searchv1.NewSearchServiceClient(conn)

	hrOnly := &searchv1.ListSourcesRequest{Scope: &searchv1.ReadScope{Categories: []string{"hr"}}}
	for name, c := range map[string]searchv1.SearchServiceClient{"read": reader, "ingest": r.client} {
		scoped, err := c.ListSources(ctx, hrOnly)
		require.NoError(t, err, name)
		require.Len(t, scoped.Sources, 1, "%s: only the source holding hr documents", name)
		hr := scoped.Sources[0]
		require.Equal(t, "hr", hr.Name)
		require.EqualValues(t, 1, hr.DocumentCount, "only the hr document counts")
		require.Zero(t, hr.LastWritten, "the last sync's counts cover other categories")
		require.NotNil(t, hr.LastSyncAt)
	}

	all, err := reader.ListSources(ctx, &searchv1.ListSourcesRequest{})
	require.NoError(t, err)
	require.Len(t, all.Sources, 2)
	for _, src := range all.Sources {
		require.Empty(t, src.Root, "the read credential sees no paths")
		require.NotZero(t, src.LastWritten, "an unscoped key sees the last sync")
	}
	all, err = r.client.ListSources(ctx, &searchv1.ListSourcesRequest{})
	require.NoError(t, err)
	require.Equal(t, "/srv/hr", all.Sources[0].Root, "the ingest role sees the paths")
	require.Equal(t, "/srv/secret-projects", all.Sources[1].Root)
	scoped, err := r.client.ListSources(ctx, hrOnly)
	require.NoError(t, err)
	require.Equal(t, "/srv/hr", scoped.Sources[0].Root)
}

// A file that fails in a sync keeps its previous version: only gone files
// are deleted.
func TestSyncKeepsTheOldVersionOfAFailedFile(t *testing.T) {
	r, _ := start(t)
	_, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "# A\n\nThe dugong page.")))
	require.NoError(t, err)
	resp, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "   ")))
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DocumentsFailed)
	require.Zero(t, resp.DocumentsDeleted)
	require.Equal(t, []string{"docs:a.md"}, bm25IDs(t, r.client, "dugong"))
}

// A folder the client could not list keeps every document stored under it
// (and only there: a file gone elsewhere is still deleted); "." keeps the
// whole source.
func TestSyncKeepsTheDocumentsOfAnUnreadFolder(t *testing.T) {
	r, _ := start(t)
	all := []*searchv1.IngestDocumentsRequest{syncHeader("docs"),
		doc(md("a.md", "", "A", "# A\n\nThe okapi page.")),
		doc(md("sub/b.md", "", "B", "# B\n\nThe okapi annex.")),
		doc(md("sub/deeper/c.md", "", "C", "# C\n\nThe okapi appendix.")),
		doc(md("subway.md", "", "S", "# S\n\nThe okapi subway.")),
	}
	stored := []string{"docs:a.md", "docs:sub/b.md", "docs:sub/deeper/c.md", "docs:subway.md"}
	_, err := sendAll(t, r.client, all...)
	require.NoError(t, err)
	require.Equal(t, stored, bm25IDs(t, r.client, "okapi"))

	for _, tc := range []struct {
		name    string
		folders []string
		deleted int32
		left    []string
	}{
		{"root unread", []string{"."}, 0, stored},
		{"subfolder unread", []string{"sub/"}, 1, []string{"docs:a.md", "docs:sub/b.md", "docs:sub/deeper/c.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "# A\n\nThe okapi page.")),
				&searchv1.IngestDocumentsRequest{KeepFolders: tc.folders})
			require.NoError(t, err)
			require.Equal(t, tc.deleted, resp.DocumentsDeleted)
			require.Equal(t, tc.left, bm25IDs(t, r.client, "okapi"))
		})
	}
}

// A kept folder matches its documents' ids exactly as they are stored:
// spaces inside a path stay (ids are trimmed only at their ends), and a
// folder that is not a clean relative path is refused before anything is
// deleted.
func TestSyncKeptFolderNames(t *testing.T) {
	r, _ := start(t)
	_, err := sendAll(t, r.client, syncHeader("docs"),
		doc(md("a.md", "", "A", "# A\n\nThe okapi page.")),
		doc(md("notes /b.md", "", "B", "# B\n\nThe okapi notes.")),
		doc(md(" lead/c.md", "", "C", "# C\n\nThe okapi lead.")),
		doc(md("  /sub/e.md", "", "E", "# E\n\nThe okapi under spaces.")))
	require.NoError(t, err)
	stored := []string{"docs:/sub/e.md", "docs:a.md", "docs:lead/c.md", "docs:notes /b.md"}
	require.ElementsMatch(t, stored, bm25IDs(t, r.client, "okapi"))

	for _, bad := range []string{"./notes ", "notes //x", "/notes ", "../up", "a/../notes "} {
		t.Run(bad, func(t *testing.T) {
			_, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "# A\n\nThe okapi page.")),
				&searchv1.IngestDocumentsRequest{KeepFolders: []string{bad}})
			requireCode(t, err, codes.InvalidArgument)
			require.Contains(t, err.Error(), "not a clean folder path")
			require.ElementsMatch(t, stored, bm25IDs(t, r.client, "okapi"), "a refused stream deletes nothing")
		})
	}
	// The walker's names as they are: a trailing space inside the path, a
	// leading one the ids lost.
	resp, err := sendAll(t, r.client, syncHeader("docs"), doc(md("a.md", "", "A", "# A\n\nThe okapi page.")),
		&searchv1.IngestDocumentsRequest{KeepFolders: []string{"notes ", " lead/", "  /sub"}})
	require.NoError(t, err)
	require.Zero(t, resp.DocumentsDeleted)
	require.ElementsMatch(t, stored, bm25IDs(t, r.client, "okapi"))
}

func TestSyncHeaderIsChecked(t *testing.T) {
	r, _ := start(t)
	for _, tc := range []struct {
		name string
		reqs []*searchv1.IngestDocumentsRequest
		want string
	}{
		{"bad name", []*searchv1.IngestDocumentsRequest{{Sync: &searchv1.SyncSource{Name: "Bad Name"}}}, "not a source name"},
		{"header not first", []*searchv1.IngestDocumentsRequest{doc(md("a.md", "", "A", "# A\n\ntext")), syncHeader("docs")}, "only the first message"},
		{"keep without sync", []*searchv1.IngestDocumentsRequest{{KeepExternalIds: []string{"a.md"}}}, "only a sync stream"},
		{"folders without sync", []*searchv1.IngestDocumentsRequest{{KeepFolders: []string{"sub"}}}, "only a sync stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sendAll(t, r.client, tc.reqs...)
			requireCode(t, err, codes.InvalidArgument)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// A document bigger than one gRPC message arrives in parts; the limit is a
// setting, checked before the parts arrive; broken part sequences are
// refused with a clear error.
func TestDocumentInParts(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.MaxDocumentBytes = 8 << 20
	r := startReplica(t, pool, cfg)

	var body strings.Builder
	body.WriteString("# Big\n\n")
	for body.Len() < 6<<20 { // over gRPC's 4 MiB message limit
		body.WriteString("Plain filler sentence about warehouses and pallets. ")
	}
	body.WriteString("\n\nThe very last paragraph names the okapi.\n")
	content := []byte(body.String())
	parts := func(id string, b []byte, size int64) []*searchv1.IngestDocumentsRequest {
		const part = 1 << 20
		d := md(id, "", "Big", "")
		d.Content, d.ContentSize = b[:part], size
		out := []*searchv1.IngestDocumentsRequest{doc(d)}
		for off := part; off < len(b); off += part {
			out = append(out, &searchv1.IngestDocumentsRequest{ContentPart: b[off:min(off+part, len(b))]})
		}
		return out
	}
	resp, err := sendAll(t, r.client, append(parts("big.md", content, int64(len(content))), doc(md("small.md", "", "S", "# S\n\nsmall okapi")))...)
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.DocumentsWritten, "failures: %v", resp.Failures)
	require.Equal(t, []string{"big.md", "small.md"}, bm25IDs(t, r.client, "okapi"))

	tooBig := bytes.Repeat([]byte("x "), 5<<20)
	resp, err = sendAll(t, r.client, append(parts("huge.md", tooBig, int64(len(tooBig))), doc(md("after.md", "", "S", "# S\n\nafter the huge one")))...)
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.DocumentsFailed)
	require.Contains(t, resp.Failures[0].Reason, "too large: 10485760 bytes (limit 8388608")
	require.EqualValues(t, 1, resp.DocumentsWritten)

	_, err = sendAll(t, r.client, parts("cut.md", content, int64(len(content)))[:3]...)
	requireCode(t, err, codes.InvalidArgument)
	require.Contains(t, err.Error(), "the stream ended after")
	_, err = sendAll(t, r.client, &searchv1.IngestDocumentsRequest{ContentPart: []byte("stray")})
	requireCode(t, err, codes.InvalidArgument)
	require.Contains(t, err.Error(), "no document is waiting for content")
	_, err = sendAll(t, r.client, append(parts("short.md", content, 3<<19), doc(md("x.md", "", "X", "x")))...)
	requireCode(t, err, codes.InvalidArgument)
	require.Contains(t, err.Error(), "more content than")
}

// A PDF chunk carries its page as a field, not only in the context header.
func TestPDFChunksHaveTheirPage(t *testing.T) {
	r, _ := start(t)
	pdf := &searchv1.Document{ExternalId: "hr/handbook.pdf", SourceFile: "hr/handbook.pdf", Content: sample.PDF(sample.Handbook), FormatName: "pdf"}
	resp := mustIngest(t, r.client, pdf, md("notes.md", "", "Notes", "# Notes\n\nThe phishing notes."))
	require.EqualValues(t, 2, resp.DocumentsWritten, "failures: %v", resp.Failures)
	out := search(t, r.client, &searchv1.SearchRequest{Query: "phishing report button", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25})
	pageRE := regexp.MustCompile(`> p\. (\d+)`)
	pages := map[int64]int32{}
	seen := map[int32]bool{}
	var ids []int64
	for _, res := range out.Results {
		ch := res.Chunk
		pages[ch.ChunkId] = ch.Page
		ids = append(ids, ch.ChunkId)
		if ch.DocumentId != "hr/handbook.pdf" {
			require.Zero(t, ch.Page, ch.DocumentId)
			continue
		}
		m := pageRE.FindStringSubmatch(ch.ContextHeader)
		require.NotNil(t, m, ch.ContextHeader)
		require.Equal(t, m[1], strconv.Itoa(int(ch.Page)), "the field and the header agree")
		seen[ch.Page] = true
	}
	require.True(t, seen[3], "the phishing section is on page 3: %v", seen)
	got, err := r.client.GetChunks(context.Background(), &searchv1.GetChunksRequest{ChunkIds: ids})
	require.NoError(t, err)
	require.Len(t, got.Chunks, len(ids))
	for _, ch := range got.Chunks {
		require.Equal(t, pages[ch.ChunkId], ch.Page)
	}
}
