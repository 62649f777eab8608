package projection

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/jschema"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
)

// Source is what a field's value is read from: a search hit (a chunk
// fetched by id is a hit without scores) or a vendor neighbourhood, and the
// mode asked for.
type Source struct {
	Hit           model.Hit
	Vendor        model.Vendor
	Mode          Spec
	Relationships bool // include_relationships
}

// Place is where the markdown rendering puts a field of a result.
type Place int

// Places. A result reads: heading · facts, then its lines, then blocks,
// then its body text.
const (
	Head  Place = iota + 1 // the heading of the result (first non-empty wins)
	Fact                   // a short fact on the heading line
	Line                   // a line under the heading
	Block                  // a block of lines, written as is
	Body                   // the text itself (an envelope.Text)
)

// Markdown renders a field at a place. Text gets the whole result r, for
// renderings that read a sibling, and the field's value; "" renders
// nothing.
type Markdown struct {
	Place Place
	Text  func(r envelope.Object, v any) string
}

// List marks a vendor field whose list the mode's caps bound and token
// trimming cuts.
type List struct {
	Relationships bool // a relationship list; else an entity list
	Len           func(v model.Vendor) int
	Cut           func(v *model.Vendor, n int)
}

// Field is one result field: its name, its JSON Schema, how its value is
// read and how it reads in markdown. The registry below is the one home of
// result fields.
type Field struct {
	Name     string
	Schema   jschema.S
	Value    func(src *Source) any
	Markdown []Markdown
	List     *List
}

// registry lists every field; the markdown rendering walks it in this
// order.
var registry = []Field{
	{Name: "source_file", Schema: jschema.Str(), Value: func(s *Source) any { return s.Hit.SourceFile },
		Markdown: []Markdown{{Head, func(_ envelope.Object, v any) string { return bold(v) }}}},
	{Name: "chunk_id", Schema: jschema.Int(0), Value: func(s *Source) any { return s.Hit.ChunkID },
		Markdown: []Markdown{
			// Without a file name the id is the heading, else a fact.
			{Head, func(r envelope.Object, v any) string { return unlessFile(r, "chunk "+toString(v)) }},
			{Fact, func(r envelope.Object, v any) string { return ifFile(r, "id "+toString(v)) }},
		}},
	{Name: "chunk_index", Schema: jschema.Int(0), Value: func(s *Source) any { return s.Hit.ChunkIndex },
		Markdown: []Markdown{{Fact, func(r envelope.Object, v any) string {
			part := "part " + strconv.Itoa(toInt(v)+1)
			if total, ok := r.Int("total_chunks"); ok {
				part += "/" + strconv.Itoa(total)
			}
			return part
		}}}},
	// total_chunks reads with chunk_index.
	{Name: "total_chunks", Schema: jschema.Int(0), Value: func(s *Source) any { return s.Hit.TotalChunks }},
	{Name: "hybrid_score", Schema: jschema.Unit(), Value: func(s *Source) any { return Score(s.Hit.HybridScore) },
		Markdown: fact("score %v")},
	{Name: "similarity_score", Schema: jschema.Unit(), Value: func(s *Source) any { return Score(s.Hit.SimilarityScore) },
		Markdown: fact("semantic %v")},
	{Name: "bm25_score", Schema: jschema.Unit(), Value: func(s *Source) any { return Score(s.Hit.BM25Score) },
		Markdown: fact("keyword %v")},
	{Name: "source_category", Schema: jschema.NullStr(), Value: func(s *Source) any { return nullable(s.Hit.SourceCategory) },
		Markdown: fact("%s")},
	{Name: "chunk_token_count", Schema: jschema.Int(0), Value: func(s *Source) any { return s.Hit.ChunkTokenCount },
		Markdown: fact("%d tokens")},
	// rank numbers the result; it has no text of its own.
	{Name: "rank", Schema: jschema.Int(1), Value: func(s *Source) any { return s.Hit.Rank }},
	{Name: "score_type", Schema: jschema.Enum(scoreMethods...), Value: func(s *Source) any { return string(s.Hit.ScoreType) }},
	{Name: "context_header", Schema: jschema.NullStr(), Value: func(s *Source) any { return nullable(s.Hit.ContextHeader) },
		Markdown: line("Section: %s")},
	{Name: "chunk_snippet", Schema: jschema.Str(), Value: func(s *Source) any { return Snippet(s.Hit.ChunkText, SnippetLength) },
		Markdown: line("> %s")},
	{Name: "chunk_text", Schema: jschema.Str(), Value: func(s *Source) any {
		return envelope.Text{S: s.Hit.ChunkText, Tokens: s.Hit.ChunkTokenCount}
	}, Markdown: []Markdown{{Body, nil}}},

	{Name: "vendor_name", Schema: jschema.Str(), Value: func(s *Source) any { return s.Vendor.VendorName },
		Markdown: []Markdown{{Head, func(_ envelope.Object, v any) string { return bold(v) }}}},
	{Name: "last_updated", Schema: jschema.Nullable(jschema.Timestamp()), Value: func(s *Source) any { return timestamp(s.Vendor.LastUpdated) },
		Markdown: fact("updated %s")},
	{Name: "statistics", Schema: statisticsSchema(), Value: func(s *Source) any { return Statistics(s.Vendor.Statistics) },
		Markdown: []Markdown{{Block, statisticsMarkdown}}},
	{Name: "top_entities", Schema: jschema.Array(entitySchema()), Value: func(s *Source) any {
		top := make([]envelope.Object, 0, len(s.Vendor.TopEntities))
		for _, e := range capList(s.Vendor.TopEntities, 5) {
			top = append(top, entity(e, false))
		}
		return top
	}, Markdown: []Markdown{{Block, entitiesMarkdown("Top entities")}}},
	{Name: "entities", Schema: jschema.S{"type": "array", "items": entitySchema(), "maxItems": maxCap().Entities},
		Value: func(s *Source) any {
			list := make([]envelope.Object, 0, min(len(s.Vendor.Entities), s.Mode.Caps.Entities))
			for _, e := range capList(s.Vendor.Entities, s.Mode.Caps.Entities) {
				list = append(list, entity(e, s.Mode.Details))
			}
			return list
		},
		Markdown: []Markdown{{Block, entitiesMarkdown("Entities")}},
		List: &List{Len: func(v model.Vendor) int { return len(v.Entities) },
			Cut: func(v *model.Vendor, n int) { v.Entities = capList(v.Entities, n) }}},
	{Name: "relationships", Schema: jschema.S{"type": "array", "items": relationshipSchema(), "maxItems": maxCap().Relationships},
		Value: func(s *Source) any {
			list := []envelope.Object{}
			if s.Relationships {
				for _, r := range capList(s.Vendor.Relationships, s.Mode.Caps.Relationships) {
					list = append(list, relationship(r, s.Mode.Details))
				}
			}
			return list
		},
		Markdown: []Markdown{{Block, relationshipsMarkdown}},
		List: &List{Relationships: true, Len: func(v model.Vendor) int { return len(v.Relationships) },
			Cut: func(v *model.Vendor, n int) { v.Relationships = capList(v.Relationships, n) }}},
	{Name: "entity_ids", Schema: jschema.Array(jschema.Str()), Value: func(s *Source) any {
		return nonNilStrings(capList(s.Vendor.EntityIDs, s.Mode.Caps.Entities))
	}, Markdown: []Markdown{{Block, idsMarkdown("entity_ids")}},
		List: &List{Len: func(v model.Vendor) int { return len(v.EntityIDs) },
			Cut: func(v *model.Vendor, n int) { v.EntityIDs = capList(v.EntityIDs, n) }}},
	{Name: "relationship_ids", Schema: jschema.Array(jschema.Str()), Value: func(s *Source) any {
		if !s.Relationships {
			return []string{}
		}
		return nonNilStrings(capList(s.Vendor.RelationshipIDs, s.Mode.Caps.Relationships))
	}, Markdown: []Markdown{{Block, idsMarkdown("relationship_ids")}},
		List: &List{Relationships: true, Len: func(v model.Vendor) int { return len(v.RelationshipIDs) },
			Cut: func(v *model.Vendor, n int) { v.RelationshipIDs = capList(v.RelationshipIDs, n) }}},
}

var scoreMethods = []string{string(model.ScoreHybrid), string(model.ScoreBM25), string(model.ScoreVector)}

// ScoreMethods lists the score_type values.
func ScoreMethods() []string { return slices.Clone(scoreMethods) }

// Registry returns every field, in rendering order.
func Registry() []Field { return slices.Clone(registry) }

// Lookup returns the field named name.
func Lookup(name string) (Field, bool) {
	i := slices.IndexFunc(registry, func(f Field) bool { return f.Name == name })
	if i < 0 {
		return Field{}, false
	}
	return registry[i], true
}

// Properties returns the property schemas of fields.
func Properties(fields []string) jschema.S {
	props := jschema.S{}
	for _, name := range fields {
		if f, ok := Lookup(name); ok {
			props[name] = f.Schema
		}
	}
	return props
}

// maxCap is the largest cap of any mode, the bound the schemas state.
func maxCap() Caps {
	var c Caps
	for _, s := range table {
		c.Entities = max(c.Entities, s.Caps.Entities)
		c.Relationships = max(c.Relationships, s.Caps.Relationships)
	}
	return c
}

func entitySchema() jschema.S {
	return jschema.Obj(jschema.S{
		"entity_id":   jschema.Str(),
		"name":        jschema.Str(),
		"entity_type": jschema.Str(),
		"confidence":  jschema.Unit(),
		"snippet":     jschema.NullStr(),
	}, "entity_id", "name", "entity_type", "confidence", "snippet")
}

func relationshipSchema() jschema.S {
	return jschema.Obj(jschema.S{
		"relationship_id":   jschema.Str(),
		"source_id":         jschema.Str(),
		"target_id":         jschema.Str(),
		"relationship_type": jschema.Str(),
		"metadata": jschema.Nullable(jschema.Obj(jschema.S{
			"confidence":            jschema.Unit(),
			"relationship_metadata": jschema.S{"type": "object"},
		}, "confidence", "relationship_metadata")),
	}, "relationship_id", "source_id", "target_id", "relationship_type", "metadata")
}

func statisticsSchema() jschema.S {
	distribution := jschema.S{"type": "object", "additionalProperties": jschema.Int(0)}
	return jschema.Obj(jschema.S{
		"entity_count":                   jschema.Int(0),
		"relationship_count":             jschema.Int(0),
		"entity_type_distribution":       distribution,
		"relationship_type_distribution": distribution,
	}, "entity_count", "relationship_count", "entity_type_distribution", "relationship_type_distribution")
}

// fact renders a field as a fact with a format verb for its value.
func fact(format string) []Markdown {
	return []Markdown{{Fact, func(_ envelope.Object, v any) string { return sprintValue(format, v) }}}
}

// line renders a field as a line with a format verb for its value.
func line(format string) []Markdown {
	return []Markdown{{Line, func(_ envelope.Object, v any) string { return sprintValue(format, v) }}}
}

// sprintValue formats v, or "" when v is null or an empty string.
func sprintValue(format string, v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		if x == "" {
			return ""
		}
	case *string:
		if x == nil || *x == "" {
			return ""
		}
		v = *x
	}
	return fmt.Sprintf(format, v)
}

func bold(v any) string {
	if s := toString(v); s != "" {
		return "**" + s + "**"
	}
	return ""
}

func ifFile(r envelope.Object, s string) string {
	if f, _ := r.Str("source_file"); f != "" {
		return s
	}
	return ""
}

func unlessFile(r envelope.Object, s string) string {
	if f, _ := r.Str("source_file"); f != "" {
		return ""
	}
	return s
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int, int32, int64:
		return fmt.Sprint(x)
	}
	return ""
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int32:
		return int(x)
	case int64:
		return int(x)
	}
	return 0
}

func statisticsMarkdown(_ envelope.Object, v any) string {
	st, _ := v.(envelope.Object)
	ec, _ := st.Int("entity_count")
	rc, _ := st.Int("relationship_count")
	s := fmt.Sprintf("Entities: %d · Relationships: %d\n", ec, rc)
	if d, ok := st.Get("entity_type_distribution"); ok {
		s += "Entity types: " + distribution(d) + "\n"
	}
	if d, ok := st.Get("relationship_type_distribution"); ok {
		s += "Relationship types: " + distribution(d) + "\n"
	}
	return s + "\n"
}

func entitiesMarkdown(label string) func(envelope.Object, any) string {
	return func(_ envelope.Object, v any) string {
		list, _ := v.([]envelope.Object)
		var b strings.Builder
		fmt.Fprintf(&b, "### %s (%d)\n", label, len(list))
		for _, e := range list {
			en, _ := e.Str("name")
			typ, _ := e.Str("entity_type")
			conf, _ := e.Float("confidence")
			fmt.Fprintf(&b, "- **%s** (%s, confidence %.2f)", en, typ, conf)
			if sn, ok := e.Str("snippet"); ok {
				b.WriteString(": " + sn)
			}
			b.WriteString("\n")
		}
		return b.String() + "\n"
	}
}

// relationshipsMarkdown names the ends of a relationship by the entities the
// same result lists, else by id.
func relationshipsMarkdown(r envelope.Object, v any) string {
	names := map[string]string{}
	for _, key := range []string{"top_entities", "entities"} {
		list, _ := r.Objects(key)
		for _, e := range list {
			id, _ := e.Str("entity_id")
			names[id], _ = e.Str("name")
		}
	}
	label := func(id string) string {
		if n := names[id]; n != "" {
			return n
		}
		return "`" + id + "`"
	}
	list, _ := v.([]envelope.Object)
	var b strings.Builder
	fmt.Fprintf(&b, "### Relationships (%d)\n", len(list))
	for _, rel := range list {
		src, _ := rel.Str("source_id")
		dst, _ := rel.Str("target_id")
		typ, _ := rel.Str("relationship_type")
		fmt.Fprintf(&b, "- %s %s %s", label(src), typ, label(dst))
		if m, ok := rel.Object("metadata"); ok {
			if c, ok := m.Float("confidence"); ok {
				fmt.Fprintf(&b, " (confidence %.2f)", c)
			}
		}
		b.WriteString("\n")
	}
	return b.String() + "\n"
}

func idsMarkdown(label string) func(envelope.Object, any) string {
	return func(_ envelope.Object, v any) string {
		ids, _ := v.([]string)
		return fmt.Sprintf("%s (%d): %s\n", label, len(ids), strings.Join(ids, ", "))
	}
}

func distribution(v any) string {
	m, _ := v.(map[string]int)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
