package tools

import (
	"testing"
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/respond"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// BenchmarkFormatSearchPage measures the adapter's own work on one page of
// 10 search results once the backend has answered: projection, desktop
// signals, estimate, budget check, encoding and the exact token count.
func BenchmarkFormatSearchPage(b *testing.B) {
	_ = tokens.Init()
	codec, _ := cursor.New([]byte("bench-secret-0123456789"))
	s := newServer(Options{
		Cursors: codec, Thresholds: warnings.Defaults, Desktop: true,
		Signals: signals.Config{DefaultWeight: 0.7, HalfLife: time.Hour * 4320, IncludeConfidence: true},
	})
	var hits []*searchv1.SearchResult
	for i, c := range testfake.Corpus()[:10] {
		hits = append(hits, &searchv1.SearchResult{Chunk: c, Rank: int32(i + 1), HybridScore: 0.8 - float64(i)/100, Bm25Rank: int32(i + 1),
			VectorRank: int32(i + 2), SimilarityScore: 0.7, Bm25Score: 0.6, ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
			MatchedTerms: []string{"incident"}})
	}
	page := &searchv1.SearchResponse{Results: hits, TotalAvailable: 64, QueryTerms: []string{"incident", "severity"}}
	for _, mode := range []projection.Mode{projection.Metadata, projection.Full} {
		for _, f := range []render.Format{render.Markdown, render.JSON, render.Both} {
			b.Run(string(mode)+"/"+string(f), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					call := &respond.Call{Operation: ToolSemanticSearch, RequestID: "req_0011223344556677", Started: time.Now(), Format: f}
					p := searchParams{query: "incident severity", pageSize: 10, mode: mode}
					c := &searchContent{s: s, p: p, page: page, queryHash: cursor.QueryHash(p.query),
						fields: projection.SearchFields(mode), withSignals: mode != projection.IDsOnly}
					c.project()
					s.resp.Success(call, call.NewEnvelope(), c)
				}
			})
		}
	}
}
