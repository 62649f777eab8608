package render

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/bmcis/knowledge/platform/memo"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
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
	// exact writes s, which the estimate counts exactly rather than
	// approximates.
	exact(sec section, s string)
}

type textWriter struct{ b strings.Builder }

func (w *textWriter) text(_ section, s string)         { w.b.WriteString(s) }
func (w *textWriter) known(_ section, s string, _ int) { w.b.WriteString(s) }
func (w *textWriter) exact(_ section, s string)        { w.b.WriteString(s) }

type estimateWriter struct{ sinks [4]tokens.Sink }

func (w *estimateWriter) text(sec section, s string) { w.sinks[sec].Raw(s) }
func (w *estimateWriter) known(sec section, s string, n int) {
	if n > 0 {
		w.sinks[sec].Known(n)
		return
	}
	w.sinks[sec].Raw(s)
}

func (w *estimateWriter) exact(sec section, s string) { w.sinks[sec].Known(tokens.Count(s)) }

// draftWriter writes the text and records each write (its section, kind,
// end in the text and known count), from which the estimate is priced
// afterwards, or found in estimates when the same writes were priced
// before.
type draftWriter struct {
	textWriter
	writes []write
}

type writeKind uint8

const (
	kindText writeKind = iota
	kindKnown
	kindExact
)

type write struct {
	sec    section
	kind   writeKind
	end    int32
	tokens int32
}

func (w *draftWriter) record(sec section, kind writeKind, s string, n int) {
	w.b.WriteString(s)
	w.writes = append(w.writes, write{sec: sec, kind: kind, end: int32(w.b.Len()), tokens: int32(n)})
}

func (w *draftWriter) text(sec section, s string)         { w.record(sec, kindText, s, 0) }
func (w *draftWriter) known(sec section, s string, n int) { w.record(sec, kindKnown, s, n) }
func (w *draftWriter) exact(sec section, s string)        { w.record(sec, kindExact, s, 0) }

// estimate prices the writes recorded: the estimate of the same writes
// made to an estimateWriter, memoised. An answer repeated (a search page
// asked again, answered from the search cache) is written the same way
// again, and its estimate, a pure function of the writes, is looked up
// rather than priced once more (issue 32).
func (w *draftWriter) estimate() envelope.TokenBreakdown {
	text := w.b.String()
	if len(text) > maxMemoisedText {
		return w.price(text)
	}
	// The text's length first, so that no two texts and writes make the
	// same key.
	buf := keyBuffers.Get().(*[]byte)
	defer keyBuffers.Put(buf)
	key := binary.AppendUvarint((*buf)[:0], uint64(len(text)))
	key = append(key, text...)
	for _, x := range w.writes {
		key = append(key, byte(x.sec), byte(x.kind))
		key = binary.AppendUvarint(key, uint64(x.end))
		key = binary.AppendUvarint(key, uint64(x.tokens))
	}
	*buf = key
	p := estimates.OfBytes(key)
	if b, ok := estimates.Get(p); ok {
		return b
	}
	b := w.price(text)
	estimates.Put(p, b)
	return b
}

// price makes the writes recorded, text being what they wrote, to an
// estimateWriter.
func (w *draftWriter) price(text string) envelope.TokenBreakdown {
	var e estimateWriter
	start := 0
	for _, x := range w.writes {
		s := text[start:x.end]
		start = int(x.end)
		switch x.kind {
		case kindText:
			e.text(x.sec, s)
		case kindKnown:
			e.known(x.sec, s, int(x.tokens))
		case kindExact:
			e.exact(x.sec, s)
		}
	}
	return e.breakdown()
}

var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// estimates memoises draftWriter.estimate for 1,024 answers, by the
// fingerprint of their text and writes.
var estimates = memo.NewPrints[envelope.TokenBreakdown](1024)

// maxMemoisedText bounds the answers whose estimate is memoised: a longer
// one is mostly chunk texts, whose counts are known, cheaper to price than
// to fingerprint.
const maxMemoisedText = 32 << 10

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
	return w.markdown()
}

func (w *textWriter) markdown() string { return strings.TrimRight(w.b.String(), "\n") + "\n" }

func estimateMarkdown(env *envelope.Envelope, view View) envelope.TokenBreakdown {
	var w estimateWriter
	writeMarkdown(&w, env, view)
	return w.breakdown()
}

// draftMarkdown is estimateMarkdown and MarkdownText in one walk.
func draftMarkdown(env *envelope.Envelope, view View) (envelope.TokenBreakdown, Draft) {
	var w draftWriter
	writeMarkdown(&w, env, view)
	return w.estimate(), Draft{md: w.markdown(), ok: true}
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
		parts := make([]string, len(*e.Remaining))
		for i, c := range *e.Remaining {
			parts[i] = fmt.Sprintf("%d this %s", c.Value, c.Tier)
		}
		w.text(secMeta, "\nRemaining: "+strings.Join(parts, ", ")+".\n")
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
		if r, ok := env.Results[n-1].Int("rank"); ok {
			return r
		}
	}
	return 0
}

func writeChunks(w writer, env *envelope.Envelope, view View) {
	summary := []string{}
	if p := env.Pagination; p != nil && len(env.Results) > 0 {
		first, _ := env.Results[0].Int("rank")
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
	if qa := env.QueryAnalysis; qa != nil && len(qa.Vendors) > 0 {
		w.text(secMeta, vendorHint(qa.Vendors)+"\n")
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

// placed collects what the field registry renders at each place for a
// result, in registry order; the heading is the first non-empty Head.
type placed struct {
	head   string
	facts  []string
	lines  []string
	blocks []block
	body   []envelope.Text
}

type block struct {
	s       string
	counted bool
}

func place(r envelope.Object) placed {
	var p placed
	for f := range projection.Registry() {
		v, ok := r.Get(f.Name)
		if !ok {
			continue
		}
		for _, md := range f.Markdown {
			if md.Place == projection.Body {
				if t, ok := v.(envelope.Text); ok {
					p.body = append(p.body, t)
				}
				continue
			}
			s := md.Text(r, v)
			if s == "" {
				continue
			}
			switch md.Place {
			case projection.Head:
				if p.head == "" {
					p.head = s
				}
			case projection.Fact:
				p.facts = append(p.facts, s)
			case projection.Line:
				p.lines = append(p.lines, s)
			case projection.Block:
				p.blocks = append(p.blocks, block{s, false})
			case projection.NamesBlock:
				p.blocks = append(p.blocks, block{s, true})
			}
		}
	}
	return p
}

func writeChunk(w writer, i int, r envelope.Object) {
	n := i + 1
	if rank, ok := r.Int("rank"); ok {
		n = rank
	}
	p := place(r)
	line := fmt.Sprintf("%d. %s", n, p.head)
	if len(p.facts) > 0 {
		if p.head != "" {
			line += " · "
		}
		line += strings.Join(p.facts, " · ")
	}
	w.text(secResults, line+"\n")
	for _, l := range p.lines {
		w.text(secResults, "   "+l+"\n")
	}
	if conf, ok := r.Object("confidence"); ok {
		overall, _ := conf.Float("overall")
		w.text(secResults, fmt.Sprintf("   Confidence %.2f", overall))
		if rk, ok := r.Object("ranking"); ok {
			if ex, ok := rk.Str("explanation"); ok {
				w.text(secResults, " · "+ex)
			}
		}
		w.text(secResults, "\n")
	} else if rk, ok := r.Object("ranking"); ok {
		if ex, ok := rk.Str("explanation"); ok {
			w.text(secResults, "   "+ex+"\n")
		}
	}
	if d, ok := r.Object("deduplication"); ok {
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
	for _, t := range p.body {
		w.text(secResults, "\n")
		w.known(secResults, t.S, t.Tokens)
		w.text(secResults, "\n\n---\n")
	}
}

func writeVendor(w writer, env *envelope.Envelope, view View) {
	if len(env.Results) == 0 {
		w.text(secResults, "No vendor data.\n")
		return
	}
	p := place(env.Results[0])
	facts := []string{p.head}
	if view.Mode != "" {
		facts = append(facts, view.Mode+" mode")
	}
	facts = append(facts, p.facts...)
	w.text(secResults, strings.Join(facts, " · ")+"\n\n")
	for _, l := range p.lines {
		w.text(secResults, l+"\n")
	}
	for _, b := range p.blocks {
		if b.counted {
			w.exact(secResults, b.s)
			continue
		}
		w.text(secResults, b.s)
	}
}

func joinInts(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}

// vendorHint points a query that names vendors to find_vendor_info, which
// answers about a vendor from the graph and the documents that mention it.
func vendorHint(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	if len(names) == 1 {
		return "The query names the vendor " + quoted[0] + ": find_vendor_info gives its entities, relationships and the documents that mention it."
	}
	return "The query names the vendors " + strings.Join(quoted, ", ") + ": find_vendor_info gives their entities, relationships and the documents that mention them."
}
