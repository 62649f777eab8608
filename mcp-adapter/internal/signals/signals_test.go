package signals_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
)

var now = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func cfg() signals.Config {
	return signals.Config{
		CategoryWeights: map[string]float64{"security": 0.9}, DefaultWeight: 0.6,
		HalfLife: 100 * 24 * time.Hour, IncludeConfidence: true, Now: func() time.Time { return now },
	}
}

func TestScoreReliability(t *testing.T) {
	cases := []struct {
		name string
		hit  *searchv1.SearchResult
		want float64
	}{
		{"retrievers agree", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Bm25Rank: 3, VectorRank: 3}, 1},
		{"first vs last", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Bm25Rank: 1, VectorRank: 100}, 0.5},
		{"half apart in log", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Bm25Rank: 1, VectorRank: 10}, 0.75},
		{"keyword only", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, Bm25Rank: 2, Bm25Score: 0.8}, 0.45},
		{"semantic only", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, VectorRank: 2, SimilarityScore: 0.4}, 0.35},
		{"bm25 mode", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, Bm25Score: 0.5}, 0.5},
		{"neither", &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID}, 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, signals.ScoreReliability(tc.hit, 100), 1e-9)
		})
	}
}

func TestRecencyAndSource(t *testing.T) {
	c := cfg()
	require.Equal(t, 1.0, c.Recency(now.Add(time.Hour)), "future dates are fresh")
	require.InDelta(t, 0.5, c.Recency(now.Add(-100*24*time.Hour)), 1e-9, "half-life")
	require.InDelta(t, 0.25, c.Recency(now.Add(-200*24*time.Hour)), 1e-9)
	require.Equal(t, 0.5, c.Recency(time.Time{}), "unknown dates are neutral")
	require.Equal(t, 0.9, c.SourceQuality("Security"))
	require.Equal(t, 0.6, c.SourceQuality("misc"))
	require.Equal(t, 0.6, c.SourceQuality(""))
}

func TestConfidenceOverall(t *testing.T) {
	h := &searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, HybridScore: 0.8, Bm25Rank: 2, VectorRank: 2,
		Chunk: &searchv1.Chunk{SourceCategory: "security", UpdatedAt: timestamppb.New(now)}}
	c := cfg().ConfidenceOf(h, 50)
	require.Equal(t, 1.0, c.ScoreReliability)
	require.Equal(t, 0.9, c.SourceQuality)
	require.Equal(t, 1.0, c.Recency)
	require.InDelta(t, 0.4*0.8+0.3*1+0.2*0.9+0.1*1, c.Overall, 1e-9)
}

func TestPercentileAndExplanation(t *testing.T) {
	require.Equal(t, 100, signals.Percentile(1, 42))
	require.Equal(t, 0, signals.Percentile(42, 42))
	require.Equal(t, 50, signals.Percentile(11, 21))
	require.Equal(t, 100, signals.Percentile(1, 1))
	require.Equal(t, "Top", signals.Tier(0.85))
	require.Equal(t, "Weak", signals.Tier(0.1))
	cases := []struct {
		hit  *searchv1.SearchResult
		want string
	}{
		{&searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, HybridScore: 0.9, Bm25Rank: 1, VectorRank: 2, MatchedTerms: []string{"jwt", "token", "refresh", "extra"}},
			"Top: semantic #2, keyword #1; matched jwt, token, refresh"},
		{&searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, HybridScore: 0.7, Bm25Rank: 3, VectorRank: 7, MatchedTerms: []string{"how", "do", "we", "handle", "suspected", "incident", "evidence"}},
			"High: semantic #7, keyword #3; matched handle, suspected, incident"},
		{&searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, HybridScore: 0.5, Bm25Rank: 4, MatchedTerms: []string{"the", "and"}},
			"Moderate: keyword #4, weak semantic"},
		{&searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, HybridScore: 0.3, VectorRank: 5}, "Weak: semantic #5, no keyword match"},
		{&searchv1.SearchResult{ScoreType: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, HybridScore: 0.3, Bm25Rank: 2, Rank: 2}, "Weak: keyword #2 only"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, signals.Explanation(tc.hit))
	}
}

func TestDedup(t *testing.T) {
	text := "the quick brown fox jumps over the lazy dog"
	page := map[int64]string{1: text, 2: text, 3: "entirely different words here for sure"}
	d := signals.DedupOf(&searchv1.SearchResult{Chunk: &searchv1.Chunk{ChunkId: 2, ChunkText: text}, IsDuplicate: true, SimilarChunkIds: []int64{1}}, page)
	require.Equal(t, 1.0, d.Confidence)
	d = signals.DedupOf(&searchv1.SearchResult{Chunk: &searchv1.Chunk{ChunkId: 2, ChunkText: text}, SimilarChunkIds: []int64{99}}, page)
	require.Equal(t, 0.8, d.Confidence, "linked chunks off the page")
	d = signals.DedupOf(&searchv1.SearchResult{Chunk: &searchv1.Chunk{ChunkId: 3, ChunkText: page[3]}}, page)
	require.Equal(t, 1.0, d.Confidence)
	require.NotNil(t, d.SimilarChunkIDs)
}

func TestPageSignals(t *testing.T) {
	hits := []*searchv1.SearchResult{
		{Rank: 1, HybridScore: 0.9, MatchedTerms: []string{"jwt"}, Chunk: &searchv1.Chunk{ChunkId: 1, SourceCategory: "security"}},
		{Rank: 2, HybridScore: 0.75, MatchedTerms: []string{"jwt", "refresh"}, Chunk: &searchv1.Chunk{ChunkId: 2, SourceCategory: "auth"}},
		{Rank: 3, HybridScore: 0.5, IsDuplicate: true, SimilarChunkIds: []int64{1}, Chunk: &searchv1.Chunk{ChunkId: 3, SourceCategory: "auth"}},
		{Rank: 4, HybridScore: 0.95, Chunk: &searchv1.Chunk{ChunkId: 4, SourceCategory: "auth"}},
	}
	p := signals.Page{Hits: hits, TotalAvailable: 10, QueryTerms: []string{"jwt", "refresh", "rotation", "jwt"}}
	vh := cfg().VisualHints(p)
	require.Equal(t, 2, vh.HighlightTop, "leading results over 0.7")
	require.Equal(t, "source_category", *vh.GroupBy)
	qa := signals.QueryAnalysis(p)
	require.Equal(t, []string{"rotation"}, qa.UnmatchedTerms)
	require.Empty(t, qa.Vendors)
	p.QueryTerms = []string{"jwt", "refresh"}
	require.Nil(t, signals.QueryAnalysis(p), "every term matched: nothing to say")
	p.QueryVendors = []*searchv1.EntityMention{{Name: "Acme Corp", EntityId: "e1"}, {Name: "Acme Corp", EntityId: "e1"}}
	qa = signals.QueryAnalysis(p)
	require.Equal(t, []string{"Acme Corp"}, qa.Vendors, "the names, once")
	require.Empty(t, qa.UnmatchedTerms)
	p.QueryVendors = nil

	fields := cfg().Annotate(p)
	require.Len(t, fields, 4)
	require.Equal(t, []string{"confidence", "ranking"}, []string{fields[0][0].Key, fields[0][1].Key}, "no near duplicate: no deduplication block")
	require.Len(t, fields[0], 2)
	require.Equal(t, []string{"confidence", "ranking", "deduplication"}, []string{fields[2][0].Key, fields[2][1].Key, fields[2][2].Key})
	rk := fields[3][1].Value.(envelope.Object)
	pct, _ := rk.Get("percentile")
	require.Equal(t, signals.Percentile(4, 10), pct)
	noConf := cfg()
	noConf.IncludeConfidence = false
	require.Len(t, noConf.Annotate(p)[0], 1)
	require.Len(t, noConf.Annotate(p)[2], 2)
	for _, f := range fields {
		conf := f[0].Value.(envelope.Object)
		for _, kv := range conf {
			v := kv.Value.(float64)
			require.False(t, math.IsNaN(v))
			require.True(t, v >= 0 && v <= 1)
		}
	}
}
