package projection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bmcis/knowledge/platform/limits"
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

// Kind is the kind of result a tool returns; each mode lists its fields per
// kind.
type Kind int

// Result kinds.
const (
	SearchResult Kind = iota // semantic_search: a ranked chunk
	ChunkResult              // get_chunks: a chunk fetched by id (no scores)
	VendorResult             // find_vendor_info: a vendor's neighbourhood
)

// Caps bound the entity and relationship lists of a vendor answer, and
// its evidence (chunk ids, documents or chunks, whichever the mode shows).
type Caps struct{ Entities, Relationships, Evidence int }

// Spec is everything a response mode decides. The table below is the one
// home of modes: the tool descriptions, the response_mode enums and error
// texts, the projections, the vendor answer's caps and trimming, the
// desktop signals and the output schemas are all read from it.
type Spec struct {
	Name Mode
	// Fields lists, per result kind, the fields the mode returns, in output
	// order; every name is a Field of the registry.
	Fields map[Kind][]string
	// Summary is the one-line description of the mode in a tool's
	// description, per kind ("" for none).
	Summary map[Kind]string
	// Caps bound the vendor lists (ids or objects) of the mode.
	Caps Caps
	// CapsPartial makes a vendor graph larger than Caps a partial answer:
	// true where the mode promises the whole neighbourhood.
	CapsPartial bool
	// Details shows entity snippets and relationship metadata.
	Details bool
	// Signals attaches the desktop signals (confidence, ranking,
	// deduplication) to search results.
	Signals bool
	// Previews says results show text (snippet or whole), which the desktop
	// visual hints use.
	Previews bool
	// VendorAdvice is the lighter request suggested when a vendor answer in
	// this mode nears the token budget.
	VendorAdvice string
}

// table lists the modes from lightest to richest.
var table = []Spec{
	{
		Name: IDsOnly,
		Fields: map[Kind][]string{
			SearchResult: {"chunk_id", "hybrid_score", "rank"},
			ChunkResult:  {"chunk_id"},
			VendorResult: {"vendor_name", "entity_ids", "relationship_ids", "evidence_chunk_ids"},
		},
		Summary: map[Kind]string{
			SearchResult: "~10 tokens/result",
			VendorResult: "entity and relationship ids",
		},
		// ids_only lists the ids of what full would return.
		Caps: Caps{limits.VendorEntities.Max, limits.VendorRelationships.Max, 10}, CapsPartial: true,
		VendorAdvice: "Use 'preview' mode or include_relationships=false",
	},
	{
		Name: Metadata,
		Fields: map[Kind][]string{
			SearchResult: {"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks", "page",
				"mentions"},
			ChunkResult:  {"chunk_id", "source_file", "source_category", "chunk_index", "total_chunks", "page"},
			VendorResult: {"vendor_name", "statistics", "top_entities", "last_updated", "evidence_documents"},
		},
		Summary: map[Kind]string{
			SearchResult: "file, category, position, score",
			VendorResult: "statistics and top entities",
		},
		Caps: Caps{5, 5, 3}, Signals: true,
		VendorAdvice: "Use 'metadata' mode",
	},
	{
		Name: Preview,
		Fields: map[Kind][]string{
			SearchResult: {"chunk_id", "source_file", "source_category", "hybrid_score", "rank", "chunk_index", "total_chunks", "page",
				"chunk_snippet", "context_header", "mentions"},
			ChunkResult:  {"chunk_id", "source_file", "source_category", "chunk_index", "total_chunks", "page", "chunk_snippet", "context_header"},
			VendorResult: {"vendor_name", "entities", "relationships", "statistics", "evidence"},
		},
		Summary: map[Kind]string{
			SearchResult: "adds a 200-character snippet and section header",
			VendorResult: "5 entities and 5 relationships",
		},
		Caps: Caps{5, 5, 3}, Signals: true, Previews: true,
		VendorAdvice: "Use 'metadata' mode",
	},
	{
		Name: Full,
		Fields: map[Kind][]string{
			SearchResult: {"chunk_id", "chunk_text", "similarity_score", "bm25_score", "hybrid_score", "rank", "score_type",
				"source_file", "source_category", "context_header", "chunk_index", "total_chunks", "page", "chunk_token_count", "mentions"},
			ChunkResult: {"chunk_id", "chunk_text", "source_file", "source_category", "context_header", "chunk_index",
				"total_chunks", "page", "chunk_token_count"},
			VendorResult: {"vendor_name", "entities", "relationships", "statistics", "evidence"},
		},
		Summary: map[Kind]string{
			SearchResult: "whole text and all scores",
			VendorResult: fmt.Sprintf("up to %d entities and %d relationships", limits.VendorEntities.Max, limits.VendorRelationships.Max),
		},
		// The most the vendor graph returns (platform/limits).
		Caps: Caps{limits.VendorEntities.Max, limits.VendorRelationships.Max, 5}, CapsPartial: true, Details: true, Signals: true, Previews: true,
		VendorAdvice: "Use 'preview' mode or include_relationships=false",
	},
}

// Modes lists the mode names from lightest to richest.
func Modes() []Mode {
	out := make([]Mode, len(table))
	for i, s := range table {
		out[i] = s.Name
	}
	return out
}

// Names lists the mode names as strings (for enums).
func Names() []string {
	out := make([]string, len(table))
	for i, s := range table {
		out[i] = string(s.Name)
	}
	return out
}

// Of returns the spec of mode m (the zero Spec for an unknown mode).
func Of(m Mode) Spec {
	for _, s := range table {
		if s.Name == m {
			return s
		}
	}
	return Spec{}
}

// Lighter returns the next lighter mode, or false for the lightest.
func Lighter(m Mode) (Mode, bool) {
	i := slices.IndexFunc(table, func(s Spec) bool { return s.Name == m })
	if i <= 0 {
		return "", false
	}
	return table[i-1].Name, true
}

// ParseMode accepts a mode name (case-insensitive, surrounding blanks
// ignored); "" yields def.
func ParseMode(s string, def Mode) (Mode, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return def, true
	}
	for _, m := range table {
		if string(m.Name) == s {
			return m.Name, true
		}
	}
	return "", false
}

// OneOf is the list of modes for an error text: "ids_only, metadata, ...".
func OneOf() string { return strings.Join(Names(), ", ") }

// Describe lists the modes for a tool description, each with its summary
// for kind k, marking def as the default: "ids_only (ids), metadata
// (default: file, ...) or full".
func Describe(k Kind, def Mode) string {
	parts := make([]string, len(table))
	for i, s := range table {
		note := s.Summary[k]
		if s.Name == def {
			note = strings.TrimSuffix("default: "+note, ": ")
		}
		parts[i] = string(s.Name)
		if note != "" {
			parts[i] += " (" + note + ")"
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// FieldsOf returns the fields of mode m for kind k, in output order.
func FieldsOf(m Mode, k Kind) []string { return slices.Clone(Of(m).Fields[k]) }

// SearchFields returns the whitelist of a search mode, in output order.
func SearchFields(m Mode) []string { return FieldsOf(m, SearchResult) }

// ChunkFields returns the whitelist of a get_chunks mode, in output order.
func ChunkFields(m Mode) []string { return FieldsOf(m, ChunkResult) }

// VendorFields returns the whitelist of a vendor mode, in output order.
func VendorFields(m Mode) []string { return FieldsOf(m, VendorResult) }

// AllFields lists every field any mode returns for kind k, lightest mode
// first.
func AllFields(k Kind) []string {
	var out []string
	for _, s := range table {
		for _, f := range s.Fields[k] {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// CommonFields lists the fields every mode returns for kind k (required in
// the output schema).
func CommonFields(k Kind) []string {
	var out []string
	for _, f := range AllFields(k) {
		if !slices.ContainsFunc(table, func(s Spec) bool { return !slices.Contains(s.Fields[k], f) }) {
			out = append(out, f)
		}
	}
	return out
}

// AllSearchFields lists every field any search mode may return.
func AllSearchFields() []string { return AllFields(SearchResult) }

// AllChunkFields lists every field any get_chunks mode may return.
func AllChunkFields() []string { return AllFields(ChunkResult) }

// VendorCaps returns the entity and relationship caps of a vendor mode.
func VendorCaps(m Mode) (entities, relationships int) {
	c := Of(m).Caps
	return c.Entities, c.Relationships
}
