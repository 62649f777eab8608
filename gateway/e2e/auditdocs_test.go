package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/docid"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// searchHit is a REST search result's chunk.
type searchHit struct {
	ChunkID    string `json:"chunkId"`
	DocumentID string `json:"documentId"`
}

// restSearch searches over REST (BM25, so each demo query finds its one
// document) and returns the results' chunks.
func (s *stack) restSearch(key, query string, limit int) []searchHit {
	s.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "mode": "RETRIEVAL_MODE_BM25", "limit": limit})
	require.NoError(s.t, err)
	r := s.do("POST", "/v1/search", string(body), rest.HeaderAPIKey, key)
	require.Equal(s.t, http.StatusOK, r.status, "%s", r.body)
	var found struct {
		Results []struct {
			Chunk searchHit `json:"chunk"`
		} `json:"results"`
	}
	require.NoError(s.t, json.Unmarshal(r.body, &found))
	hits := make([]searchHit, len(found.Results))
	for i, res := range found.Results {
		hits[i] = res.Chunk
	}
	return hits
}

// mcpCall calls a tool of the adapter at base over streamable HTTP, as a
// stateless client does (one POST, no session), and returns the envelope.
func mcpCall(t *testing.T, base, key, tool string, args map[string]any) map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	require.NoError(t, err)
	req, err := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var reply struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(stacktest.MCPReplyJSON(b), &reply), "%s", b)
	env := reply.Result.StructuredContent
	require.NotNil(t, env["_metadata"], "%s", b)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"], "%s", b)
	return env
}

// TestWhoReadADocumentAcrossEdits is the compliance question "who read
// document X?": a document read through MCP and REST, then changed and
// re-ingested (its chunks replaced by new ones) and read again. Every read
// names the document, so the filter by document returns the reads from
// before the edit (whose chunk ids no longer exist) and after it, over
// gRPC, REST and bmcisctl, and none of another document's reads. A filter
// no ingested id could match is refused: INVALID_ARGUMENT, 400, exit 2.
func TestWhoReadADocumentAcrossEdits(t *testing.T) {
	fast := map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"}
	s := newStack(t, fast)
	s.ingest()
	adapter := s.st.StartAdapterHTTP(t, fast)
	key := s.createKey(`{"name":"compliance"}`)
	keyID := stacktest.KeyID(key)

	// Before the edit: a REST search, a REST chunk read with a read mask
	// that names no document id, and an MCP chunk read.
	before := s.restSearch(key, "object storage buckets", 1)
	require.Len(t, before, 1)
	doc := before[0].DocumentID
	require.Equal(t, "guides/object-storage.md", doc)
	oldChunk, err := strconv.ParseInt(before[0].ChunkID, 10, 64)
	require.NoError(t, err)
	r := s.do("GET", "/v1/chunks?chunk_ids="+before[0].ChunkID+"&read_mask=chunks.chunk_text", "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"documentId":""`, "the answer holds only what its read mask names, as before")
	require.Contains(t, string(r.body), "Lifecycle rules")
	mcpCall(t, adapter.Base, key, "get_chunks", map[string]any{"chunk_ids": []int64{oldChunk}, "response_mode": "preview"})

	// Another document's reads, through both edges.
	other := s.restSearch(key, "cloud providers pricing", 1)
	require.Len(t, other, 1)
	require.NotEqual(t, doc, other[0].DocumentID)
	mcpCall(t, adapter.Base, key, "semantic_search", map[string]any{"query": "AWS Azure Google Cloud Platform", "page_size": 1, "response_mode": "ids_only"})

	// The edit: the same external id, new content, new chunks; the old ones are gone.
	sum := s.st.IngestDocs(t, map[string]string{"guides/object-storage.md": "# Object storage\n\nObject storage keeps blobs in buckets. " +
		"Versioning keeps every revision of an object; lifecycle rules expire old versions.\n"})
	require.Equal(t, 1, sum.Written, "%+v", sum)
	after := s.restSearch(key, "object storage versioning revision", 1)
	require.Len(t, after, 1)
	require.Equal(t, doc, after[0].DocumentID)
	require.NotEqual(t, before[0].ChunkID, after[0].ChunkID, "a changed document gets new chunks")
	r = s.do("GET", "/v1/chunks?chunk_ids="+before[0].ChunkID, "", rest.HeaderAPIKey, key)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"missingIds":["`+before[0].ChunkID+`"]`, "the old chunk no longer exists")
	env := mcpCall(t, adapter.Base, key, "semantic_search", map[string]any{"query": "object storage versioning revision", "page_size": 1, "response_mode": "ids_only"})
	require.Len(t, env["results"], 1)

	// Who read the document: the reads before and after the edit, from
	// both edges; not the other document's, not the read that found no
	// chunk.
	want := []string{"semantic_search", "POST /v1/search", "get_chunks", "GET /v1/chunks", "POST /v1/search"}
	read := s.auditEvents(len(want), &authv1.ListAuditEventsRequest{DocumentId: doc})
	tools := make([]string, len(read))
	for i, e := range read {
		tools[i] = e.GetTool()
		require.Equal(t, keyID, e.GetPrincipal())
		require.Equal(t, []string{doc}, e.GetDocumentIds(), "%v", e)
		require.Equal(t, auditlog.OK, e.GetOutcome())
	}
	require.Equal(t, want, tools, "newest first")
	require.Equal(t, []int64{oldChunk}, read[2].GetChunkIds(), "the MCP read before the edit names the chunk that no longer exists")
	require.Equal(t, []int64{oldChunk}, read[3].GetChunkIds(), "the REST read whose mask names no chunk id names the chunk it returned")
	require.Equal(t, "adapter", read[0].GetEdge())
	require.Equal(t, "read", read[1].GetEdge())

	otherRead := s.auditEvents(2, &authv1.ListAuditEventsRequest{DocumentId: other[0].DocumentID})
	require.Len(t, otherRead, 2, "the other document's REST search and MCP search")
	for _, e := range otherRead {
		require.Equal(t, []string{other[0].DocumentID}, e.GetDocumentIds())
	}
	none := s.auditEvents(0, &authv1.ListAuditEventsRequest{DocumentId: "guides/never-ingested.md"})
	require.Empty(t, none)

	// REST: the same filter, with the others.
	r = s.do("GET", "/v1/audit?document_id="+url.QueryEscape(doc)+"&principal="+keyID, "", rest.HeaderAdminToken, adminToken)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var listed struct {
		Events []struct {
			Tool        string   `json:"tool"`
			DocumentIDs []string `json:"documentIds"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.body, &listed))
	require.Len(t, listed.Events, len(want))
	require.Equal(t, []string{doc}, listed.Events[0].DocumentIDs)

	// bmcisctl: --document, and the single-dash spelling.
	for _, args := range [][]string{
		{"audit", "--document", doc, "-o", "json"},
		{"audit", "-document", doc, "-since", "1h", "-json"},
	} {
		out := s.st.Ctl(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, len(want), out)
		for i, l := range lines {
			var e map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &e))
			require.Equal(t, want[i], e["tool"])
			require.Equal(t, []any{doc}, e["document_ids"])
		}
	}
	require.Contains(t, s.st.Ctl(t, "audit", "--document", doc), doc, "the table names the documents")

	// A filter no ingested id could be: refused, saying why.
	ctx := grpcclient.WithCredential(context.Background(), adminToken)
	for _, bad := range []struct{ id, says string }{
		{strings.Repeat("d", docid.MaxBytes+1), "at most 1024 bytes"},
		{"guides/object\nstorage.md", "control characters"},
	} {
		_, err := s.auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{DocumentId: bad.id})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.ErrorContains(t, err, "document_id: must")
		require.ErrorContains(t, err, bad.says)

		r = s.do("GET", "/v1/audit?document_id="+url.QueryEscape(bad.id), "", rest.HeaderAdminToken, adminToken)
		require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
		require.Contains(t, string(r.body), bad.says)

		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd, err := s.st.CtlCommand(cctx, "audit", "--document", bad.id)
		require.NoError(t, err)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err = cmd.Run()
		cancel()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		require.Equal(t, 2, exit.ExitCode(), "a usage error: %s", stderr.String())
		require.Contains(t, stderr.String(), "--document: must")
		require.Contains(t, stderr.String(), bad.says)
	}
}
