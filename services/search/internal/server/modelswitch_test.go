package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// switchModelSilently makes a new model row active, as another replica's
// retrain does, but without the notification, so this replica keeps its
// old model until told.
func switchModelSilently(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var row int64
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO embedding_models (model_id, provider, dimensions, params)
			SELECT model_id || '-next', provider, dimensions, params FROM embedding_models WHERE active RETURNING id`).Scan(&row); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = false WHERE active`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = true WHERE id = $1`, row); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE chunks SET embedding_model_id = $1 WHERE embedding IS NOT NULL`, row)
		return err
	}))
	return row
}

// A query embedded by the model this replica holds is never compared with
// the vectors of a model another replica has just made active: within the
// switch, vector mode is UNAVAILABLE (retryable) and hybrid ranks by BM25
// alone, uncached; a query in flight when the replica loads the new model
// waits for it and answers with it.
func TestModelSwitchNeverMixesModels(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.PollInterval = time.Hour // only a notification makes this replica sync
	// The database path's guard is under test. The vector mirror never
	// mixes models either: it answers only for the model the replica holds
	// (engine's TestMirrorAnswersOnlyAsNewAsTheFeed), with that model's
	// vectors as the replica last heard of them.
	cfg.VectorMirrorMB = 0
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(20)...)
	// No client retries: each answer below is the server's first.
	conn, err := grpcclient.Dial(r.addr, token, grpc.WithDisableRetry())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := searchv1.NewSearchServiceClient(conn)
	ctx := context.Background()
	vectorReq := &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 5}
	require.Eventually(t, func() bool {
		out, err := client.Search(ctx, vectorReq)
		return err == nil && len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond, "the model is trained after the first ingest")

	switchModelSilently(t, pool)

	var trailer metadata.MD
	_, err = client.Search(ctx, vectorReq, grpc.Trailer(&trailer))
	requireCode(t, err, codes.Unavailable)
	require.Empty(t, trailer.Get("grpc-retry-pushback-ms"), "answered fast enough for clients to retry")

	bm25 := search(t, client, &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 10})
	hybridReq := &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Limit: 10}
	hybrid := search(t, client, hybridReq)
	require.NotEmpty(t, hybrid.Results)
	require.Equal(t, docIDs(bm25), docIDs(hybrid), "hybrid ranks by BM25 alone while the model is switched")
	require.False(t, search(t, client, hybridReq).CacheHit, "a list ranked without the vector side is not cached")

	// A vector query in flight when the notification arrives waits for the
	// new model instead of failing (the wait is 250 ms; the notification
	// comes 50 ms after the query left).
	done := make(chan error, 1)
	go func() {
		out, err := client.Search(ctx, vectorReq)
		if err == nil && len(out.Results) == 0 {
			err = errors.New("no results")
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = pool.Exec(ctx, `SELECT pg_notify($1, 'v')`, store.Channel)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NotEmpty(t, search(t, client, vectorReq).Results)
}

// With the vector mirror (the default), a replica that has not heard of a
// switch answers from its graph of the model it holds, which embedded the
// query: the answers are the ones it gave before the switch, never a mix.
// Once the feed brings the switch, the graph is rebuilt for the new model
// and answers again.
func TestModelSwitchWithTheMirror(t *testing.T) {
	pool, _ := newDB(t)
	cfg := testConfig()
	cfg.PollInterval = time.Hour // only a notification makes this replica sync
	r := startReplica(t, pool, cfg)
	mustIngest(t, r.client, corpus(20)...)
	ctx := context.Background()
	awaitMirror(t, r, "security audit")
	vectorReq := &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 10}
	mirrorAnswers := func() float64 { return counter(t, r.reg, "bmcis_search_vector_path_total", "path", "mirror") }
	before := search(t, r.client, vectorReq)
	require.NotEmpty(t, before.Results)

	switchModelSilently(t, pool)
	n := mirrorAnswers()
	during := search(t, r.client, vectorReq)
	require.Greater(t, mirrorAnswers(), n, "the graph of the model the replica holds answers")
	require.Equal(t, docIDs(before), docIDs(during), "the same model's answers as before the switch")

	_, err := pool.Exec(ctx, `SELECT pg_notify($1, 'v')`, store.Channel)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		return err == nil && strings.HasSuffix(st.GetEmbedderModel(), "-next")
	}, 30*time.Second, 20*time.Millisecond, "the replica loads the new model")
	require.Eventually(t, func() bool {
		n := mirrorAnswers()
		resp, err := r.client.Search(ctx, vectorReq)
		return err == nil && len(resp.Results) > 0 && mirrorAnswers() > n
	}, 30*time.Second, 20*time.Millisecond, "rebuilt for the new model, the graph answers again")
}

// A model this replica cannot load (here: a format newer than it reads,
// as during a rolling upgrade) makes vector mode UNAVAILABLE with the
// reason in a caller's words, not "no model is active yet"; hybrid keeps
// answering by BM25, and the replica recovers by itself once a model it
// reads is active again.
func TestUnusableModelIsNamed(t *testing.T) {
	pool, _ := newDB(t)
	r := startReplica(t, pool, testConfig())
	mustIngest(t, r.client, corpus(20)...)
	ctx := context.Background()
	vectorReq := &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 5}
	require.Eventually(t, func() bool {
		out, err := r.client.Search(ctx, vectorReq)
		return err == nil && len(out.Results) > 0
	}, 10*time.Second, 20*time.Millisecond, "the model is trained after the first ingest")
	var shipped int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM embedding_models WHERE active`).Scan(&shipped))

	activate := func(row int64) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = false WHERE active`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE embedding_models SET active = true WHERE id = $1`, row); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_notify($1, 'v')`, store.Channel)
			return err
		}))
	}
	// Magic, then format version 99, model version 1, 16 dimensions.
	future := append([]byte("BMCISLSA"), 99, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0)
	var row int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO embedding_models (model_id, provider, dimensions, params)
		SELECT model_id || '-future', provider, dimensions, $1 FROM embedding_models WHERE active RETURNING id`, future).Scan(&row))
	activate(row)

	require.Eventually(t, func() bool {
		_, err := r.client.Search(ctx, vectorReq)
		return strings.Contains(status.Convert(err).Message(), "vector search is off")
	}, 5*time.Second, 20*time.Millisecond)
	_, err := r.client.Search(ctx, vectorReq)
	requireCode(t, err, codes.Unavailable)
	msg := status.Convert(err).Message()
	require.Contains(t, msg, "vector search is off on this replica")
	require.Contains(t, msg, "needs upgrading")
	require.NotContains(t, msg, "no embedding model is active yet")
	require.NotContains(t, msg, "bmcisctl", "operators' commands stay in the log")
	require.NotContains(t, msg, "-future", "model ids stay in the log")
	hybridReq := &searchv1.SearchRequest{Query: "security audit", Limit: 5}
	require.NotEmpty(t, search(t, r.client, hybridReq).Results, "hybrid answers by BM25")
	// The unusable model is handled once, not again at every poll (200 ms
	// here), which would empty the result cache each time.
	time.Sleep(500 * time.Millisecond)
	require.True(t, search(t, r.client, hybridReq).CacheHit, "polls leave the cache alone while the model stays unusable")

	// Ingesting still works: the documents are stored and keyword-searchable;
	// replicas that read the active model embed them.
	mustIngest(t, r.client, md("late.md", "data", "Late", "# Late\n\nQuokka census notes."))
	require.Len(t, search(t, r.client, &searchv1.SearchRequest{Query: "quokka census", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Limit: 5}).Results, 1)

	activate(shipped)
	require.Eventually(t, func() bool {
		out, err := r.client.Search(ctx, vectorReq)
		return err == nil && len(out.Results) > 0
	}, 5*time.Second, 20*time.Millisecond, "vector search comes back with a model the replica reads")
}
