package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// reads is a snapshot of a replica's store lookups.
type reads struct{ texts, mentions, vendors int64 }

func readsOf(c *store.ReadCounts) reads {
	return reads{c.ChunkTexts.Load(), c.ChunkMentions.Load(), c.QueryVendors.Load()}
}

// TestReadMaskSparesTheReadsItLeavesOut pins SearchRequest.read_mask and
// GetChunksRequest.read_mask on a replica that keeps chunk text only in
// PostgreSQL: an ids-only answer (what the adapter's ids_only mode asks
// for) looks up no text and no mention, counted by the store itself, and
// carries only the fields asked; an unmasked answer reads both.
func TestReadMaskSparesTheReadsItLeavesOut(t *testing.T) {
	mem, pool := start(t)
	mustIngest(t, mem.client, corpus(12)...)
	cfg := testConfig()
	cfg.TextInDatabase = true
	lean := startReplica(t, pool, cfg)
	counts := lean.svc.Reads()

	idsOnly := &fieldmaskpb.FieldMask{Paths: []string{"results.chunk.chunk_id", "results.hybrid_score", "results.rank"}}
	before := readsOf(counts)
	got := search(t, lean.client, &searchv1.SearchRequest{Query: "shared words security", Limit: 5, ReadMask: idsOnly})
	require.Len(t, got.Results, 5)
	require.Equal(t, before, readsOf(counts), "an ids-only page reads no text and no mention")
	for i, r := range got.Results {
		require.NotZero(t, r.GetChunk().GetChunkId())
		require.Equal(t, int32(i+1), r.GetRank())
		require.Positive(t, r.GetHybridScore())
		require.Empty(t, r.GetChunk().GetChunkText())
		require.Empty(t, r.GetChunk().GetContextHeader())
		require.Empty(t, r.GetChunk().GetSourceFile(), "fields not asked are not sent")
		require.Zero(t, r.GetBm25Score())
		require.Nil(t, r.GetChunk().GetUpdatedAt())
	}
	require.Positive(t, got.GetTotalAvailable(), "the page's own facts always come")
	require.NotEmpty(t, got.GetQueryTerms())

	full := search(t, lean.client, &searchv1.SearchRequest{Query: "shared words security", Limit: 5})
	after := readsOf(counts)
	require.Equal(t, reads{before.texts + 1, before.mentions + 1, before.vendors + 1}, after,
		"an unmasked page reads its text, its mentions and the query's vendors once each")
	for i, r := range full.Results {
		require.Equal(t, got.Results[i].GetChunk().GetChunkId(), r.GetChunk().GetChunkId())
		require.NotEmpty(t, r.GetChunk().GetChunkText())
		require.NotEmpty(t, r.GetChunk().GetSourceFile())
	}

	// Metadata without mentions: no text, no mention lookup; the query's
	// vendors are their own field.
	meta := &fieldmaskpb.FieldMask{Paths: []string{"results.chunk.source_file", "results.chunk.page", "query_vendors"}}
	search(t, lean.client, &searchv1.SearchRequest{Query: "authentication login", Limit: 5, ReadMask: meta})
	require.Equal(t, reads{after.texts, after.mentions, after.vendors + 1}, readsOf(counts))

	// GetChunks: chunks this replica has not shown yet, so their text is
	// in no cache.
	var ids []int64
	for _, r := range search(t, mem.client, &searchv1.SearchRequest{Query: "authentication login password", Limit: 5}).Results {
		ids = append(ids, r.GetChunk().GetChunkId())
	}
	ctx := context.Background()
	before = readsOf(counts)
	lite, err := lean.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: append(ids, 999999),
		ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"chunks.source_file"}}})
	require.NoError(t, err)
	require.Equal(t, before, readsOf(counts), "a text-free GetChunks reads no text")
	require.Equal(t, []int64{999999}, lite.GetMissingIds())
	require.Len(t, lite.GetChunks(), len(ids))
	for i, c := range lite.GetChunks() {
		require.Equal(t, ids[i], c.GetChunkId())
		require.NotEmpty(t, c.GetSourceFile())
		require.Empty(t, c.GetChunkText())
		require.Zero(t, c.GetChunkTokenCount())
	}
	whole, err := lean.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: ids})
	require.NoError(t, err)
	require.Equal(t, before.texts+1, readsOf(counts).texts)
	require.NotEmpty(t, whole.GetChunks()[0].GetChunkText())

	for _, bad := range []*fieldmaskpb.FieldMask{{Paths: []string{"results.chunk.nope"}}, {Paths: []string{"chunk_text"}}} {
		_, err := lean.client.Search(ctx, &searchv1.SearchRequest{Query: "security", Limit: 5, ReadMask: bad})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", bad)
	}
	_, err = lean.client.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: ids, ReadMask: &fieldmaskpb.FieldMask{Paths: []string{"results"}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}
