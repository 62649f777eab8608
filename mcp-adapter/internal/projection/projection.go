// Package projection turns backend data into result objects that carry
// exactly the fields a response mode allows, optionally narrowed further by
// the caller's `fields` list.
package projection

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/apierr"
	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
)

// SnippetLength is the maximum length of chunk_snippet, in characters.
const SnippetLength = 200

// MaxRequestedFields bounds the fields list: every field of a result kind
// fits twice over. A longer list is refused before anything else is done
// with it (the check runs before the caller is authenticated).
const MaxRequestedFields = 32

// An INVALID_FIELDS answer quotes at most maxListedInvalid names, each cut
// to maxQuotedName characters, and counts the rest: the answer stays small
// whatever was asked.
const (
	maxListedInvalid = 5
	maxQuotedName    = 64
)

// Select narrows a mode's whitelist to the requested fields. No request
// (nil or empty) keeps the whole whitelist. Fields keep whitelist order and
// duplicates collapse. More than MaxRequestedFields names is INVALID_PARAMS;
// a field outside the whitelist is an INVALID_FIELDS error that lists the
// allowed ones. Linear in the request.
func Select(allowed []string, requested []string, mode Mode) ([]string, *apierr.Error) {
	if len(requested) == 0 {
		return allowed, nil
	}
	if len(requested) > MaxRequestedFields {
		return nil, apierr.NewInvalidParams("fields",
			fmt.Sprintf("must hold at most %d names (got %d)", MaxRequestedFields, len(requested)),
			"List only the fields you need, or leave fields out for all of the mode's.")
	}
	ok := make(map[string]bool, len(allowed))
	for _, f := range allowed {
		ok[f] = true
	}
	var listed []string
	invalid := map[string]bool{}
	want := make(map[string]bool, len(requested))
	for _, f := range requested {
		f = strings.TrimSpace(f)
		switch {
		case ok[f]:
			want[f] = true
		case !invalid[f]:
			invalid[f] = true
			if len(listed) < maxListedInvalid {
				listed = append(listed, shorten(f, maxQuotedName))
			}
		}
	}
	if len(invalid) > 0 {
		return nil, apierr.NewInvalidFields(listed, len(invalid)-len(listed), string(mode), allowed)
	}
	out := make([]string, 0, len(want))
	for _, f := range allowed {
		if want[f] {
			out = append(out, f)
		}
	}
	return out, nil
}

// shorten cuts s to n characters, marking the cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// Score rounds a 0..1 score to three decimals: cl100k spends a token per
// three digits, and a fourth digit tells a model nothing (rank orders the
// results).
func Score(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return math.Round(f*1e3) / 1e3
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// project reads fields from src.
func project(src *Source, fields []string) envelope.Object {
	o := make(envelope.Object, 0, len(fields)+3)
	for _, name := range fields {
		if f, ok := Lookup(name); ok {
			v := f.Value(src)
			if f.OmitEmpty && isEmpty(v) {
				continue
			}
			o.Set(name, v)
		}
	}
	return o
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case int:
		return x == 0
	case []envelope.Object:
		return len(x) == 0
	case []string:
		return len(x) == 0
	case []int64:
		return len(x) == 0
	}
	return false
}

// Hit projects a search result onto fields (a Select result).
func Hit(h *searchv1.SearchResult, fields []string) envelope.Object {
	return project(&Source{Hit: h}, fields)
}

// Chunk projects a chunk fetched by id onto fields (a Select result).
func Chunk(c *searchv1.Chunk, fields []string) envelope.Object {
	return project(&Source{Hit: &searchv1.SearchResult{Chunk: c}}, fields)
}

// SearchReads is the read mask (SearchRequest.read_mask) of a search
// answer shown with fields, plus extra paths of searchv1.SearchResult
// that the caller reads besides (signals, warnings).
func SearchReads(fields []string, extra ...string) []string {
	var out []string
	for _, p := range reads(fields, extra) {
		out = append(out, "results."+p)
	}
	return out
}

// ChunkReads is the read mask (GetChunksRequest.read_mask) of a get_chunks
// answer shown with fields.
func ChunkReads(fields []string) []string {
	var out []string
	for _, p := range reads(fields, nil) {
		if c, ok := strings.CutPrefix(p, "chunk."); ok {
			out = append(out, "chunks."+c)
		}
	}
	return out
}

// reads is the sorted union of the fields' Reads and extra.
func reads(fields, extra []string) []string {
	out := slices.Clone(extra)
	for _, name := range fields {
		if f, ok := Lookup(name); ok {
			out = append(out, f.Reads...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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

// Vendor projects a vendor neighbourhood onto a mode's fields. Entity and
// relationship lists are cut to the mode's caps.
func Vendor(v model.Vendor, m Mode, includeRelationships bool) envelope.Object {
	spec := Of(m)
	return project(&Source{Vendor: v, Mode: spec, Relationships: includeRelationships}, spec.Fields[VendorResult])
}

// VendorUnits counts the entities and relationships (objects or ids) a
// vendor answer in mode m lists: what trimming to the token budget cuts.
func VendorUnits(v model.Vendor, m Mode, includeRelationships bool) (entities, relationships int) {
	spec := Of(m)
	for _, name := range spec.Fields[VendorResult] {
		f, _ := Lookup(name)
		switch {
		case f.List == nil:
		case f.List.Relationships:
			if includeRelationships {
				relationships += min(f.List.Len(v), spec.Caps.Relationships)
			}
		default:
			entities += min(f.List.Len(v), spec.Caps.Entities)
		}
	}
	return entities, relationships
}

// VendorKeep cuts the lists mode m shows to e entities and r relationships.
func VendorKeep(v model.Vendor, m Mode, e, r int) model.Vendor {
	for _, name := range Of(m).Fields[VendorResult] {
		f, _ := Lookup(name)
		switch {
		case f.List == nil:
		case f.List.Relationships:
			f.List.Cut(&v, r)
		default:
			f.List.Cut(&v, e)
		}
	}
	return v
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
		{Key: "source_name", Value: r.SourceName},
		{Key: "target_id", Value: r.TargetID},
		{Key: "target_name", Value: r.TargetName},
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
