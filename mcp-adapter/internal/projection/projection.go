// Package projection turns backend data into result objects that carry
// exactly the fields a response mode allows, optionally narrowed further by
// the caller's `fields` list.
package projection

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
)

// Mode is a progressive-disclosure level.
type Mode string

// Response modes.
const (
	IDsOnly  Mode = "ids_only"
	Metadata Mode = "metadata"
	Preview  Mode = "preview"
	Full     Mode = "full"
)

// Modes lists the modes from lightest to richest.
var Modes = []Mode{IDsOnly, Metadata, Preview, Full}

// ParseMode accepts a mode name (case-insensitive, surrounding blanks
// ignored); "" yields def.
func ParseMode(s string, def Mode) (Mode, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return def, true
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, true
		}
	}
	return "", false
}

// SnippetLength is the maximum length of chunk_snippet, in characters.
const SnippetLength = 200

// Field whitelists, in output order. Search modes follow the reference;
// get_chunks uses the same fields without the scores, which a fetch by id
// does not have.
var (
	searchFields = map[Mode][]string{
		IDsOnly:  {"chunk_id", "hybrid_score", "rank"},
		Metadata: {"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks"},
		Preview: {"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks",
			"chunk_snippet", "context_header"},
		Full: {"chunk_id", "chunk_text", "similarity_score", "bm25_score", "hybrid_score", "rank", "score_type",
			"source_file", "source_category", "context_header", "chunk_index", "total_chunks", "chunk_token_count"},
	}
	chunkFields = map[Mode][]string{
		IDsOnly:  {"chunk_id"},
		Metadata: {"chunk_id", "source_file", "source_category", "chunk_index", "total_chunks"},
		Preview:  {"chunk_id", "source_file", "source_category", "chunk_index", "total_chunks", "chunk_snippet", "context_header"},
		Full: {"chunk_id", "chunk_text", "source_file", "source_category", "context_header", "chunk_index",
			"total_chunks", "chunk_token_count"},
	}
	vendorFields = map[Mode][]string{
		IDsOnly:  {"vendor_name", "entity_ids", "relationship_ids"},
		Metadata: {"vendor_name", "statistics", "top_entities", "last_updated"},
		Preview:  {"vendor_name", "entities", "relationships", "statistics"},
		Full:     {"vendor_name", "entities", "relationships", "statistics"},
	}
)

// SearchFields returns the whitelist of a search mode, in output order.
func SearchFields(m Mode) []string { return slices.Clone(searchFields[m]) }

// ChunkFields returns the whitelist of a get_chunks mode, in output order.
func ChunkFields(m Mode) []string { return slices.Clone(chunkFields[m]) }

// VendorFields returns the whitelist of a vendor mode, in output order.
func VendorFields(m Mode) []string { return slices.Clone(vendorFields[m]) }

// AllSearchFields lists every field any search mode may return.
func AllSearchFields() []string { return union(searchFields) }

// AllChunkFields lists every field any get_chunks mode may return.
func AllChunkFields() []string { return union(chunkFields) }

func union(m map[Mode][]string) []string {
	var out []string
	for _, mode := range Modes {
		for _, f := range m[mode] {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Select narrows a mode's whitelist to the requested fields. No request
// (nil or empty) keeps the whole whitelist. Fields keep whitelist order and
// duplicates collapse. A field outside the whitelist is an INVALID_FIELDS
// error that lists the allowed ones.
func Select(allowed []string, requested []string, mode Mode) ([]string, *apierr.Error) {
	if len(requested) == 0 {
		return allowed, nil
	}
	var invalid []string
	want := make(map[string]bool, len(requested))
	for _, f := range requested {
		f = strings.TrimSpace(f)
		if !slices.Contains(allowed, f) {
			if !slices.Contains(invalid, f) {
				invalid = append(invalid, f)
			}
			continue
		}
		want[f] = true
	}
	if len(invalid) > 0 {
		return nil, apierr.NewInvalidFields(invalid, string(mode), allowed)
	}
	out := make([]string, 0, len(want))
	for _, f := range allowed {
		if want[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// Score rounds a 0..1 score to four decimals (enough to order results,
// and it keeps numbers short).
func Score(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return math.Round(f*1e4) / 1e4
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func chunkValue(c model.Chunk, field string) (any, bool) {
	switch field {
	case "chunk_id":
		return c.ChunkID, true
	case "source_file":
		return c.SourceFile, true
	case "source_category":
		return nullable(c.SourceCategory), true
	case "chunk_index":
		return c.ChunkIndex, true
	case "total_chunks":
		return c.TotalChunks, true
	case "chunk_snippet":
		return Snippet(c.ChunkText, SnippetLength), true
	case "context_header":
		return nullable(c.ContextHeader), true
	case "chunk_text":
		return envelope.Text{S: c.ChunkText, Tokens: c.ChunkTokenCount}, true
	case "chunk_token_count":
		return c.ChunkTokenCount, true
	}
	return nil, false
}

// Hit projects a search hit onto fields (a Select result).
func Hit(h model.Hit, fields []string) envelope.Object {
	o := make(envelope.Object, 0, len(fields)+3)
	for _, f := range fields {
		switch f {
		case "hybrid_score":
			o.Set(f, Score(h.HybridScore))
		case "rank":
			o.Set(f, h.Rank)
		case "similarity_score":
			o.Set(f, Score(h.SimilarityScore))
		case "bm25_score":
			o.Set(f, Score(h.BM25Score))
		case "score_type":
			o.Set(f, string(h.ScoreType))
		default:
			if v, ok := chunkValue(h.Chunk, f); ok {
				o.Set(f, v)
			}
		}
	}
	return o
}

// Chunk projects a chunk fetched by id onto fields (a Select result).
func Chunk(c model.Chunk, fields []string) envelope.Object {
	o := make(envelope.Object, 0, len(fields))
	for _, f := range fields {
		if v, ok := chunkValue(c, f); ok {
			o.Set(f, v)
		}
	}
	return o
}

// Snippet returns the first max characters of text, cut back to the last
// word boundary when the cut would split a word, with white space runs
// collapsed to single spaces. A text that fits is returned whole; a cut
// text ends with "...".
func Snippet(text string, max int) string {
	text = collapseSpace(text)
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	runes := []rune(text)
	cut := runes[:max]
	if !unicode.IsSpace(runes[max]) {
		// the cut falls inside a word: back up to the previous space
		if i := lastSpace(cut); i > 0 {
			cut = cut[:i]
		}
	}
	return strings.TrimRightFunc(string(cut), func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == ';' || r == ':'
	}) + "..."
}

func lastSpace(rs []rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if unicode.IsSpace(rs[i]) {
			return i
		}
	}
	return -1
}

func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// Vendor caps per mode: preview shows at most 5 entities and 5
// relationships, full at most 100 and 500. ids_only lists the ids of what
// full would return.
var vendorCaps = map[Mode][2]int{
	IDsOnly:  {100, 500},
	Metadata: {5, 5},
	Preview:  {5, 5},
	Full:     {100, 500},
}

// VendorCaps returns the entity and relationship caps of a vendor mode.
func VendorCaps(m Mode) (entities, relationships int) {
	c := vendorCaps[m]
	return c[0], c[1]
}

// Vendor projects a vendor neighbourhood onto a mode's whitelist. Entity
// and relationship lists are cut to the mode's caps.
func Vendor(v model.Vendor, m Mode, includeRelationships bool) envelope.Object {
	maxE, maxR := VendorCaps(m)
	o := envelope.Object{}
	for _, f := range vendorFields[m] {
		switch f {
		case "vendor_name":
			o.Set(f, v.VendorName)
		case "entity_ids":
			o.Set(f, nonNilStrings(capList(v.EntityIDs, maxE)))
		case "relationship_ids":
			ids := []string{}
			if includeRelationships {
				ids = nonNilStrings(capList(v.RelationshipIDs, maxR))
			}
			o.Set(f, ids)
		case "statistics":
			o.Set(f, Statistics(v.Statistics))
		case "top_entities":
			top := make([]envelope.Object, 0, len(v.TopEntities))
			for _, e := range capList(v.TopEntities, 5) {
				top = append(top, entity(e, false))
			}
			o.Set(f, top)
		case "last_updated":
			o.Set(f, timestamp(v.LastUpdated))
		case "entities":
			list := make([]envelope.Object, 0, min(len(v.Entities), maxE))
			for _, e := range capList(v.Entities, maxE) {
				list = append(list, entity(e, m == Full))
			}
			o.Set(f, list)
		case "relationships":
			list := []envelope.Object{}
			if includeRelationships {
				for _, r := range capList(v.Relationships, maxR) {
					list = append(list, relationship(r, m == Full))
				}
			}
			o.Set(f, list)
		}
	}
	return o
}

// Statistics projects vendor statistics.
func Statistics(s model.VendorStatistics) envelope.Object {
	return envelope.Object{
		{Key: "entity_count", Value: s.EntityCount},
		{Key: "relationship_count", Value: s.RelationshipCount},
		{Key: "entity_type_distribution", Value: nonNilMap(s.EntityTypeDistribution)},
		{Key: "relationship_type_distribution", Value: nonNilMap(s.RelationshipTypeDistribution)},
	}
}

// entity projects an entity; the snippet is shown in full mode only.
func entity(e model.Entity, withSnippet bool) envelope.Object {
	var snippet any
	if withSnippet {
		snippet = nullable(e.Snippet)
	}
	return envelope.Object{
		{Key: "entity_id", Value: e.EntityID},
		{Key: "name", Value: e.Name},
		{Key: "entity_type", Value: e.EntityType},
		{Key: "confidence", Value: Score(e.Confidence)},
		{Key: "snippet", Value: snippet},
	}
}

// relationship projects a relationship; its metadata (confidence and free
// form attributes) is shown in full mode only.
func relationship(r model.Relationship, withMetadata bool) envelope.Object {
	var meta any
	if withMetadata {
		attrs := r.Metadata
		if attrs == nil {
			attrs = map[string]any{}
		}
		meta = envelope.Object{
			{Key: "confidence", Value: Score(r.Confidence)},
			{Key: "relationship_metadata", Value: attrs},
		}
	}
	return envelope.Object{
		{Key: "relationship_id", Value: r.RelationshipID},
		{Key: "source_id", Value: r.SourceID},
		{Key: "target_id", Value: r.TargetID},
		{Key: "relationship_type", Value: r.RelationshipType},
		{Key: "metadata", Value: meta},
	}
}

func timestamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func capList[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}
