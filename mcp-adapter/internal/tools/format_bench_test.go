package tools

import (
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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
	// pageOf is a page of 10; pages of different n have other chunk ids
	// (so other headings and links) and totals.
	corpus := testfake.Corpus()[:10]
	pageOf := func(n int) *searchv1.SearchResponse {
		var hits []*searchv1.SearchResult
		for i, c := range corpus {
			if n > 0 {
				c = proto.Clone(c).(*searchv1.Chunk)
				c.ChunkId += int64(n) * 100
			}
			hits = append(hits, &searchv1.SearchResult{Chunk: c, Rank: int32(i + 1), HybridScore: 0.8 - float64(i)/100, Bm25Rank: int32(i + 1),
				VectorRank: int32(i + 2), SimilarityScore: 0.7, Bm25Score: 0.6, ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
				MatchedTerms: []string{"incident"}})
		}
		return &searchv1.SearchResponse{Results: hits, TotalAvailable: int32(64 + n), QueryTerms: []string{"incident", "severity"}}
	}
	page := pageOf(0)
	for _, mode := range []projection.Mode{projection.Metadata, projection.Full} {
		for _, f := range []render.Format{render.Markdown, render.JSON, render.Both} {
			b.Run(string(mode)+"/"+string(f), func(b *testing.B) {
				cpu := benchCPU(b)
				defer func() { b.ReportMetric(float64(benchCPU(b)-cpu)/float64(b.N), "cpu-ns/op") }()
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
	// "replay" is the answer cache's hit of the same page: the answer kept
	// once (respond.Freeze), answered again with a new request id and
	// timings (respond.Replay).
	for _, f := range []render.Format{render.Markdown, render.JSON, render.Both} {
		b.Run("metadata/"+string(f)+"/replay", func(b *testing.B) {
			call := &respond.Call{Operation: ToolSemanticSearch, RequestID: "req_0011223344556677", Started: time.Now(), Format: f}
			p := searchParams{query: "incident severity", pageSize: 10, mode: projection.Metadata}
			c := &searchContent{s: s, p: p, page: page, queryHash: cursor.QueryHash(p.query),
				fields: projection.SearchFields(p.mode), withSignals: true}
			c.project()
			s.resp.Success(call, call.NewEnvelope(), c)
			frozen, ok := s.resp.Freeze(call)
			if !ok {
				b.Fatal("the page was not kept")
			}
			cpu := benchCPU(b)
			defer func() { b.ReportMetric(float64(benchCPU(b)-cpu)/float64(b.N), "cpu-ns/op") }()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				call := &respond.Call{Operation: ToolSemanticSearch, RequestID: "req_0011223344556677", Started: time.Now(), Format: f}
				s.resp.Replay(call, frozen)
			}
		})
	}
	// The same page is formatted again above (a search repeated, answered
	// from the search cache); "fresh" formats a different page each time,
	// more pages than the adapter's memos of counts and estimates hold.
	pages := make([]*searchv1.SearchResponse, 2000)
	for n := range pages {
		pages[n] = pageOf(n + 1)
	}
	b.Run("metadata/markdown/fresh", func(b *testing.B) {
		cpu := benchCPU(b)
		defer func() { b.ReportMetric(float64(benchCPU(b)-cpu)/float64(b.N), "cpu-ns/op") }()
		for i := 0; i < b.N; i++ {
			call := &respond.Call{Operation: ToolSemanticSearch, RequestID: "req_0011223344556677", Started: time.Now(), Format: render.Markdown}
			p := searchParams{query: "incident severity", pageSize: 10, mode: projection.Metadata}
			c := &searchContent{s: s, p: p, page: pages[i%len(pages)], queryHash: cursor.QueryHash(p.query),
				fields: projection.SearchFields(p.mode), withSignals: true}
			c.project()
			s.resp.Success(call, call.NewEnvelope(), c)
		}
	})
}

// benchCPU is the user and system CPU time this process has used: on a
// shared machine, steadier than the wall time.
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
