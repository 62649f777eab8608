package server_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/readmask"
)

// BenchmarkReadMask measures what a read mask adds to a search answer of
// 10 results: validating the mask the adapter sends in metadata mode, and
// clearing the fields it leaves out.
func BenchmarkReadMask(b *testing.B) {
	page := &searchv1.SearchResponse{TotalAvailable: 120, QueryTerms: []string{"incident", "severity"}}
	for i := range 10 {
		page.Results = append(page.Results, &searchv1.SearchResult{
			Chunk: &searchv1.Chunk{ChunkId: int64(i + 1), DocumentId: "doc", SourceFile: "docs/a.md", SourceCategory: "security",
				Title: "A", ContextHeader: "A > B", ChunkText: strings.Repeat("word ", 100), ChunkIndex: 1, TotalChunks: 3,
				ChunkTokenCount: 100, UpdatedAt: timestamppb.Now()},
			Rank: int32(i + 1), HybridScore: 0.5, SimilarityScore: 0.4, Bm25Score: 0.3, MatchedTerms: []string{"incident"},
			Bm25Rank: 2, VectorRank: 3,
		})
	}
	fm := &fieldmaskpb.FieldMask{Paths: []string{"results.chunk.chunk_id", "results.chunk.source_file", "results.chunk.source_category",
		"results.hybrid_score", "results.rank", "results.chunk.chunk_index", "results.chunk.total_chunks", "results.chunk.page",
		"results.mentions", "results.similarity_score", "results.matched_terms"}}
	desc := page.ProtoReflect().Descriptor()
	always := []string{"results.chunk.chunk_id", "results.rank", "total_available"}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readmask.New(fm, desc, always...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("prune", func(b *testing.B) {
		mask, err := readmask.New(fm, desc, always...)
		if err != nil {
			b.Fatal(err)
		}
		// Fresh copies made before the clock starts: pruning empties them.
		copies := make([]*searchv1.SearchResponse, b.N)
		for i := range copies {
			copies[i] = proto.Clone(page).(*searchv1.SearchResponse)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for _, resp := range copies {
			mask.Prune(resp)
		}
	})
}
