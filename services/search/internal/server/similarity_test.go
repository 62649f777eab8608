package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// A hybrid result's similarity_score is its cosine with the query, as in
// vector mode, not with the feedback vector the list was searched with
// (which holds the top BM25 hits themselves, so their cosine with it is
// high whatever the query: the MCP adapter's LOW_QUALITY_RESULTS reads
// this score).
func TestHybridSimilarityIsToTheQuery(t *testing.T) {
	pool, _ := newDB(t)
	r := startReplica(t, pool, testConfig())
	mustIngest(t, r.client, corpus(30)...)
	const q = "shared words security audit"
	vreq := &searchv1.SearchRequest{Query: q, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, Limit: 50, NoCache: true}
	require.Eventually(t, func() bool {
		out, err := r.client.Search(t.Context(), vreq)
		return err == nil && len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond, "the model is trained after the first ingest")
	plain := map[int64]float64{}
	for _, res := range search(t, r.client, vreq).Results {
		plain[res.Chunk.ChunkId] = res.SimilarityScore
	}
	hybrid := search(t, r.client, &searchv1.SearchRequest{Query: q, Limit: 50, NoCache: true})
	compared := 0
	for _, res := range hybrid.Results {
		if res.VectorRank == 0 {
			require.Zero(t, res.SimilarityScore, "chunk %d: not returned by the vector side", res.Chunk.ChunkId)
			continue
		}
		if want, ok := plain[res.Chunk.ChunkId]; ok {
			require.InDelta(t, want, res.SimilarityScore, 1e-4, "chunk %d", res.Chunk.ChunkId)
			compared++
		}
	}
	require.Positive(t, compared, "the two lists share chunks")
}
