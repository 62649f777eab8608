package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// Reindex re-embeds every chunk with a new model and activates it; another
// replica of the same database switches to it through the change feed.
func TestReindexActivatesANewModelOnEveryReplica(t *testing.T) {
	pool, _ := newDB(t)
	r1 := startReplica(t, pool, testConfig())
	r2 := startReplica(t, pool, testConfig())
	mustIngest(t, r1.client, corpus(20)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before, err := r1.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, before.EmbedderModel, "the first ingestion trained a model")

	resp, err := r1.client.Reindex(ctx, &searchv1.ReindexRequest{})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Model)
	require.Equal(t, "builtin", resp.EmbedderProvider)
	require.True(t, resp.Trained)
	require.Positive(t, resp.TrainedChunks)
	require.Positive(t, resp.TotalChunks)
	require.Equal(t, resp.TotalChunks, resp.EmbeddedChunks, "every chunk re-embedded")

	require.Eventually(t, func() bool {
		st, err := r2.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		return err == nil && st.EmbedderModel == resp.Model
	}, 30*time.Second, 20*time.Millisecond, "the other replica switches to the reindexed model")
	vector := search(t, r2.client, &searchv1.SearchRequest{Query: "security audit", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, NoCache: true, Limit: 5})
	require.NotEmpty(t, vector.Results)
}

// With nothing stored there is nothing to train on: the caller is told why.
func TestReindexOfAnEmptyCorpusSaysWhy(t *testing.T) {
	r, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := r.client.Reindex(ctx, &searchv1.ReindexRequest{})
	requireCode(t, err, codes.FailedPrecondition)
	require.ErrorContains(t, err, "no model could be trained")
}
