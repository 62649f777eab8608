package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// TestReadScope: a scoped request sees only its categories, in results,
// totals, chunks, categories and index counts, in every retrieval mode.
func TestReadScope(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(40)...)
	ctx := context.Background()
	scope := &searchv1.ReadScope{Categories: []string{"Cloud", "data"}} // resolved like the filter: case-insensitively
	inScope := []string{"cloud", "data"}
	const query = "security network backup incident"

	var outOfScope, allowed int64
	for _, mode := range []searchv1.RetrievalMode{searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR} {
		t.Run(mode.String(), func(t *testing.T) {
			open := search(t, r.client, &searchv1.SearchRequest{Query: query, Mode: mode})
			filtered := search(t, r.client, &searchv1.SearchRequest{Query: query, Mode: mode, Categories: inScope})
			scoped := search(t, r.client, &searchv1.SearchRequest{Query: query, Mode: mode, Scope: scope})
			require.NotEmpty(t, scoped.Results)
			for _, res := range scoped.Results {
				require.Contains(t, inScope, res.Chunk.SourceCategory)
			}
			require.Less(t, scoped.TotalAvailable, open.TotalAvailable, "the open list holds other categories")
			require.Equal(t, filtered.TotalAvailable, scoped.TotalAvailable, "the total is counted inside the scope")
			require.Equal(t, docIDs(filtered), docIDs(scoped))
			for _, res := range open.Results {
				if res.Chunk.SourceCategory == "security" {
					outOfScope = res.Chunk.ChunkId
				} else if res.Chunk.SourceCategory == "cloud" {
					allowed = res.Chunk.ChunkId
				}
			}
		})
	}

	t.Run("a filter inside the scope narrows it", func(t *testing.T) {
		out := search(t, r.client, &searchv1.SearchRequest{Query: query, Categories: []string{"data"}, Scope: scope})
		require.NotEmpty(t, out.Results)
		for _, res := range out.Results {
			require.Equal(t, "data", res.Chunk.SourceCategory)
		}
	})
	t.Run("a category outside the scope is unknown", func(t *testing.T) {
		_, err := r.client.Search(ctx, &searchv1.SearchRequest{Query: query, Limit: 5, Categories: []string{"security"}, Scope: scope})
		requireField(t, err, "categories")
		_, missing := r.client.Search(ctx, &searchv1.SearchRequest{Query: query, Limit: 5, Categories: []string{"nope"}, Scope: scope})
		const unknown = "categories: unknown category"
		require.True(t, strings.HasPrefix(status.Convert(err).Message(), unknown), "same answer as a missing one: %v", err)
		require.True(t, strings.HasPrefix(status.Convert(missing).Message(), unknown), "%v", missing)
	})
	t.Run("a scope of categories that do not exist finds nothing", func(t *testing.T) {
		out := search(t, r.client, &searchv1.SearchRequest{Query: query, Scope: &searchv1.ReadScope{Categories: []string{"hr"}}})
		require.Empty(t, out.Results)
		require.Zero(t, out.TotalAvailable)
	})

	t.Run("chunks outside the scope are missing", func(t *testing.T) {
		require.NotZero(t, outOfScope)
		require.NotZero(t, allowed)
		resp, err := r.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{outOfScope, allowed, 999999}, Scope: scope})
		require.NoError(t, err)
		require.Len(t, resp.Chunks, 1)
		require.Equal(t, allowed, resp.Chunks[0].ChunkId)
		require.Equal(t, []int64{outOfScope, 999999}, resp.MissingIds, "as if it did not exist")
		open, err := r.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{outOfScope}})
		require.NoError(t, err)
		require.Len(t, open.Chunks, 1, "unscoped requests keep today's behaviour")
	})

	t.Run("categories and index counts cover the scope", func(t *testing.T) {
		cats, err := r.client.ListCategories(ctx, &searchv1.ListCategoriesRequest{Scope: scope})
		require.NoError(t, err)
		var names []string
		for _, c := range cats.Categories {
			names = append(names, c.Name)
		}
		require.Equal(t, inScope, names)

		all, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		require.NoError(t, err)
		st, err := r.client.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{Scope: scope})
		require.NoError(t, err)
		require.EqualValues(t, 20, st.Documents)
		require.EqualValues(t, 40, all.Documents)
		require.Equal(t, all.Chunks/2, st.Chunks, "every corpus document has the same number of chunks")
		// The model was trained on the whole corpus, and its age and
		// coverage move with writes a scoped key may not read: it sees none
		// of them (TestIndexStatusHidesUnreadableChanges).
		require.Equal(t, all.Chunks, all.ModelTrainedChunks)
		require.NotNil(t, all.ModelTrainedAt)
		require.Positive(t, all.ModelTermCoverage)
		require.Zero(t, st.ModelTrainedChunks)
		require.Nil(t, st.ModelTrainedAt)
		require.Zero(t, st.ModelTermCoverage)
	})
}
