package projection

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/jschema"
	"github.com/bmcis/knowledge/mcp-adapter/internal/model"
)

// Source is what a field's value is read from: a search result (a chunk
// fetched by id is a result without scores) or a vendor neighbourhood, and
// the mode asked for.
type Source struct {
	Hit           *searchv1.SearchResult
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
	// NamesBlock is a Block of mostly proper names, which the token
	// estimate counts exactly: rare names, repeated, are where its
	// approximation errs most.
	NamesBlock
	Body // the text itself (an envelope.Text)
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
	// Reads lists the fields of the search service's answer the value is
	// read from, as paths of searchv1.SearchResult: the read mask of a
	// request is the union of its fields' (SearchReads, ChunkReads), so a
	// field that is not shown is not read.
	Reads []string
	// OmitEmpty leaves the field out of a result when its value is an
	// empty list or the number 0: tokens spent on "no mentions" or "no
	// page" say nothing.
	OmitEmpty bool
}

// r lists a field's Reads.
func r(paths ...string) []string { return paths }

// chunk is the chunk of the result read.
func (s *Source) chunk() *searchv1.Chunk { return s.Hit.GetChunk() }

// MaxMentions bounds a search result's mentions (vendors first).
const MaxMentions = 3

// registry lists every field; the markdown rendering walks it in this
// order.
var registry = []Field{
	{Name: "source_file", Schema: jschema.Str(), Reads: r("chunk.source_file"), Value: func(s *Source) any { return s.chunk().GetSourceFile() },
		Markdown: []Markdown{{Head, func(_ envelope.Object, v any) string { return bold(v) }}}},
	{Name: "chunk_id", Schema: jschema.Int(0), Reads: r("chunk.chunk_id"), Value: func(s *Source) any { return s.chunk().GetChunkId() },
		Markdown: []Markdown{
			// Without a file name the id is the heading, else a fact.
			{Head, func(r envelope.Object, v any) string { return unlessFile(r, "chunk "+toString(v)) }},
			{Fact, func(r envelope.Object, v any) string { return ifFile(r, "id "+toString(v)) }},
		}},
	{Name: "chunk_index", Schema: jschema.Int(0), Reads: r("chunk.chunk_index"), Value: func(s *Source) any { return int(s.chunk().GetChunkIndex()) },
		Markdown: []Markdown{{Fact, func(r envelope.Object, v any) string {
			part := "part " + strconv.Itoa(toInt(v)+1)
			if total, ok := r.Int("total_chunks"); ok {
				part += "/" + strconv.Itoa(total)
			}
			return part
		}}}},
	// total_chunks reads with chunk_index.
	{Name: "total_chunks", Schema: jschema.Int(0), Reads: r("chunk.total_chunks"), Value: func(s *Source) any { return int(s.chunk().GetTotalChunks()) }},
	// page: where a chunk of a paged document (PDF) is, to cite it; absent
	// for the others.
	{Name: "page", Schema: jschema.Int(1), Reads: r("chunk.page"), Value: func(s *Source) any { return int(s.chunk().GetPage()) }, OmitEmpty: true,
		Markdown: fact("page %d")},
	{Name: "hybrid_score", Schema: jschema.Unit(), Reads: r("hybrid_score"), Value: func(s *Source) any { return Score(s.Hit.GetHybridScore()) },
		Markdown: fact("score %v")},
	{Name: "similarity_score", Schema: jschema.Unit(), Reads: r("similarity_score"), Value: func(s *Source) any { return Score(s.Hit.GetSimilarityScore()) },
		Markdown: fact("semantic %v")},
	{Name: "bm25_score", Schema: jschema.Unit(), Reads: r("bm25_score"), Value: func(s *Source) any { return Score(s.Hit.GetBm25Score()) },
		Markdown: fact("keyword %v")},
	{Name: "source_category", Schema: jschema.NullStr(), Reads: r("chunk.source_category"), Value: func(s *Source) any { return nullable(s.chunk().GetSourceCategory()) },
		Markdown: fact("%s")},
	{Name: "chunk_token_count", Schema: jschema.Int(0), Reads: r("chunk.chunk_token_count"), Value: func(s *Source) any { return int(s.chunk().GetChunkTokenCount()) },
		Markdown: fact("%d tokens")},
	// rank numbers the result; it has no text of its own.
	{Name: "rank", Schema: jschema.Int(1), Reads: r("rank"), Value: func(s *Source) any { return int(s.Hit.GetRank()) }},
	{Name: "score_type", Schema: jschema.Enum(scoreMethods...), Reads: r("score_type"), Value: func(s *Source) any { return string(model.Method(s.Hit.GetScoreType())) }},
	{Name: "context_header", Schema: jschema.NullStr(), Reads: r("chunk.context_header"), Value: func(s *Source) any { return nullable(s.chunk().GetContextHeader()) },
		Markdown: line("Section: %s")},
	{Name: "chunk_snippet", Schema: jschema.Str(), Reads: r("chunk.chunk_text"), Value: func(s *Source) any { return Snippet(s.chunk().GetChunkText(), SnippetLength) },
		Markdown: line("> %s")},
	{Name: "chunk_text", Schema: jschema.Str(), Reads: r("chunk.chunk_text", "chunk.chunk_token_count"), Value: func(s *Source) any {
		return envelope.Text{S: s.chunk().GetChunkText(), Tokens: int(s.chunk().GetChunkTokenCount())}
	}, Markdown: []Markdown{{Body, nil}}},
	// mentions: the graph entities the chunk names, for find_vendor_info.
	{Name: "mentions", Schema: jschema.S{"type": "array", "items": mentionSchema(), "maxItems": MaxMentions}, Reads: r("mentions"),
		Value: func(s *Source) any {
			list := make([]envelope.Object, 0, min(len(s.Hit.GetMentions()), MaxMentions))
			for _, m := range capList(s.Hit.GetMentions(), MaxMentions) {
				list = append(list, envelope.Object{{Key: "name", Value: m.GetName()}, {Key: "type", Value: m.GetEntityType()},
					{Key: "entity_id", Value: m.GetEntityId()}})
			}
			return list
		}, OmitEmpty: true, Markdown: []Markdown{{Line, mentionsMarkdown}}},

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
		Markdown: []Markdown{{NamesBlock, relationshipsMarkdown}},
		List: &List{Relationships: true, Len: func(v model.Vendor) int { return len(v.Relationships) },
			Cut: func(v *model.Vendor, n int) { v.Relationships = capList(v.Relationships, n) }}},
	{Name: "evidence_chunk_ids", Schema: jschema.Array(jschema.Int(0)), Value: func(s *Source) any {
		ids := make([]int64, 0, min(len(s.Vendor.Evidence), s.Mode.Caps.Evidence))
		for _, e := range capList(s.Vendor.Evidence, s.Mode.Caps.Evidence) {
			ids = append(ids, e.ChunkID)
		}
		return ids
	}, Markdown: []Markdown{{Block, func(_ envelope.Object, v any) string {
		ids, _ := v.([]int64)
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = strconv.FormatInt(id, 10)
		}
		return fmt.Sprintf("evidence_chunk_ids (%d): %s\n", len(ids), strings.Join(parts, ", "))
	}}}},
	{Name: "evidence_documents", Schema: jschema.Array(jschema.Obj(jschema.S{
		"source_file":   jschema.Str(),
		"mention_count": jschema.Int(1),
		"chunk_count":   jschema.Int(1),
	}, "source_file", "mention_count", "chunk_count")), Value: func(s *Source) any {
		list := make([]envelope.Object, 0, min(len(s.Vendor.EvidenceDocuments), s.Mode.Caps.Evidence))
		for _, d := range capList(s.Vendor.EvidenceDocuments, s.Mode.Caps.Evidence) {
			list = append(list, envelope.Object{{Key: "source_file", Value: d.SourceFile},
				{Key: "mention_count", Value: d.MentionCount}, {Key: "chunk_count", Value: d.ChunkCount}})
		}
		return list
	}, Markdown: []Markdown{{Block, evidenceDocumentsMarkdown}}},
	{Name: "evidence", Schema: jschema.Array(jschema.Obj(jschema.S{
		"chunk_id":      jschema.Int(0),
		"source_file":   jschema.Str(),
		"mention_count": jschema.Int(1),
		"snippet":       jschema.Str(),
	}, "chunk_id", "source_file", "mention_count", "snippet")), Value: func(s *Source) any {
		list := make([]envelope.Object, 0, min(len(s.Vendor.Evidence), s.Mode.Caps.Evidence))
		for _, e := range capList(s.Vendor.Evidence, s.Mode.Caps.Evidence) {
			list = append(list, envelope.Object{{Key: "chunk_id", Value: e.ChunkID}, {Key: "source_file", Value: e.SourceFile},
				{Key: "mention_count", Value: e.MentionCount}, {Key: "snippet", Value: e.Snippet}})
		}
		return list
	}, Markdown: []Markdown{{Block, evidenceMarkdown}}},
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

// Registry yields every field, in rendering order. It yields the fields
// themselves, not a copy of the list: the markdown walks it for every
// result of every answer.
func Registry() iter.Seq[Field] {
	return func(yield func(Field) bool) {
		for _, f := range registry {
			if !yield(f) {
				return
			}
		}
	}
}

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

func mentionSchema() jschema.S {
	return jschema.Obj(jschema.S{
		"name":      jschema.Str(),
		"type":      jschema.Str(),
		"entity_id": jschema.Str(),
	}, "name", "type", "entity_id")
}

func relationshipSchema() jschema.S {
	return jschema.Obj(jschema.S{
		"relationship_id":   jschema.Str(),
		"source_id":         jschema.Str(),
		"source_name":       jschema.Str(),
		"target_id":         jschema.Str(),
		"target_name":       jschema.Str(),
		"relationship_type": jschema.Str(),
		"metadata": jschema.Nullable(jschema.Obj(jschema.S{
			"confidence":            jschema.Unit(),
			"relationship_metadata": jschema.S{"type": "object"},
		}, "confidence", "relationship_metadata")),
	}, "relationship_id", "source_id", "source_name", "target_id", "target_name", "relationship_type", "metadata")
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

// relationshipsMarkdown names both ends of a relationship: by the names the
// graph gives, else by the entities the same result lists, else by id.
func relationshipsMarkdown(r envelope.Object, v any) string {
	names := map[string]string{}
	for _, key := range []string{"top_entities", "entities"} {
		list, _ := r.Objects(key)
		for _, e := range list {
			id, _ := e.Str("entity_id")
			names[id], _ = e.Str("name")
		}
	}
	label := func(rel envelope.Object, end string) string {
		id, _ := rel.Str(end + "_id")
		if n, _ := rel.Str(end + "_name"); n != "" {
			return n
		}
		if n := names[id]; n != "" {
			return n
		}
		return "`" + id + "`"
	}
	list, _ := v.([]envelope.Object)
	var b strings.Builder
	fmt.Fprintf(&b, "### Relationships (%d)\n", len(list))
	for _, rel := range list {
		typ, _ := rel.Str("relationship_type")
		fmt.Fprintf(&b, "- %s %s %s", label(rel, "source"), typ, label(rel, "target"))
		if m, ok := rel.Object("metadata"); ok {
			if c, ok := m.Float("confidence"); ok {
				fmt.Fprintf(&b, " (confidence %.2f)", c)
			}
		}
		b.WriteString("\n")
	}
	return b.String() + "\n"
}

func mentionsMarkdown(_ envelope.Object, v any) string {
	list, _ := v.([]envelope.Object)
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, len(list))
	for i, m := range list {
		name, _ := m.Str("name")
		typ, _ := m.Str("type")
		parts[i] = fmt.Sprintf("%s (%s)", name, typ)
	}
	return "Mentions: " + strings.Join(parts, ", ")
}

func evidenceDocumentsMarkdown(_ envelope.Object, v any) string {
	list, _ := v.([]envelope.Object)
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Documents mentioning the vendor (%d)\n", len(list))
	for _, d := range list {
		f, _ := d.Str("source_file")
		n, _ := d.Int("mention_count")
		c, _ := d.Int("chunk_count")
		fmt.Fprintf(&b, "- **%s**: %d mentions in %d chunks\n", f, n, c)
	}
	return b.String() + "\n"
}

func evidenceMarkdown(_ envelope.Object, v any) string {
	list, _ := v.([]envelope.Object)
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Evidence (%d)\n", len(list))
	for _, e := range list {
		f, _ := e.Str("source_file")
		id, _ := e.Int("chunk_id")
		n, _ := e.Int("mention_count")
		sn, _ := e.Str("snippet")
		fmt.Fprintf(&b, "- **%s** (chunk %d, %d mentions)\n  > %s\n", f, id, n, sn)
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
