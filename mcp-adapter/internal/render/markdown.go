package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// The markdown is produced by one walk over the envelope that writes to a
// writer. Rendering writes text; estimating prices the same pieces, so the
// estimate follows the layout exactly without building the text.

type section int

const (
	secMeta section = iota
	secResults
	secPagination
	secWarnings
)

type writer interface {
	text(sec section, s string)
	// known writes s, whose token count is known when tokens > 0.
	known(sec section, s string, tokens int)
}

type textWriter struct{ b strings.Builder }

func (w *textWriter) text(_ section, s string)         { w.b.WriteString(s) }
func (w *textWriter) known(_ section, s string, _ int) { w.b.WriteString(s) }

type estimateWriter struct{ sinks [4]tokens.Sink }

func (w *estimateWriter) text(sec section, s string) { w.sinks[sec].Raw(s) }
func (w *estimateWriter) known(sec section, s string, n int) {
	if n > 0 {
		w.sinks[sec].Known(n)
		return
	}
	w.sinks[sec].Raw(s)
}

func (w *estimateWriter) breakdown() envelope.TokenBreakdown {
	return envelope.TokenBreakdown{
		Metadata:   w.sinks[secMeta].Total(),
		Results:    w.sinks[secResults].Total(),
		Pagination: w.sinks[secPagination].Total(),
		Warnings:   w.sinks[secWarnings].Total(),
	}
}

// MarkdownText renders env as markdown.
func MarkdownText(env *envelope.Envelope, view View) string {
	var w textWriter
	writeMarkdown(&w, env, view)
	return strings.TrimRight(w.b.String(), "\n") + "\n"
}

func estimateMarkdown(env *envelope.Envelope, view View) envelope.TokenBreakdown {
	var w estimateWriter
	writeMarkdown(&w, env, view)
	return w.breakdown()
}

func writeMarkdown(w writer, env *envelope.Envelope, view View) {
	if env.Error != nil {
		writeError(w, env)
		writeWarnings(w, env.Warnings)
		return
	}
	title := view.Title
	if title == "" {
		title = env.Metadata.Operation
	}
	w.text(secMeta, "## "+title+"\n\n")
	switch env.Metadata.Operation {
	case "find_vendor_info":
		writeVendor(w, env, view)
	default:
		writeChunks(w, env, view)
	}
	writeWarnings(w, env.Warnings)
	writeNextPage(w, env, view)
}

func writeError(w writer, env *envelope.Envelope) {
	e := env.Error
	if env.NeedsInput != nil {
		ni := env.NeedsInput
		w.text(secMeta, "## Input needed\n\n"+ni.Message+"\n\n")
		if ni.NeedsInput.Reason != "" {
			w.text(secMeta, ni.NeedsInput.Reason+"\n\n")
		}
		if len(ni.Options) > 0 {
			w.text(secMeta, "Options:\n")
			for _, o := range ni.Options {
				line := "- " + o.Field + ": `" + o.Value + "`"
				if o.Description != "" {
					line += " (" + o.Description + ")"
				}
				w.text(secMeta, line+"\n")
			}
			w.text(secMeta, "\n")
		}
		w.text(secMeta, "_"+e.Code+"_\n")
		return
	}
	w.text(secMeta, "## Error: "+e.Code+"\n\n"+e.Message+"\n")
	if e.Suggestion != nil {
		w.text(secMeta, "\nSuggestion: "+*e.Suggestion+"\n")
	}
	if len(e.AllowedFields) > 0 {
		w.text(secMeta, "\nAllowed fields: "+strings.Join(e.AllowedFields, ", ")+"\n")
	}
	if e.Remaining != nil {
		w.text(secMeta, fmt.Sprintf("\nRemaining: %d this minute, %d this hour, %d today.\n",
			e.Remaining.Minute, e.Remaining.Hour, e.Remaining.Day))
	}
	if e.Retryable {
		w.text(secMeta, "\nThis error is temporary; the call can be retried.\n")
	}
	w.text(secMeta, "\nRequest id: "+env.Metadata.RequestID+"\n")
}

func writeWarnings(w writer, ws []envelope.Warning) {
	if len(ws) == 0 {
		return
	}
	w.text(secWarnings, "\n**Notes**\n")
	for _, x := range ws {
		line := "- " + x.Code + ": " + x.Message
		if x.Suggestion != nil {
			line += " (" + strings.TrimSuffix(*x.Suggestion, ".") + ")"
		}
		w.text(secWarnings, line+"\n")
	}
}

func writeNextPage(w writer, env *envelope.Envelope, view View) {
	p := env.Pagination
	if p == nil {
		return
	}
	if p.HasMore && p.Cursor != nil {
		tool := view.Tool
		if tool == "" {
			tool = env.Metadata.Operation
		}
		w.text(secPagination, fmt.Sprintf("\nNext page: call `%s` again with the same query and cursor `", tool))
		w.known(secPagination, *p.Cursor, tokens.EstimateOpaque(*p.Cursor))
		w.text(secPagination, fmt.Sprintf("` (%d more results).\n", max(p.TotalAvailable-resultsEnd(env), 0)))
		return
	}
	w.text(secPagination, "\nThis is the last page.\n")
}

// resultsEnd is the 1-based rank of the page's last result.
func resultsEnd(env *envelope.Envelope) int {
	if n := len(env.Results); n > 0 {
		if r, ok := intField(env.Results[n-1], "rank"); ok {
			return r
		}
	}
	return 0
}

func writeChunks(w writer, env *envelope.Envelope, view View) {
	summary := []string{}
	if p := env.Pagination; p != nil && len(env.Results) > 0 {
		first, _ := intField(env.Results[0], "rank")
		last := resultsEnd(env)
		if first > 0 && last > 0 {
			summary = append(summary, fmt.Sprintf("Results %d-%d of %d", first, last, p.TotalAvailable))
		} else {
			summary = append(summary, fmt.Sprintf("%d of %d results", p.ReturnedCount, p.TotalAvailable))
		}
	} else {
		summary = append(summary, fmt.Sprintf("%d results", len(env.Results)))
	}
	if view.Mode != "" {
		summary = append(summary, view.Mode+" mode")
	}
	if env.ExecutionContext.CacheHit {
		summary = append(summary, "cached")
	}
	w.text(secMeta, strings.Join(summary, " · ")+"\n")
	if qa := env.QueryAnalysis; qa != nil && len(qa.UnmatchedTerms) > 0 {
		w.text(secMeta, "Terms not found on this page: "+strings.Join(qa.UnmatchedTerms, ", ")+"\n")
	}
	w.text(secMeta, "\n")
	if len(env.Results) == 0 {
		w.text(secResults, "No results.\n")
		return
	}
	for i, r := range env.Results {
		writeChunk(w, i, r)
	}
}

func writeChunk(w writer, i int, r envelope.Object) {
	n := i + 1
	if rank, ok := intField(r, "rank"); ok {
		n = rank
	}
	head := ""
	if sf, ok := stringField(r, "source_file"); ok {
		head = "**" + sf + "**"
	} else if id, ok := intField(r, "chunk_id"); ok {
		head = "chunk " + strconv.Itoa(id)
	}
	var facts []string
	if sf, _ := stringField(r, "source_file"); sf != "" {
		if id, ok := intField(r, "chunk_id"); ok {
			facts = append(facts, "id "+strconv.Itoa(id))
		}
	}
	if idx, ok := intField(r, "chunk_index"); ok {
		part := "part " + strconv.Itoa(idx+1)
		if total, ok := intField(r, "total_chunks"); ok {
			part += "/" + strconv.Itoa(total)
		}
		facts = append(facts, part)
	}
	if s, ok := floatField(r, "hybrid_score"); ok {
		facts = append(facts, "score "+strconv.FormatFloat(s, 'f', 3, 64))
	}
	if s, ok := floatField(r, "similarity_score"); ok {
		facts = append(facts, "semantic "+strconv.FormatFloat(s, 'f', 3, 64))
	}
	if s, ok := floatField(r, "bm25_score"); ok {
		facts = append(facts, "keyword "+strconv.FormatFloat(s, 'f', 3, 64))
	}
	if c, ok := stringField(r, "source_category"); ok {
		facts = append(facts, c)
	}
	if t, ok := intField(r, "chunk_token_count"); ok {
		facts = append(facts, strconv.Itoa(t)+" tokens")
	}
	line := fmt.Sprintf("%d. %s", n, head)
	if len(facts) > 0 {
		if head != "" {
			line += " · "
		}
		line += strings.Join(facts, " · ")
	}
	w.text(secResults, line+"\n")
	if h, ok := stringField(r, "context_header"); ok {
		w.text(secResults, "   Section: "+h+"\n")
	}
	if s, ok := stringField(r, "chunk_snippet"); ok {
		w.text(secResults, "   > "+s+"\n")
	}
	if conf, ok := objectField(r, "confidence"); ok {
		overall, _ := floatField(conf, "overall")
		w.text(secResults, fmt.Sprintf("   Confidence %.2f", overall))
		if rk, ok := objectField(r, "ranking"); ok {
			if ex, ok := stringField(rk, "explanation"); ok {
				w.text(secResults, " · "+ex)
			}
		}
		w.text(secResults, "\n")
	} else if rk, ok := objectField(r, "ranking"); ok {
		if ex, ok := stringField(rk, "explanation"); ok {
			w.text(secResults, "   "+ex+"\n")
		}
	}
	if d, ok := objectField(r, "deduplication"); ok {
		dup, _ := d.Get("is_duplicate")
		ids, _ := d.Get("similar_chunk_ids")
		if list, _ := ids.([]int64); len(list) > 0 || dup == true {
			s := "   Similar chunks: " + joinInts(list)
			if dup == true {
				s = "   Duplicate of a higher-ranked result; similar chunks: " + joinInts(list)
			}
			w.text(secResults, s+"\n")
		}
	}
	if v, ok := r.Get("chunk_text"); ok {
		if t, ok := v.(envelope.Text); ok {
			w.text(secResults, "\n")
			w.known(secResults, t.S, t.Tokens)
			w.text(secResults, "\n\n---\n")
		}
	}
}

func writeVendor(w writer, env *envelope.Envelope, view View) {
	if len(env.Results) == 0 {
		w.text(secResults, "No vendor data.\n")
		return
	}
	v := env.Results[0]
	name, _ := stringField(v, "vendor_name")
	facts := []string{"**" + name + "**"}
	if view.Mode != "" {
		facts = append(facts, view.Mode+" mode")
	}
	if lu, ok := stringField(v, "last_updated"); ok {
		facts = append(facts, "updated "+lu)
	}
	w.text(secResults, strings.Join(facts, " · ")+"\n\n")
	if st, ok := objectField(v, "statistics"); ok {
		ec, _ := intField(st, "entity_count")
		rc, _ := intField(st, "relationship_count")
		w.text(secResults, fmt.Sprintf("Entities: %d · Relationships: %d\n", ec, rc))
		if d, ok := st.Get("entity_type_distribution"); ok {
			w.text(secResults, "Entity types: "+distribution(d)+"\n")
		}
		if d, ok := st.Get("relationship_type_distribution"); ok {
			w.text(secResults, "Relationship types: "+distribution(d)+"\n")
		}
		w.text(secResults, "\n")
	}
	names := map[string]string{}
	for _, key := range []string{"top_entities", "entities"} {
		list, ok := objectsField(v, key)
		if !ok {
			continue
		}
		label := "Top entities"
		if key == "entities" {
			label = "Entities"
		}
		w.text(secResults, fmt.Sprintf("### %s (%d)\n", label, len(list)))
		for _, e := range list {
			id, _ := stringField(e, "entity_id")
			en, _ := stringField(e, "name")
			names[id] = en
			typ, _ := stringField(e, "entity_type")
			conf, _ := floatField(e, "confidence")
			line := fmt.Sprintf("- **%s** (%s, confidence %.2f)", en, typ, conf)
			if sn, ok := stringField(e, "snippet"); ok {
				line += ": " + sn
			}
			w.text(secResults, line+"\n")
		}
		w.text(secResults, "\n")
	}
	if list, ok := objectsField(v, "relationships"); ok {
		w.text(secResults, fmt.Sprintf("### Relationships (%d)\n", len(list)))
		for _, r := range list {
			src, _ := stringField(r, "source_id")
			dst, _ := stringField(r, "target_id")
			typ, _ := stringField(r, "relationship_type")
			line := fmt.Sprintf("- %s %s %s", label(names, src), typ, label(names, dst))
			if m, ok := objectField(r, "metadata"); ok {
				if c, ok := floatField(m, "confidence"); ok {
					line += fmt.Sprintf(" (confidence %.2f)", c)
				}
			}
			w.text(secResults, line+"\n")
		}
		w.text(secResults, "\n")
	}
	for _, key := range []string{"entity_ids", "relationship_ids"} {
		if v, ok := v.Get(key); ok {
			ids, _ := v.([]string)
			w.text(secResults, fmt.Sprintf("%s (%d): %s\n", key, len(ids), strings.Join(ids, ", ")))
		}
	}
}

func label(names map[string]string, id string) string {
	if n := names[id]; n != "" {
		return n
	}
	return "`" + id + "`"
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

func joinInts(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

func stringField(o envelope.Object, key string) (string, bool) {
	v, ok := o.Get(key)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, x != ""
	case envelope.Text:
		return x.S, x.S != ""
	case *string:
		if x != nil {
			return *x, *x != ""
		}
	}
	return "", false
}

func intField(o envelope.Object, key string) (int, bool) {
	v, ok := o.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case int32:
		return int(x), true
	}
	return 0, false
}

func floatField(o envelope.Object, key string) (float64, bool) {
	v, ok := o.Get(key)
	if !ok {
		return 0, false
	}
	f, ok := v.(float64)
	return f, ok
}

func objectField(o envelope.Object, key string) (envelope.Object, bool) {
	v, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	x, ok := v.(envelope.Object)
	return x, ok
}

func objectsField(o envelope.Object, key string) ([]envelope.Object, bool) {
	v, ok := o.Get(key)
	if !ok {
		return nil, false
	}
	x, ok := v.([]envelope.Object)
	return x, ok
}
