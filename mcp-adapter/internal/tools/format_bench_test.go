package tools

import (
	"testing"
	"time"

	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
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
	var hits []model.Hit
	for i, c := range testfake.Corpus()[:10] {
		hits = append(hits, model.Hit{Chunk: c, Rank: i + 1, HybridScore: 0.8 - float64(i)/100, BM25Rank: i + 1, VectorRank: i + 2,
			SimilarityScore: 0.7, BM25Score: 0.6, ScoreType: model.ScoreHybrid, MatchedTerms: []string{"incident"}})
	}
	page := model.SearchPage{Hits: hits, TotalAvailable: 64, QueryTerms: []string{"incident", "severity"}}
	for _, mode := range []projection.Mode{projection.Metadata, projection.Full} {
		for _, f := range []render.Format{render.JSON, render.Both} {
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
