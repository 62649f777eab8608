package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

// addDocument stores a document's chunks the way the search service does
// (without its linking: the import re-links them).
func addDocument(t *testing.T, pool *pgxpool.Pool, externalID string, texts ...string) {
	t.Helper()
	ctx := context.Background()
	var docID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO documents (external_id, source_file, title, content_hash, chunk_count)
		VALUES ($1, $1 || '.md', $1, '\x00', $2) RETURNING id`, externalID, len(texts)).Scan(&docID))
	for i, text := range texts {
		_, err := pool.Exec(ctx, `INSERT INTO chunks (document_id, chunk_index, total_chunks, text, token_count, content_hash)
			VALUES ($1, $2, $3, $4, 10, '\x00')`, docID, i, len(texts), text)
		require.NoError(t, err)
	}
}

func TestEvidenceFollowsImportsAndDocuments(t *testing.T) {
	pool, dbURL := testdb.New(t)
	r := startReplicaWith(t, pool, server.DefaultConfig(), startSearch(t, dbURL))
	ctx := ctxT(t)
	addDocument(t, pool, "contracts", "Vendor One renewed. Vendor One pays late; Vendor One.", "Nothing to support here.", "The Product One rollout.")
	addDocument(t, pool, "minutes", "We met V One about pricing.", "Vendor One again.")
	mustImport(t, r.client, baseLines)

	get := func() *vendorgraphv1.GetVendorResponse {
		resp, err := r.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Vendor One", MaxEvidence: 5})
		require.NoError(t, err)
		return resp
	}
	resp := get()
	require.EqualValues(t, 3, resp.GetEvidenceChunkCount(), "two chunks by name, one by the alias V One")
	ev := resp.GetEvidence()
	require.Len(t, ev, 3)
	require.Equal(t, "contracts.md", ev[0].GetSourceFile(), "the chunk naming the vendor twice ranks first")
	require.EqualValues(t, 3, ev[0].GetMentionCount())
	for _, e := range ev {
		require.Truef(t, strings.Contains(e.GetSnippet(), "Vendor One") || strings.Contains(e.GetSnippet(), "V One"),
			"snippet %q holds the name", e.GetSnippet())
	}
	docs := resp.GetEvidenceDocuments()
	require.Len(t, docs, 2)
	require.Equal(t, "contracts", docs[0].GetDocumentId())
	require.EqualValues(t, 3, docs[0].GetMentionCount())
	require.EqualValues(t, 1, docs[0].GetChunkCount())
	require.EqualValues(t, 2, docs[1].GetMentionCount())
	require.EqualValues(t, 2, docs[1].GetChunkCount())

	// Relationships name both ends, the vendor included.
	require.NotEmpty(t, resp.GetRelationships())
	for _, rel := range resp.GetRelationships() {
		require.NotEmpty(t, rel.GetSourceName())
		require.NotEmpty(t, rel.GetTargetName())
	}

	// Evidence stays inside the caller's categories; the cache keeps
	// differently scoped replies apart.
	_, err := pool.Exec(ctx, `UPDATE chunks SET category = 'hr' WHERE document_id = (SELECT id FROM documents WHERE external_id = 'minutes')`)
	require.NoError(t, err)
	scoped := func(cats ...string) *vendorgraphv1.GetVendorResponse {
		resp, err := r.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Vendor One", MaxEvidence: 5, EvidenceCategories: cats})
		require.NoError(t, err)
		return resp
	}
	hr := scoped("hr")
	require.EqualValues(t, 2, hr.GetEvidenceChunkCount())
	for _, e := range hr.GetEvidence() {
		require.Equal(t, "minutes.md", e.GetSourceFile())
	}
	require.Len(t, hr.GetEvidenceDocuments(), 1)
	require.EqualValues(t, 0, scoped("finance").GetEvidenceChunkCount())
	require.Empty(t, scoped("finance").GetEvidence())

	// A new alias links chunks already stored; the cache is dropped.
	changed := append([]string{}, baseLines...)
	changed[0] = strings.Replace(changed[0], `"aliases":["V One"]`, `"aliases":["V One","Support"]`, 1)
	mustImport(t, r.client, changed)
	require.EqualValues(t, 3, get().GetEvidenceChunkCount(), "a lowercase-only match of a common-word alias does not link")
	changed[0] = strings.Replace(changed[0], `"Support"]`, `"Support","The Product One rollout"]`, 1)
	mustImport(t, r.client, changed)
	require.EqualValues(t, 4, get().GetEvidenceChunkCount(), "the new alias links the chunk that held it")

	// Deleting a document drops its links. The cached reply holds the graph
	// only: a hit carries search's evidence as it is now.
	require.True(t, get().GetCacheHit())
	_, err = pool.Exec(ctx, "DELETE FROM documents WHERE external_id = 'minutes'")
	require.NoError(t, err)
	after := get()
	require.True(t, after.GetCacheHit(), "the graph part still comes from the cache")
	require.EqualValues(t, 2, after.GetEvidenceChunkCount())
	require.Len(t, after.GetEvidence(), 2)
	require.Len(t, after.GetEvidenceDocuments(), 1)
	require.Equal(t, resp.GetVendorId(), after.GetVendorId())
	require.Equal(t, resp.GetRelationships()[0].GetSourceName(), after.GetRelationships()[0].GetSourceName())
}

// While search is out, a vendor is answered from the graph alone, flagged
// evidence_unavailable, on a cache hit and on a miss alike, so a search
// outage does not take the vendor tool down; the evidence is back once
// search is.
func TestVendorAnsweredWithoutEvidenceWhileSearchIsOut(t *testing.T) {
	pool, dbURL := testdb.New(t)
	stack := stacktest.Start(t, stacktest.Options{DatabaseURL: dbURL, Services: []string{stacktest.Search}})
	conn, err := grpcclient.Dial(stack.Addr(stacktest.Search), stacktest.VendorGraphToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	r := startReplicaWith(t, pool, server.DefaultConfig(), searchv1.NewSearchServiceClient(conn))
	ctx := ctxT(t)
	addDocument(t, pool, "contracts", "Vendor One renewed. Vendor One pays late.")
	mustImport(t, r.client, baseLines)
	get := func(maxEvidence int32) (*vendorgraphv1.GetVendorResponse, error) {
		return r.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Vendor One", MaxEvidence: maxEvidence})
	}
	resp, err := get(5)
	require.NoError(t, err)
	require.False(t, resp.GetEvidenceUnavailable())
	require.NotEmpty(t, resp.GetEvidence())

	search := stack.Service(stacktest.Search)
	search.Kill(t)
	for _, maxEvidence := range []int32{5, 4} { // a cached graph, then a miss
		resp, err := get(maxEvidence)
		require.NoError(t, err, "max_evidence %d", maxEvidence)
		require.Equal(t, "Vendor One", resp.GetVendorName())
		require.NotEmpty(t, resp.GetEntities())
		require.True(t, resp.GetEvidenceUnavailable(), "max_evidence %d", maxEvidence)
		require.Empty(t, resp.GetEvidence())
	}

	search.Start(t)
	require.Eventually(t, func() bool {
		resp, err := get(5)
		return err == nil && !resp.GetEvidenceUnavailable() && len(resp.GetEvidence()) > 0
	}, 30*time.Second, 50*time.Millisecond, "the evidence is back once search is")
}
