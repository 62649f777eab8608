// Package signals derives the Claude Desktop signals attached to search
// results: confidence, ranking and de-duplication per result, layout hints
// for the page, and which query terms the page matched. Every number comes
// from data the search service returns (retriever ranks and scores,
// updated_at, category, near-duplicate links); docs/MCP.md gives the
// formulas.
package signals

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
)

// Reads lists what the signals read of a search result (paths of
// searchv1.SearchResult), shown or not: a page that gets signals asks the
// search service for them (projection.SearchReads), and for the vendors
// the query names (QueryReads).
var Reads = []string{"rank", "hybrid_score", "similarity_score", "bm25_score", "score_type", "bm25_rank", "vector_rank",
	"matched_terms", "is_duplicate", "similar_chunk_ids",
	"chunk.chunk_id", "chunk.chunk_text", "chunk.source_category", "chunk.updated_at"}

// QueryReads lists what the page-level signals read of a search answer
// besides its results (paths of searchv1.SearchResponse).
var QueryReads = []string{"query_vendors"}

// Config holds the tunables of the signals.
type Config struct {
	// CategoryWeights rate sources by category (lowercase names), 0..1.
	CategoryWeights map[string]float64
	// DefaultWeight rates categories absent from CategoryWeights.
	DefaultWeight float64
	// HalfLife is the age at which recency drops to 0.5.
	HalfLife time.Duration
	// IncludeConfidence adds the confidence block.
	IncludeConfidence bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Confidence scores, each 0..1.
type Confidence struct {
	ScoreReliability float64
	SourceQuality    float64
	Recency          float64
	Overall          float64
}

// Overall weights.
const (
	wHybrid      = 0.4
	wReliability = 0.3
	wSource      = 0.2
	wRecency     = 0.1
)

// ScoreReliability measures how far the retrievers agree on a hit.
//
// When both BM25 and vector retrieval returned the chunk, agreement is
// 1 - |ln(bm25_rank) - ln(vector_rank)| / ln(D), D being the depth of the
// ranked list (at least 2), and reliability is 0.5 + 0.5*agreement. When
// only one retriever returned it, the fused score rests on one signal:
// 0.25 + 0.25*s, s that retriever's score. A single-retriever query has
// nothing to agree with: 0.25 + 0.5*s.
func ScoreReliability(h *searchv1.SearchResult, depth int) float64 {
	switch model.Method(h.GetScoreType()) {
	case model.ScoreBM25:
		return clamp01(0.25 + 0.5*h.GetBm25Score())
	case model.ScoreVector:
		return clamp01(0.25 + 0.5*h.GetSimilarityScore())
	}
	bm25Rank, vectorRank := int(h.GetBm25Rank()), int(h.GetVectorRank())
	switch {
	case bm25Rank > 0 && vectorRank > 0:
		d := max(depth, bm25Rank, vectorRank, 2)
		agreement := 1 - math.Abs(math.Log(float64(bm25Rank))-math.Log(float64(vectorRank)))/math.Log(float64(d))
		return clamp01(0.5 + 0.5*clamp01(agreement))
	case bm25Rank > 0:
		return clamp01(0.25 + 0.25*h.GetBm25Score())
	case vectorRank > 0:
		return clamp01(0.25 + 0.25*h.GetSimilarityScore())
	}
	return 0.25
}

// SourceQuality is the configured weight of the hit's category.
func (c Config) SourceQuality(category string) float64 {
	if w, ok := c.CategoryWeights[strings.ToLower(strings.TrimSpace(category))]; ok {
		return clamp01(w)
	}
	return clamp01(c.DefaultWeight)
}

// Recency halves every HalfLife of age: 0.5^(age/half_life). Unknown dates
// score a neutral 0.5; dates in the future score 1.
func (c Config) Recency(updated time.Time) float64 {
	if updated.IsZero() || c.HalfLife <= 0 {
		return 0.5
	}
	age := c.now().Sub(updated)
	if age <= 0 {
		return 1
	}
	return math.Pow(0.5, float64(age)/float64(c.HalfLife))
}

// ConfidenceOf combines the signals of one hit.
func (c Config) ConfidenceOf(h *searchv1.SearchResult, depth int) Confidence {
	var updated time.Time
	if t := h.GetChunk().GetUpdatedAt(); t != nil {
		updated = t.AsTime()
	}
	conf := Confidence{
		ScoreReliability: ScoreReliability(h, depth),
		SourceQuality:    c.SourceQuality(h.GetChunk().GetSourceCategory()),
		Recency:          c.Recency(updated),
	}
	conf.Overall = wHybrid*clamp01(h.GetHybridScore()) + wReliability*conf.ScoreReliability +
		wSource*conf.SourceQuality + wRecency*conf.Recency
	return conf
}

// Percentile places rank in a list of total results: 100 for the first,
// 0 for the last.
func Percentile(rank, total int) int {
	if total <= 1 || rank <= 1 {
		return 100
	}
	if rank > total {
		rank = total
	}
	return int(math.Round(100 * float64(total-rank) / float64(total-1)))
}

// Tier names the strength of a fused score.
func Tier(score float64) string {
	switch {
	case score >= 0.8:
		return "Top"
	case score >= 0.6:
		return "High"
	case score >= 0.4:
		return "Moderate"
	}
	return "Weak"
}

// Explanation says, in few words, why a hit ranks where it does: the tier
// of its fused score, its rank on each retriever, and up to three of the
// query's content words it matched (stop words say nothing and are left
// out).
func Explanation(h *searchv1.SearchResult) string {
	var basis string
	method, bm25Rank, vectorRank := model.Method(h.GetScoreType()), h.GetBm25Rank(), h.GetVectorRank()
	switch {
	case method == model.ScoreBM25:
		basis = fmt.Sprintf("keyword #%d only", max(bm25Rank, h.GetRank()))
	case method == model.ScoreVector:
		basis = fmt.Sprintf("semantic #%d only", max(vectorRank, h.GetRank()))
	case bm25Rank > 0 && vectorRank > 0:
		basis = fmt.Sprintf("semantic #%d, keyword #%d", vectorRank, bm25Rank)
	case vectorRank > 0:
		basis = fmt.Sprintf("semantic #%d, no keyword match", vectorRank)
	case bm25Rank > 0:
		basis = fmt.Sprintf("keyword #%d, weak semantic", bm25Rank)
	default:
		basis = "fused score"
	}
	s := Tier(h.GetHybridScore()) + ": " + basis
	var terms []string
	for _, t := range h.GetMatchedTerms() {
		if !stopWords[strings.ToLower(t)] && len(terms) < 3 {
			terms = append(terms, t)
		}
	}
	if len(terms) > 0 {
		s += "; matched " + strings.Join(terms, ", ")
	}
	return s
}

// stopWords are English function words: a match on them explains nothing.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because
		been before being below between both but by can could did do does doing down during each few for from
		further had has have having he her here hers him his how i if in into is it its itself just me more most
		my no nor not now of off on once only or other our ours out over own same she should so some such than
		that the their theirs them then there these they this those through to too under until up very was we
		were what when where which while who whom why will with would you your yours`) {
		m[w] = true
	}
	return m
}()

// Dedup is a hit's de-duplication block.
type Dedup struct {
	IsDuplicate     bool
	SimilarChunkIDs []int64
	Confidence      float64
}

// unlinkedDuplicateConfidence is used when a hit is linked to near
// duplicates that are not on the page, so their text cannot be compared:
// the search service links chunks above 0.8 similarity.
const unlinkedDuplicateConfidence = 0.8

// DedupOf builds a hit's de-duplication block. Its confidence is 1 for a
// hit with no near duplicates; otherwise the highest word-trigram Jaccard
// similarity between the hit's text and its linked chunks present on the
// page, or 0.8 when none of them is.
func DedupOf(h *searchv1.SearchResult, page map[int64]string) Dedup {
	d := Dedup{IsDuplicate: h.GetIsDuplicate(), SimilarChunkIDs: h.GetSimilarChunkIds(), Confidence: 1}
	if d.SimilarChunkIDs == nil {
		d.SimilarChunkIDs = []int64{}
	}
	if !d.IsDuplicate && len(d.SimilarChunkIDs) == 0 {
		return d
	}
	best, compared := 0.0, false
	mine := shingles(h.GetChunk().GetChunkText())
	for _, id := range d.SimilarChunkIDs {
		other, ok := page[id]
		if !ok {
			continue
		}
		compared = true
		best = max(best, jaccard(mine, shingles(other)))
	}
	if !compared {
		d.Confidence = unlinkedDuplicateConfidence
	} else {
		d.Confidence = best
	}
	return d
}

func shingles(text string) map[string]struct{} {
	words := strings.Fields(strings.ToLower(text))
	set := make(map[string]struct{}, len(words))
	if len(words) < 3 {
		if len(words) > 0 {
			set[strings.Join(words, " ")] = struct{}{}
		}
		return set
	}
	for i := 0; i+3 <= len(words); i++ {
		set[words[i]+" "+words[i+1]+" "+words[i+2]] = struct{}{}
	}
	return set
}

func jaccard(a, b map[string]struct{}) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for k := range a {
		if _, ok := b[k]; ok {
			inter++
		}
	}
	union := len(a) + len(b) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// Page holds what the page-level signals need.
type Page struct {
	Hits           []*searchv1.SearchResult
	TotalAvailable int
	QueryTerms     []string
	// QueryVendors are the vendors the query names.
	QueryVendors []*searchv1.EntityMention
}

// Annotate returns, for each hit of the page, the desktop members to append
// to its result object: confidence (when enabled), ranking, and
// deduplication when the hit has near duplicates.
func (c Config) Annotate(p Page) [][]envelope.Field {
	texts := make(map[int64]string, len(p.Hits))
	for _, h := range p.Hits {
		texts[h.GetChunk().GetChunkId()] = h.GetChunk().GetChunkText()
	}
	depth := max(p.TotalAvailable, len(p.Hits))
	out := make([][]envelope.Field, len(p.Hits))
	for i, h := range p.Hits {
		fields := make([]envelope.Field, 0, 3)
		if c.IncludeConfidence {
			conf := c.ConfidenceOf(h, depth)
			fields = append(fields, envelope.Field{Key: "confidence", Value: envelope.Object{
				{Key: "score_reliability", Value: round2(conf.ScoreReliability)},
				{Key: "source_quality", Value: round2(conf.SourceQuality)},
				{Key: "recency", Value: round2(conf.Recency)},
				{Key: "overall", Value: round2(conf.Overall)},
			}})
		}
		method := string(model.Method(h.GetScoreType()))
		fields = append(fields, envelope.Field{Key: "ranking", Value: envelope.Object{
			{Key: "percentile", Value: Percentile(int(h.GetRank()), depth)},
			{Key: "explanation", Value: Explanation(h)},
			{Key: "score_method", Value: method},
		}})
		// A hit with no near duplicate would carry the default block
		// {false, [], 1}: it is left out, as the reference allows.
		if d := DedupOf(h, texts); d.IsDuplicate || len(d.SimilarChunkIDs) > 0 {
			fields = append(fields, envelope.Field{Key: "deduplication", Value: envelope.Object{
				{Key: "is_duplicate", Value: d.IsDuplicate},
				{Key: "similar_chunk_ids", Value: d.SimilarChunkIDs},
				{Key: "confidence", Value: round2(d.Confidence)},
			}})
		}
		out[i] = fields
	}
	return out
}

// highlightScore is the fused score a leading result needs to be
// highlighted.
const highlightScore = 0.7

// VisualHints describes how a client may lay out the page. Whether to
// collapse duplicates or expand previews is not a hint: the results say it
// (deduplication blocks, chunk_snippet or chunk_text).
func (c Config) VisualHints(p Page) *envelope.VisualHints {
	vh := &envelope.VisualHints{ShowConfidence: c.IncludeConfidence}
	categories := map[string]bool{}
	for i, h := range p.Hits {
		if i == vh.HighlightTop && i < 3 && h.GetHybridScore() >= highlightScore {
			vh.HighlightTop++
		}
		categories[h.GetChunk().GetSourceCategory()] = true
	}
	if len(categories) > 1 {
		g := "source_category"
		vh.GroupBy = &g
	}
	return vh
}

// QueryAnalysis lists the analyzed query's content words that no hit of
// the page matched (stop words are left out: whether "how" matched says
// nothing) and the names of the vendors the query names. It is nil when
// there are neither: the matched terms are the query's own words and each
// result carries those it matched, so repeating them would say nothing.
func QueryAnalysis(p Page) *envelope.QueryAnalysis {
	matched := map[string]bool{}
	for _, h := range p.Hits {
		for _, t := range h.GetMatchedTerms() {
			matched[t] = true
		}
	}
	qa := &envelope.QueryAnalysis{}
	seen := map[string]bool{}
	for _, t := range p.QueryTerms {
		if seen[t] || stopWords[t] || matched[t] {
			continue
		}
		seen[t] = true
		qa.UnmatchedTerms = append(qa.UnmatchedTerms, t)
	}
	for _, v := range p.QueryVendors {
		if !slices.Contains(qa.Vendors, v.GetName()) {
			qa.Vendors = append(qa.Vendors, v.GetName())
		}
	}
	if len(qa.UnmatchedTerms) == 0 && len(qa.Vendors) == 0 {
		return nil
	}
	return qa
}

func clamp01(f float64) float64 {
	switch {
	case math.IsNaN(f) || f < 0:
		return 0
	case f > 1:
		return 1
	}
	return f
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }
