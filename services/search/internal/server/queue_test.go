package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// TestQueuedVectorsAreSearchedThenMerged pins the incremental path: a
// stream into a live model is answered with its vectors queued (no HNSW
// insert), vector search finds them at once, and merging them into the
// HNSW index changes no result.
func TestQueuedVectorsAreSearchedThenMerged(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.Embedding.BulkMin = 1 // the first load drops and rebuilds the vector indexes
	r := startReplica(t, pool, cfg)
	ctx := context.Background()
	mustIngest(t, r.client, corpus(40)...) // trains; first load is staged
	var rebuilt bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		store.VectorIndexName, store.CategoryVectorsName).Scan(&rebuilt))
	require.True(t, rebuilt, "both vector indexes are back after a bulk write")
	classIndexCurrent := func() (ok bool) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a
			ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) AND a.attname = 'access_key'
			WHERE i.indexrelid = to_regclass($1))`, store.CategoryVectorsName).Scan(&ok))
		return ok
	}
	require.True(t, classIndexCurrent(), "rebuilt as migration 00019 defines it")
	// The previous release's writer rebuilds it by its own definition after
	// a bulk load during a rolling upgrade; the next sweep puts it right.
	_, err := pool.Exec(ctx, `DROP INDEX `+store.CategoryVectorsName+`; CREATE INDEX `+store.CategoryVectorsName+
		` ON chunks (category) INCLUDE (id, embedding) WHERE embedding IS NOT NULL`)
	require.NoError(t, err)
	require.False(t, classIndexCurrent())

	var queued, unembedded int
	count := func() {
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM chunk_vector_queue),
			(SELECT count(*) FROM chunks c WHERE embedding IS NULL AND NOT EXISTS (SELECT 1 FROM chunk_vector_queue q WHERE q.chunk_id = c.id))`).
			Scan(&queued, &unembedded))
	}
	count()
	require.Zero(t, queued, "a first load is written straight into chunks")

	var more []*searchv1.Document
	for i := 0; i < 3; i++ {
		more = append(more, md(fmt.Sprintf("late/doc-%d.md", i), "late", "Late",
			fmt.Sprintf("# Late %d\n\nfirewall audit encryption breach item%d late arrival\n", i, 900+i)))
	}
	resp := mustIngest(t, r.client, more...)
	require.Eventually(t, classIndexCurrent, 30*time.Second, 20*time.Millisecond, "the sweep rebuilds an outdated class index")
	count()
	require.EqualValues(t, resp.ChunksWritten, queued, "the stream's vectors wait in the queue")
	require.Zero(t, unembedded, "every acknowledged chunk has a vector somewhere")

	ask := func() *searchv1.SearchResponse {
		return search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit encryption late arrival",
			Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true})
	}
	before := ask()
	require.Contains(t, docIDs(before), "late/doc-0.md", "queued vectors are searched")
	filtered := search(t, r.client, &searchv1.SearchRequest{Query: "firewall audit", Categories: []string{"late"},
		Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true})
	require.Len(t, filtered.Results, 3, "and so is a category of queued chunks only")

	n, err := store.New(pool).MergeQueued(ctx, 1000)
	require.NoError(t, err)
	require.EqualValues(t, queued, n)
	count()
	require.Zero(t, queued)
	require.Zero(t, unembedded)

	after := ask()
	require.Equal(t, docIDs(before), docIDs(after))
	for i := range before.Results {
		require.Equal(t, before.Results[i].Chunk.ChunkId, after.Results[i].Chunk.ChunkId)
		require.InDelta(t, before.Results[i].SimilarityScore, after.Results[i].SimilarityScore, 1e-6)
	}
}

// TestTextInDatabaseShowsTheSameChunks pins BMCIS_SEARCH_CHUNK_TEXT=database:
// a replica that keeps no text in memory answers searches and GetChunks
// with exactly what a replica keeping it does, and a second read of the
// same page comes from its text cache.
func TestTextInDatabaseShowsTheSameChunks(t *testing.T) {
	mem, pool := start(t)
	mustIngest(t, mem.client, corpus(12)...)
	cfg := testConfig()
	cfg.TextInDatabase = true
	lean := startReplica(t, pool, cfg)

	req := func() *searchv1.SearchRequest {
		return &searchv1.SearchRequest{Query: "shared words security", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 5}
	}
	want := search(t, mem.client, req())
	got := search(t, lean.client, req())
	require.Len(t, got.Results, 5)
	var ids []int64
	for i := range want.Results {
		require.NotEmpty(t, got.Results[i].Chunk.ChunkText)
		require.Equal(t, want.Results[i].Chunk.ChunkText, got.Results[i].Chunk.ChunkText)
		require.Equal(t, want.Results[i].Chunk.ContextHeader, got.Results[i].Chunk.ContextHeader)
		ids = append(ids, want.Results[i].Chunk.ChunkId)
	}
	// Hybrid ranking takes feedback from the top BM25 hits: embedded from
	// memory on one replica, read as stored vectors on the other.
	hybrid := func() *searchv1.SearchRequest {
		return &searchv1.SearchRequest{Query: "shared words security", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Limit: 5, NoCache: true}
	}
	wantH, gotH := search(t, mem.client, hybrid()), search(t, lean.client, hybrid())
	require.Len(t, gotH.Results, len(wantH.Results))
	for i := range wantH.Results {
		require.Equal(t, wantH.Results[i].Chunk.ChunkId, gotH.Results[i].Chunk.ChunkId)
		require.InDelta(t, wantH.Results[i].SimilarityScore, gotH.Results[i].SimilarityScore, 1e-5)
		require.InDelta(t, wantH.Results[i].HybridScore, gotH.Results[i].HybridScore, 1e-5)
	}

	again := search(t, lean.client, req())
	require.True(t, again.CacheHit)
	require.Zero(t, again.DatabaseTimeMs, "the page's text came from the text cache")
	require.Equal(t, got.Results[0].Chunk.ChunkText, again.Results[0].Chunk.ChunkText)

	ctx := context.Background()
	wantChunks, err := mem.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: append(ids, 999999)})
	require.NoError(t, err)
	gotChunks, err := lean.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: append(ids, 999999)})
	require.NoError(t, err)
	require.Equal(t, []int64{999999}, gotChunks.MissingIds)
	require.Len(t, gotChunks.Chunks, len(wantChunks.Chunks))
	for i := range wantChunks.Chunks {
		require.Equal(t, wantChunks.Chunks[i].ChunkText, gotChunks.Chunks[i].ChunkText)
	}
}
