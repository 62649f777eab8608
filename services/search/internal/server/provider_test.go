package server_test

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
)

// hashedBOW is a stand-in embedding model: analyzed terms hashed into dims
// buckets, so texts sharing words are close.
func hashedBOW(an *analysis.Analyzer, text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, t := range an.Terms(text) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(t))
		v[h.Sum32()%uint32(dims)]++
	}
	return v
}

// fakeEmbedder serves OpenAI's POST /v1/embeddings and Ollama's POST
// /api/embed as the real servers shape them.
type fakeEmbedder struct {
	t       *testing.T
	an      *analysis.Analyzer
	calls   atomic.Int32
	texts   atomic.Int32
	authBad atomic.Int32
	down    atomic.Bool // answer every call with an error
}

func (f *fakeEmbedder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if f.down.Load() {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"upstream detail at http://10.9.8.7/internal"}}`))
		return
	}
	switch r.URL.Path {
	case "/v1/embeddings":
		if r.Header.Get("Authorization") != "Bearer sk-test-key" {
			f.authBad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"bad key"}}`))
			return
		}
		var req struct {
			Model          string   `json:"model"`
			Input          []string `json:"input"`
			Dimensions     int      `json:"dimensions"`
			EncodingFormat string   `json:"encoding_format"`
		}
		require.NoError(f.t, json.NewDecoder(r.Body).Decode(&req))
		require.Equal(f.t, "text-embedding-3-small", req.Model)
		require.Equal(f.t, 256, req.Dimensions)
		f.texts.Add(int32(len(req.Input)))
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		resp := struct {
			Object string `json:"object"`
			Data   []item `json:"data"`
			Model  string `json:"model"`
		}{Object: "list", Model: req.Model}
		for i, s := range req.Input {
			resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: hashedBOW(f.an, s, req.Dimensions)})
		}
		_ = json.NewEncoder(w).Encode(resp)
	case "/api/embed":
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		require.NoError(f.t, json.NewDecoder(r.Body).Decode(&req))
		require.Equal(f.t, "nomic-embed-text", req.Model)
		f.texts.Add(int32(len(req.Input)))
		resp := struct {
			Model      string      `json:"model"`
			Embeddings [][]float32 `json:"embeddings"`
		}{Model: req.Model}
		for _, s := range req.Input {
			resp.Embeddings = append(resp.Embeddings, hashedBOW(f.an, s, 256))
		}
		_ = json.NewEncoder(w).Encode(resp)
	default:
		http.NotFound(w, r)
	}
}

func TestHTTPEmbedderProvidersEndToEnd(t *testing.T) {
	for _, tc := range []struct{ provider, model, key, modelID string }{
		{"openai", "text-embedding-3-small", "sk-test-key", "openai:text-embedding-3-small:256:v1"},
		{"ollama", "nomic-embed-text", "", "ollama:nomic-embed-text:256:v1"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			fake := &fakeEmbedder{t: t, an: analysis.NewEnglish()}
			ts := httptest.NewServer(fake)
			defer ts.Close()
			pool, _ := newDB(t)
			cfg := testConfig()
			cfg.Embedding.Provider, cfg.Embedding.URL, cfg.Embedding.Model, cfg.Embedding.APIKey = tc.provider, ts.URL, tc.model, tc.key
			r := startReplica(t, pool, cfg)
			resp := mustIngest(t, r.client, corpus(12)...)
			require.Zero(t, fake.authBad.Load())
			require.EqualValues(t, resp.ChunksWritten, fake.texts.Load(), "every chunk embedded over HTTP")

			st, err := r.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
			require.NoError(t, err)
			require.Equal(t, tc.provider, st.EmbedderProvider)
			require.Equal(t, tc.modelID, st.EmbedderModel)
			var active string
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT model_id FROM embedding_models WHERE active`).Scan(&active))
			require.Equal(t, tc.modelID, active)

			before := fake.texts.Load()
			out := search(t, r.client, &searchv1.SearchRequest{Query: "firewall vulnerability", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, Limit: 3})
			require.Equal(t, before+1, fake.texts.Load(), "the query is embedded by the provider")
			require.Equal(t, "security", out.Results[0].Chunk.SourceCategory)
			require.Greater(t, out.Results[0].SimilarityScore, 0.3)

			// Hybrid uses the preset for real models: RRF k=60, equal weights.
			hyb := search(t, r.client, &searchv1.SearchRequest{Query: "firewall vulnerability", Limit: 3})
			top := hyb.Results[0]
			fused := 0.0
			if top.Bm25Rank > 0 {
				fused += 1 / (60 + float64(top.Bm25Rank))
			}
			if top.VectorRank > 0 {
				fused += 1 / (60 + float64(top.VectorRank))
			}
			require.InDelta(t, fused/(2.0/61), top.HybridScore, 1e-9)

			// A second ingestion embeds only the new chunks.
			before = fake.texts.Load()
			resp = mustIngest(t, r.client, md("new.md", "security", "New", "# New\n\nFirewall rules for the new office."))
			require.EqualValues(t, before+resp.ChunksWritten, fake.texts.Load())
		})
	}
}

// A replica configured for another embedder than the stored vectors' starts
// with its vector side off (saying why, naming no model or setting), so an
// operator can call Reindex on it with the new configuration; then vector
// search works.
func TestIncompatibleEmbeddingsStartVectorsOffUntilReindexed(t *testing.T) {
	pool, _ := newDB(t)
	r := startReplica(t, pool, testConfig())
	mustIngest(t, r.client, corpus(12)...)
	ctx := context.Background()
	vector := &searchv1.SearchRequest{Query: "firewall", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, Limit: 3, NoCache: true}

	fake := &fakeEmbedder{t: t, an: analysis.NewEnglish()}
	ts := httptest.NewServer(fake)
	defer ts.Close()
	openai := testConfig()
	openai.Embedding.Provider, openai.Embedding.URL, openai.Embedding.Model, openai.Embedding.APIKey = "openai", ts.URL, "text-embedding-3-small", "sk-test-key"

	r2 := startReplica(t, pool, openai)
	var err error
	require.Eventually(t, func() bool {
		_, err = r2.client.Search(ctx, vector)
		return status.Code(err) == codes.Unavailable
	}, 10*time.Second, 20*time.Millisecond, "vector search is off on the mismatched replica: %v", err)
	require.ErrorContains(t, err, "does not match this replica's embedding configuration")
	require.NotEmpty(t, search(t, r2.client, &searchv1.SearchRequest{Query: "firewall", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 3}).Results,
		"keyword search works meanwhile")

	rep, err := r2.client.Reindex(ctx, &searchv1.ReindexRequest{})
	require.NoError(t, err)
	require.Equal(t, "openai:text-embedding-3-small:256:v1", rep.Model)
	require.Equal(t, rep.TotalChunks, rep.EmbeddedChunks)
	require.Eventually(t, func() bool {
		out, err := r2.client.Search(ctx, vector)
		return err == nil && len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond, "vector search works after the reindex")

	// Dimensions: a replica with a smaller vector size starts too, and its
	// reindex resizes the column.
	smaller := testConfig()
	smaller.Embedding.Dims = 128
	smaller.Embedding.Builtin.Dims = 128
	r3 := startReplica(t, pool, smaller)
	rep, err = r3.client.Reindex(ctx, &searchv1.ReindexRequest{})
	require.NoError(t, err)
	require.True(t, rep.ColumnResized)
	require.True(t, strings.HasPrefix(rep.Model, "builtin:lsa-v1:"), rep.Model)
	st, err := r3.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.EqualValues(t, 128, st.EmbedderDimensions)
	require.Eventually(t, func() bool {
		out, err := r3.client.Search(ctx, vector)
		return err == nil && len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond, "vector search works after the resize")
}

// While the embedding provider fails, hybrid ranks by BM25 alone and does not
// cache that list; vector mode says the provider is unavailable without
// repeating the provider's own text; recovery shows at once.
func TestEmbedderOutageDegradesHybridWithoutCaching(t *testing.T) {
	fake := &fakeEmbedder{t: t, an: analysis.NewEnglish()}
	ts := httptest.NewServer(fake)
	defer ts.Close()
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.Embedding.Provider, cfg.Embedding.URL, cfg.Embedding.Model, cfg.Embedding.APIKey = "openai", ts.URL, "text-embedding-3-small", "sk-test-key"
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(12)...)

	fake.down.Store(true)
	req := &searchv1.SearchRequest{Query: "firewall vulnerability", Limit: 5}
	for i := 0; i < 2; i++ {
		out := search(t, r.client, req)
		require.NotEmpty(t, out.Results)
		require.False(t, out.CacheHit, "a degraded list is never cached")
		for _, res := range out.Results {
			require.Zero(t, res.VectorRank)
		}
	}
	_, err := r.client.Search(context.Background(), &searchv1.SearchRequest{Query: "firewall vulnerability", Limit: 5,
		Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR})
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.NotContains(t, err.Error(), "10.9.8.7")

	fake.down.Store(false)
	out := search(t, r.client, req)
	require.False(t, out.CacheHit)
	seen := false
	for _, res := range out.Results {
		seen = seen || res.VectorRank > 0
	}
	require.True(t, seen, "vector ranks are back as soon as the provider is")
}
