package server_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/server"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// TestModelDoesNotDependOnIngestOrder: the same documents ingested in
// another order (so stored under other chunk ids) train the same builtin
// model, byte for byte, with the whole corpus as the sample and with a
// sample cap smaller than the corpus.
func TestModelDoesNotDependOnIngestOrder(t *testing.T) {
	docs := append(corpus(24), labCorpus(16)...)
	shuffled := slices.Clone(docs)
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	trained := func(cfgCap int, order []*searchv1.Document) (model string, trainedOn int64, pool *pgxpool.Pool, cfg server.Config) {
		pool, _ = newDB(t)
		cfg = testConfig()
		if cfgCap > 0 {
			cfg.Embedding.Builtin.MaxTrainDocs = cfgCap
		}
		r := startReplica(t, pool, cfg)
		resp := mustIngest(t, r.client, order...)
		var st *searchv1.GetIndexStatusResponse
		require.Eventually(t, func() bool {
			got, err := r.client.GetIndexStatus(context.Background(), &searchv1.GetIndexStatusRequest{})
			if err != nil {
				return false
			}
			st = got
			return st.EmbedderModel != "" && st.Chunks == int64(resp.ChunksWritten) && !st.RetrainPending
		}, 60*time.Second, 50*time.Millisecond, "no model trained on the whole corpus")
		return st.EmbedderModel, st.ModelTrainedChunks, pool, cfg
	}
	for _, limit := range []int{0, 25} {
		a, na, pool, cfg := trained(limit, docs)
		b, nb, _, _ := trained(limit, shuffled)
		require.Equal(t, a, b, "sample cap %d: the same model whatever the ingest order", limit)
		require.Equal(t, na, nb)
		if limit > 0 {
			require.EqualValues(t, limit, na, "the cap is the sample's size")
		}

		// An automatic retrain of an unchanged corpus trains the active
		// model again: nothing is re-embedded. An explicit reindex still
		// re-embeds every chunk.
		ctx := context.Background()
		var row int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM embedding_models WHERE active`).Scan(&row))
		m, err := embedding.New(store.New(pool), cfg.Embedding, analysis.NewEnglish(), discardLog())
		require.NoError(t, err)
		rep, err := m.Sweep(ctx, embedding.SweepOptions{Wait: true, Reindex: true, Bulk: true, RetrainOf: row})
		require.NoError(t, err)
		require.True(t, rep.Unchanged)
		require.Equal(t, a, rep.Model)
		require.Zero(t, rep.Embedded)
		rep, err = m.Sweep(ctx, embedding.SweepOptions{Wait: true, Reindex: true, Bulk: true})
		require.NoError(t, err)
		require.False(t, rep.Unchanged)
		require.Equal(t, a, rep.Model)
		require.EqualValues(t, rep.TotalChunks, rep.Embedded)
	}
}
