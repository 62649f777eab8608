package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
)

// TestLimitsEnforced holds the service to every limit of its requests in
// platform/limits, the table the MCP adapter's tests hold the adapter to:
// at either end of a limit the request is served, one past it is refused
// with INVALID_ARGUMENT naming the field.
func TestLimitsEnforced(t *testing.T) {
	r, _ := start(t)
	mustIngest(t, r.client, corpus(4)...)
	ctx := context.Background()
	call := map[protoreflect.FullName]func(limits.Limit, int) error{
		"bmcis.search.v1.SearchRequest": func(l limits.Limit, n int) error {
			_, err := r.client.Search(ctx, limits.With(l, &searchv1.SearchRequest{Query: "shared", Limit: 10}, n))
			return err
		},
		"bmcis.search.v1.GetChunksRequest": func(l limits.Limit, n int) error {
			_, err := r.client.GetChunks(ctx, limits.With(l, &searchv1.GetChunksRequest{ChunkIds: []int64{1}}, n))
			return err
		},
		"bmcis.search.v1.ListDocumentsRequest": func(l limits.Limit, n int) error {
			_, err := r.client.ListDocuments(ctx, limits.With(l, &searchv1.ListDocumentsRequest{}, n))
			return err
		},
	}
	checked := 0
	for _, l := range limits.All() {
		do, ok := call[l.Message()]
		if !ok {
			continue
		}
		checked++
		t.Run(l.Name(), func(t *testing.T) {
			require.NoError(t, do(l, l.Min), "at the minimum %d", l.Min)
			if n, ok := l.Over(); ok {
				require.NoError(t, do(l, l.Max), "at the maximum %d", l.Max)
				requireField(t, do(l, n), l.Name())
			}
			if n, ok := l.Under(); ok {
				requireField(t, do(l, n), l.Name())
			}
		})
	}
	require.Equal(t, 8, checked, "query, limit, offset, chunk_ids, and ListDocuments' source, category, id_prefix and page_size")
}
