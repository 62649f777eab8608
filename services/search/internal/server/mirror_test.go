package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// TestVectorMirror: a replica answering from its in-memory graph ranks
// unrestricted vector queries as one walking pgvector does, and documents
// written, merged and deleted through another replica are found or gone
// on it as in the database.
func TestVectorMirror(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	mirrored := startReplica(t, pool, cfg)
	cfg.VectorMirrorMB = 0
	plain := startReplica(t, pool, cfg)
	mustIngest(t, plain.client, corpus(64)...)
	ctx := context.Background()

	vector := func(r *replica, q string, mode searchv1.RetrievalMode) *searchv1.SearchResponse {
		return search(t, r.client, &searchv1.SearchRequest{Query: q, Mode: mode, NoCache: true, Limit: 50})
	}
	const vec = searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR
	mirrorAnswers := func() float64 { return counter(t, mirrored.reg, "bmcis_search_vector_path_total", "path", "mirror") }
	// Both replicas load the model the ingest trained; the first vector
	// queries find the graph not built yet and start it.
	for _, r := range []*replica{mirrored, plain} {
		require.Eventually(t, func() bool {
			resp, err := r.client.Search(ctx, &searchv1.SearchRequest{Query: "network backup incident", Mode: vec, NoCache: true, Limit: 5})
			return err == nil && len(resp.Results) > 0
		}, 30*time.Second, 20*time.Millisecond, "the model is loaded")
	}
	awaitMirror(t, mirrored, "network backup incident")
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE embedding IS NOT NULL`).Scan(&stored))
	require.Positive(t, stored)
	require.EqualValues(t, stored, gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors"), "every stored vector")

	const hybrid = searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
	agree := func(q string, mode searchv1.RetrievalMode) {
		before := mirrorAnswers()
		got, want := vector(mirrored, q, mode).Results, vector(plain, q, mode).Results
		require.Greater(t, mirrorAnswers(), before, "%s %q: answered from the mirror", mode, q)
		require.Len(t, got, len(want), q)
		wantScore := map[int64]float64{}
		for _, r := range want {
			wantScore[r.Chunk.ChunkId] = r.HybridScore
		}
		for i := range want {
			// Only near-ties may swap (float rounding in Go and pgvector).
			if got[i].Chunk.ChunkId != want[i].Chunk.ChunkId {
				require.InDelta(t, want[i].SimilarityScore, got[i].SimilarityScore, 1e-5, "%s %q: position %d", mode, q, i)
			}
			if w, ok := wantScore[got[i].Chunk.ChunkId]; ok {
				require.InDelta(t, w, got[i].HybridScore, 1e-5, "%s %q: chunk %d", mode, q, got[i].Chunk.ChunkId)
			}
		}
	}
	for _, mode := range []searchv1.RetrievalMode{vec, hybrid} {
		for _, q := range []string{"network backup incident region", "oauth token session", "kafka schema retention", "firewall threat"} {
			agree(q, mode)
		}
	}
	require.Zero(t, counter(t, plain.reg, "bmcis_search_vector_path_total", "path", "mirror"), "off at 0 MB")

	// Written through the other replica: its vectors wait in the queue, and
	// the mirror takes them in once this replica's feed brings their
	// vectors generation.
	late := md("late/zebra.md", "cloud", "Late", "# Late\n\nzebra quagga okapi network backup incident region\n")
	mustIngest(t, plain.client, late)
	var queued int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunk_vector_queue`).Scan(&queued))
	require.Positive(t, queued, "the late document's vectors wait in the queue")
	find := func() bool {
		return slices.Contains(docIDs(vector(mirrored, "network backup incident region", vec)), "late/zebra.md")
	}
	require.Eventually(t, find, 30*time.Second, 10*time.Millisecond, "found once the replica's feed brings it")
	// Found once, found always: a graph older than the vectors generation
	// the feed brought never answers, whichever path does meanwhile.
	for i := 0; i < 30; i++ {
		require.True(t, find(), "query %d after the first find", i)
	}
	require.Eventually(t, func() bool {
		before := mirrorAnswers()
		return find() && mirrorAnswers() > before
	}, 30*time.Second, 10*time.Millisecond, "the mirror answers with the queued vectors in it")
	require.EqualValues(t, int64(stored)+queued, gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors"), "stored and queued")
	// Hybrid answers agree too: the queued vectors are walked with the
	// feedback vector like the rest.
	agree("network backup incident region", hybrid)
	// A merge moves vectors from the queue to chunks.embedding: the mirror
	// holds them already and keeps answering, with no catch-up.
	n, err := store.New(pool).MergeQueued(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, queued, n)
	before := mirrorAnswers()
	require.True(t, find(), "merged: still found")
	require.Greater(t, mirrorAnswers(), before, "merged: the mirror answers at once")
	require.EqualValues(t, int64(stored)+n, gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors"))

	// Rewritten: the old chunks leave the graph, the new ones enter it.
	embedded := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE embedding IS NOT NULL`).Scan(&n))
		return n
	}
	late.Content = []byte("# Late\n\nzebra quagga okapi network backup incident region\n\n## More\n\nkafka schema retention firewall threat\n")
	mustIngest(t, plain.client, late)
	_, err = store.New(pool).MergeQueued(ctx, 1000)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		before := mirrorAnswers()
		return find() && mirrorAnswers() > before && int(gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors")) == embedded()
	}, 30*time.Second, 10*time.Millisecond, "the rewrite's chunks replace the old ones")

	// Deleted through the other replica: out of the graph.
	_, err = plain.client.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "late/zebra.md"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return int(gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors")) == stored && !find()
	}, 30*time.Second, 10*time.Millisecond)
}

// TestVectorMirrorCodesOnly: when the float32 vectors outgrow
// BMCIS_SEARCH_VECTOR_MIRROR_MB but their int8 codes fit, the mirror keeps
// the codes only and ranks as pgvector does, up to the codes' rounding.
func TestVectorMirrorCodesOnly(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.VectorMirrorMB = 1 // ~650 float32 vectors of 256 dimensions, ~2,300 codes
	mirrored := startReplica(t, pool, cfg)
	cfg.VectorMirrorMB = 0
	plain := startReplica(t, pool, cfg)
	mustIngest(t, plain.client, corpus(900)...)
	ctx := context.Background()
	const vec = searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR
	// 900 documents may retrain the model the first ones trained: compare
	// once every chunk has its vector of the model both replicas hold.
	require.Eventually(t, func() bool {
		var chunks, embedded, queued int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE embedding_model_id = (SELECT id FROM embedding_models WHERE active)),
			(SELECT count(*) FROM chunk_vector_queue) FROM chunks`).Scan(&chunks, &embedded, &queued))
		var models []string
		for _, r := range []*replica{mirrored, plain} {
			st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
			if err != nil || st.RetrainPending {
				return false
			}
			models = append(models, st.EmbedderModel)
		}
		return chunks > 0 && embedded == chunks && queued == 0 && models[0] != "" && models[0] == models[1]
	}, time.Minute, 50*time.Millisecond, "one model, every vector applied")
	awaitMirror(t, mirrored, "network backup incident")
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks WHERE embedding IS NOT NULL`).Scan(&stored))
	require.Greater(t, stored, 650, "more than the float32 vectors that fit")
	require.EqualValues(t, stored, gaugeValue(t, mirrored, "bmcis_search_mirrored_vectors"), "every stored vector")
	require.EqualValues(t, 1, gaugeValue(t, mirrored, "bmcis_search_mirror_codes_only"))
	require.Zero(t, gaugeValue(t, plain, "bmcis_search_mirror_codes_only"))

	mirrorAnswers := func() float64 { return counter(t, mirrored.reg, "bmcis_search_vector_path_total", "path", "mirror") }
	for _, q := range []string{"network backup incident region", "oauth token session", "kafka schema retention", "firewall threat"} {
		before := mirrorAnswers()
		req := &searchv1.SearchRequest{Query: q, Mode: vec, NoCache: true, Limit: 20}
		// Every category named: the plain replica scores every chunk
		// exactly (BMCIS_SEARCH_EXACT_VECTOR_MAX_ROWS), where its pgvector
		// walk can miss a region of identical vectors, as this corpus has.
		exact := &searchv1.SearchRequest{Query: q, Mode: vec, NoCache: true, Limit: 20,
			Categories: []string{"security", "authentication", "cloud", "data"}}
		got, want := search(t, mirrored.client, req).Results, search(t, plain.client, exact).Results
		require.Greater(t, mirrorAnswers(), before, "%q: answered from the mirror", q)
		require.Len(t, got, len(want), q)
		// The corpus is full of ties, which the codes may order otherwise:
		// the k-th best similarity is what must agree.
		for i := range want {
			require.InDelta(t, want[i].SimilarityScore, got[i].SimilarityScore, 0.01, "%q: position %d", q, i)
		}
	}
}

// TestVectorMirrorOverBudget: more chunks than BMCIS_SEARCH_VECTOR_MIRROR_MB
// holds, even as codes, leave the mirror off, and pgvector answers every
// vector side.
func TestVectorMirrorOverBudget(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.VectorMirrorMB = 1 // ~2,300 codes of 256 dimensions
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(2400)...)
	ctx := context.Background()
	var chunks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM chunks`).Scan(&chunks))
	require.Greater(t, chunks, 2300)
	req := &searchv1.SearchRequest{Query: "network backup incident", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 10}
	require.Eventually(t, func() bool {
		resp, err := r.client.Search(ctx, req)
		return err == nil && len(resp.Results) == 10
	}, 30*time.Second, 20*time.Millisecond)
	// Each query kicks a catch-up; none builds a graph that answers. (With
	// a bound that fits, the mirror answers within a few of these.)
	require.Never(t, func() bool {
		resp, err := r.client.Search(ctx, req)
		return err != nil || len(resp.Results) != 10 ||
			counter(t, r.reg, "bmcis_search_vector_path_total", "path", "mirror") > 0 ||
			gaugeValue(t, r, "bmcis_search_mirror_building") > 0
	}, time.Second, 20*time.Millisecond)
	require.Positive(t, counter(t, r.reg, "bmcis_search_vector_path_total", "path", "pgvector"))
	require.Zero(t, gaugeValue(t, r, "bmcis_search_mirrored_vectors"))
	require.Zero(t, gaugeValue(t, r, "bmcis_search_mirror_building"))
}
