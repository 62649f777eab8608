package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// TestToolCallsAndResourceReadsAreAudited runs the adapter binary against
// the real services: a tool call, a resource read and a failed read each
// leave an entry with the key id, the tool, the query (or only its hash
// with BMCIS_AUDIT_QUERY_TEXT=false), the chunk ids returned and the
// outcome; `bmcisctl audit` lists them with its filters, one JSON object
// per line; and only the admin credential may list them.
func TestToolCallsAndResourceReadsAreAudited(t *testing.T) {
	s := demo(t)
	k := s.CreateKey(t, stacktest.Key{Name: "audit-e2e", PerMinute: 10_000, PerHour: 100_000, PerDay: 1_000_000})
	keyID := stacktest.KeyID(k)
	fast := map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"}
	a := httpClient(t, adapterHTTP(t, s, fast), map[string]string{"X-API-Key": k})

	env := callTool(t, a, "semantic_search", map[string]any{"query": "incident severity levels", "response_mode": "ids_only", "page_size": 3})
	require.Equal(t, "success", status(env), "%v", env["error"])
	var ids []int64
	for _, r := range env["results"].([]any) {
		ids = append(ids, int64(r.(map[string]any)["chunk_id"].(float64)))
	}
	require.NotEmpty(t, ids)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	read := func(uri string) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		_, err := a.ReadResource(ctx, req)
		require.NoError(t, err)
	}
	read(fmt.Sprintf("kb://chunks/%d", ids[0]))
	read("kb://chunks/not-a-number") // answered with INVALID_PARAMS

	hashOnly := map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms", "BMCIS_AUDIT_QUERY_TEXT": "false"}
	b := httpClient(t, adapterHTTP(t, s, hashOnly), map[string]string{"X-API-Key": k})
	env = callTool(t, b, "semantic_search", map[string]any{"query": "backup retention policy", "response_mode": "ids_only"})
	require.Equal(t, "success", status(env), "%v", env["error"])

	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	auth := authv1.NewAuthServiceClient(conn)
	var events []*authv1.AuditEvent
	require.Eventually(t, func() bool {
		resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: keyID})
		require.NoError(t, err)
		events = resp.GetEvents()
		return len(events) >= 4
	}, 20*time.Second, 20*time.Millisecond)
	require.Len(t, events, 4)
	// Newest first: the hash-only search, the failed read, the read, the search.
	hashed, failed, resource, search := events[0], events[1], events[2], events[3]
	for _, e := range events {
		require.Equal(t, keyID, e.GetPrincipal())
		require.Equal(t, auditlog.KindAPIKey, e.GetPrincipalKind())
		require.Equal(t, "e2e-http", e.GetClientName())
		require.Equal(t, "127.0.0.1", e.GetClientAddress())
		require.Equal(t, "adapter", e.GetEdge())
		require.NotEmpty(t, e.GetRequestId())
		require.NotContains(t, e.String(), k, "the key itself is never recorded")
	}
	require.Equal(t, "semantic_search", search.GetTool())
	require.Equal(t, "incident severity levels", search.GetQuery())
	require.Equal(t, ids, search.GetChunkIds())
	require.Equal(t, auditlog.OK, search.GetOutcome())
	require.Equal(t, documentsOf(t, s, ids), search.GetDocumentIds(), "the documents of the chunks returned, each once, in order")

	require.Equal(t, "resources/read", resource.GetTool())
	require.Equal(t, fmt.Sprintf("kb://chunks/%d", ids[0]), resource.GetTarget())
	require.Equal(t, ids[:1], resource.GetChunkIds())
	require.Equal(t, documentsOf(t, s, ids[:1]), resource.GetDocumentIds())
	require.Equal(t, auditlog.OK, resource.GetOutcome())

	require.Equal(t, "resources/read", failed.GetTool())
	require.Equal(t, "INVALID_PARAMS", failed.GetOutcome(), "a failed read records its error code")
	require.Empty(t, failed.GetChunkIds())
	require.Empty(t, failed.GetDocumentIds())

	require.Empty(t, hashed.GetQuery(), "BMCIS_AUDIT_QUERY_TEXT=false keeps only the hash")
	require.Equal(t, auditlog.QueryHash("backup retention policy"), hashed.GetQuerySha256())
	require.NotEmpty(t, hashed.GetChunkIds())

	// bmcisctl audit: one JSON object per line naming the key id and the
	// chunk ids; the filters narrow it; the single-dash forms work.
	out := s.Ctl(t, "audit", "--principal", keyID, "--tool", "resources/read", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &line))
	require.Equal(t, keyID, line["principal"])
	require.Equal(t, []any{fmt.Sprint(ids[0])}, line["chunk_ids"])
	out = s.Ctl(t, "audit", "-since", "1h", "-principal", keyID, "-json")
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 4, out)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	require.Empty(t, strings.TrimSpace(s.Ctl(t, "audit", "--since", future, "--principal", keyID, "-o", "json")))
	require.Contains(t, s.Ctl(t, "audit", "--principal", keyID), "incident severity levels")

	// Only operators list the trail.
	for _, cred := range []string{stacktest.ServiceToken, stacktest.AdapterToken, stacktest.IngestToken} {
		c, err := grpcclient.Dial(s.Addr(stacktest.Auth), cred)
		require.NoError(t, err)
		_, err = authv1.NewAuthServiceClient(c).ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{})
		require.ErrorContains(t, err, "PermissionDenied")
		_ = c.Close()
	}
}

// documentsOf asks search (as the adapter's credential may) which
// documents chunks belong to: their external ids, each once, in the order
// of the chunks.
func documentsOf(t *testing.T, s *stacktest.Stack, chunks []int64) []string {
	t.Helper()
	conn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.AdapterToken)
	require.NoError(t, err)
	defer conn.Close()
	resp, err := searchv1.NewSearchServiceClient(conn).GetChunks(context.Background(), &searchv1.GetChunksRequest{ChunkIds: chunks})
	require.NoError(t, err)
	var docs []string
	for _, c := range resp.GetChunks() {
		if !slices.Contains(docs, c.GetDocumentId()) {
			docs = append(docs, c.GetDocumentId())
		}
	}
	require.NotEmpty(t, docs)
	return docs
}

// TestVendorEvidenceNamesItsDocuments: a find_vendor_info answer quotes
// chunks that mention the vendor; its entry names those chunks and their
// documents, and the filter by each document finds it.
func TestVendorEvidenceNamesItsDocuments(t *testing.T) {
	s := demo(t)
	k := s.CreateKey(t, stacktest.Key{Name: "audit-evidence", PerMinute: 10_000, PerHour: 100_000, PerDay: 1_000_000})
	a := httpClient(t, adapterHTTP(t, s, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"}), map[string]string{"X-API-Key": k})
	env := callTool(t, a, "find_vendor_info", map[string]any{"vendor_name": "Acme Corp", "response_mode": "ids_only"})
	require.Equal(t, "success", status(env), "%v", env["error"])
	var evidence []int64
	for _, id := range env["results"].([]any)[0].(map[string]any)["evidence_chunk_ids"].([]any) {
		evidence = append(evidence, int64(id.(float64)))
	}
	require.NotEmpty(t, evidence)

	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	auth := authv1.NewAuthServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var entry *authv1.AuditEvent
	require.Eventually(t, func() bool {
		resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(k)})
		require.NoError(t, err)
		if len(resp.GetEvents()) == 0 {
			return false
		}
		entry = resp.GetEvents()[0]
		return true
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, "find_vendor_info", entry.GetTool())
	require.Equal(t, evidence, entry.GetChunkIds())
	require.Equal(t, documentsOf(t, s, evidence), entry.GetDocumentIds())
	for _, doc := range entry.GetDocumentIds() {
		resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{DocumentId: doc, Principal: stacktest.KeyID(k)})
		require.NoError(t, err)
		require.Len(t, resp.GetEvents(), 1, doc)
		require.Equal(t, entry.GetRequestId(), resp.GetEvents()[0].GetRequestId())
	}
}

// TestReadsWithoutTheChunkIDFieldAreAudited: a caller that asks for the
// chunks' text without their chunk_id still reads them; its entry names
// the chunks and documents it returned, as the same read with the ids.
func TestReadsWithoutTheChunkIDFieldAreAudited(t *testing.T) {
	s := demo(t)
	k := s.CreateKey(t, stacktest.Key{Name: "audit-fields", PerMinute: 10_000, PerHour: 100_000, PerDay: 1_000_000})
	a := httpClient(t, adapterHTTP(t, s, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"}), map[string]string{"X-API-Key": k})
	const query = "incident severity levels"
	env := callTool(t, a, "semantic_search", map[string]any{"query": query, "page_size": 3, "response_mode": "ids_only"})
	require.Equal(t, "success", status(env), "%v", env["error"])
	var ids []int64
	for _, r := range env["results"].([]any) {
		ids = append(ids, int64(r.(map[string]any)["chunk_id"].(float64)))
	}
	require.NotEmpty(t, ids)
	textOnly := []any{"chunk_text"}
	env = callTool(t, a, "semantic_search", map[string]any{"query": query, "page_size": 3, "response_mode": "full", "fields": textOnly})
	require.Equal(t, "success", status(env), "%v", env["error"])
	require.Len(t, env["results"], len(ids))
	require.NotContains(t, env["results"].([]any)[0], "chunk_id", "the caller asked for the text alone")
	env = callTool(t, a, "get_chunks", map[string]any{"chunk_ids": []any{ids[0]}, "response_mode": "full", "fields": textOnly})
	require.Equal(t, "success", status(env), "%v", env["error"])

	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	auth := authv1.NewAuthServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var events []*authv1.AuditEvent
	require.Eventually(t, func() bool {
		resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(k)})
		require.NoError(t, err)
		events = resp.GetEvents()
		return len(events) >= 3
	}, 20*time.Second, 20*time.Millisecond)
	require.Len(t, events, 3)
	chunks, search, idsOnly := events[0], events[1], events[2]
	require.Equal(t, ids, idsOnly.GetChunkIds())
	require.Equal(t, ids, search.GetChunkIds(), "the text-only search returned the same chunks")
	require.Equal(t, idsOnly.GetDocumentIds(), search.GetDocumentIds())
	require.Equal(t, documentsOf(t, s, ids), search.GetDocumentIds())
	require.Equal(t, "get_chunks", chunks.GetTool())
	require.Equal(t, ids[:1], chunks.GetChunkIds())
	require.Equal(t, documentsOf(t, s, ids[:1]), chunks.GetDocumentIds())
}

// TestRefusedChunkReadsNameWhatWasAsked: a key scoped to a category reads
// chunks of others; the answer finds none of them (a success with status
// partial: the contract has no error code for a chunk not found, and a
// chunk the key may not read is answered as one that does not exist).
// Its entry returns no chunks, so its target names what was asked: the
// requested chunks' kb:// URIs, each as a resource read of it records it.
func TestRefusedChunkReadsNameWhatWasAsked(t *testing.T) {
	s := demo(t)
	open := httpClient(t, adapterHTTP(t, s, nil), map[string]string{"X-API-Key": key(t)})
	env := callTool(t, open, "semantic_search", map[string]any{"query": "incident severity levels", "response_mode": "ids_only", "page_size": 2})
	require.Equal(t, "success", status(env), "%v", env["error"])
	var ids []int64
	for _, r := range env["results"].([]any) {
		ids = append(ids, int64(r.(map[string]any)["chunk_id"].(float64)))
	}
	require.Len(t, ids, 2)

	k := s.CreateKey(t, stacktest.Key{Name: "audit-hr-only", Categories: []string{"hr"}, PerMinute: 10_000, PerHour: 100_000, PerDay: 1_000_000})
	a := httpClient(t, adapterHTTP(t, s, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"}), map[string]string{"X-API-Key": k})
	env = callTool(t, a, "get_chunks", map[string]any{"chunk_ids": []any{ids[0], ids[1], ids[0]}})
	require.Equal(t, "partial", status(env), "%v", env)
	require.Equal(t, "2 of 2 chunks not found", env["_metadata"].(map[string]any)["message"])
	require.Empty(t, env["results"])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = fmt.Sprintf("kb://chunks/%d", ids[1])
	_, err := a.ReadResource(ctx, req)
	require.NoError(t, err)

	conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
	require.NoError(t, err)
	defer conn.Close()
	auth := authv1.NewAuthServiceClient(conn)
	var events []*authv1.AuditEvent
	require.Eventually(t, func() bool {
		resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(k)})
		require.NoError(t, err)
		events = resp.GetEvents()
		return len(events) >= 2
	}, 20*time.Second, 20*time.Millisecond)
	require.Len(t, events, 2)
	resource, chunks := events[0], events[1]
	require.Equal(t, "get_chunks", chunks.GetTool())
	require.Equal(t, fmt.Sprintf("kb://chunks/%d kb://chunks/%d", ids[0], ids[1]), chunks.GetTarget(),
		"the chunks asked for, each once, in the order asked")
	require.Empty(t, chunks.GetChunkIds(), "none was returned")
	require.Empty(t, chunks.GetDocumentIds())
	require.Equal(t, auditlog.OK, chunks.GetOutcome(), "a partial answer is a success")
	require.Equal(t, "resources/read", resource.GetTool())
	require.Contains(t, strings.Fields(chunks.GetTarget()), resource.GetTarget(),
		"a get_chunks target names a chunk as a read of its resource does")
	require.Empty(t, resource.GetChunkIds())
}
