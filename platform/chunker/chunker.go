// Package chunker splits documents into retrieval chunks of about
// TargetTokens cl100k tokens, following document structure: markdown
// headings give each chunk a context header ("Guide > Setup > Linux"),
// fenced code blocks are never cut, prose is cut at paragraph, then
// sentence, then token boundaries, and consecutive chunks of the same
// section share a small overlap.
//
// Every chunk's Text is a contiguous slice of the source (overlap included),
// except the parts of an oversized code block, which are re-fenced.
package chunker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmcis/knowledge/platform/cl100k"
)

// Format is the kind of source text.
type Format int

const (
	// Markdown honours ATX/setext headings and fenced code blocks.
	Markdown Format = iota
	// PlainText splits on blank lines, then sentences.
	PlainText
	// Abstract is a title + text record (e.g. a JSONL abstract); the title
	// is the context header and the text is chunked as plain text.
	Abstract
	// PagedMarkdown is markdown of a paged document (PDF): a line holding
	// only a form feed starts the next page. Pages count from 1, the page
	// joins the heading path after the title ("Handbook.pdf > p. 4 >
	// Heading"), a heading's section carries over a page break, and no
	// chunk spans two pages.
	PagedMarkdown
)

// Options tune chunk sizes. Zero fields take the defaults.
type Options struct {
	// TargetTokens is the maximum size of a chunk (default 512). Only a
	// code block between TargetTokens and MaxCodeTokens may exceed it.
	TargetTokens int
	// OverlapTokens is the most tokens repeated from the end of the previous
	// chunk of the same section (default 50; negative disables overlap).
	OverlapTokens int
	// MaxCodeTokens is the hard cap for a fenced code block kept whole in one
	// chunk (default 2*TargetTokens). A larger block is split at line
	// boundaries into parts of at most TargetTokens, each wrapped in the
	// block's own opening and closing fence lines so every part is still a
	// valid code block; a single line longer than that is cut at token
	// boundaries.
	MaxCodeTokens int
}

// DefaultOptions are 512-token chunks with a 50-token overlap.
func DefaultOptions() Options {
	return Options{TargetTokens: 512, OverlapTokens: 50, MaxCodeTokens: 1024}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.TargetTokens <= 0 {
		o.TargetTokens = d.TargetTokens
	}
	if o.OverlapTokens == 0 {
		o.OverlapTokens = d.OverlapTokens
	}
	if o.OverlapTokens < 0 {
		o.OverlapTokens = 0
	}
	if o.MaxCodeTokens <= 0 {
		o.MaxCodeTokens = 2 * o.TargetTokens
	}
	return o
}

// Chunk is one piece of a document as the chunker cut it, before it is
// stored: it has no id or hash yet, and it says how much of its text
// repeats the previous piece (OverlapTokens), which only the cutting needs.
// Its fields have the names of searchv1.Chunk's, the record a chunk ends
// as (see docs/SEARCH.md, "One chunk record").
type Chunk struct {
	// ChunkIndex is the 0-based position of the chunk in its document.
	ChunkIndex int
	// TotalChunks is the number of chunks of the document.
	TotalChunks int
	// ChunkText is the chunk content, overlap included.
	ChunkText string
	// ContextHeader is the heading path, root first, joined by " > ". The
	// document title, when given, is the root.
	ContextHeader string
	// ChunkTokenCount is the exact cl100k token count of ChunkText.
	ChunkTokenCount int
	// OverlapTokens is the token count of the prefix of ChunkText repeated from
	// the previous chunk (0 when there is none).
	OverlapTokens int
	// Page is the 1-based page the chunk is on (PagedMarkdown), else 0.
	Page int
}

// Chunker splits documents. It is safe for concurrent use.
type Chunker struct {
	tok  *cl100k.Tokenizer
	opts Options
}

// New returns a chunker using tok for all token counting.
func New(tok *cl100k.Tokenizer, opts Options) (*Chunker, error) {
	if tok == nil {
		return nil, errors.New("chunker: nil tokenizer")
	}
	opts = opts.withDefaults()
	if opts.OverlapTokens >= opts.TargetTokens/2 {
		return nil, fmt.Errorf("chunker: overlap %d must be under half the target %d", opts.OverlapTokens, opts.TargetTokens)
	}
	if opts.MaxCodeTokens < opts.TargetTokens {
		return nil, fmt.Errorf("chunker: max code tokens %d below target %d", opts.MaxCodeTokens, opts.TargetTokens)
	}
	return &Chunker{tok: tok, opts: opts}, nil
}

// NewDefault returns a chunker with DefaultOptions and the cl100k tokenizer.
func NewDefault() (*Chunker, error) {
	tok, err := cl100k.Load()
	if err != nil {
		return nil, err
	}
	return New(tok, DefaultOptions())
}

// Options reports the effective options.
func (c *Chunker) Options() Options { return c.opts }

// Tokenizer returns the tokenizer used for counting.
func (c *Chunker) Tokenizer() *cl100k.Tokenizer { return c.tok }

// Split chunks a document of the given format. title (may be empty) is the
// root of every context header. A cancelled ctx ends the split with
// ctx.Err(): it is checked between pieces (blocks, sentences, code lines,
// chunks), so a huge document stops within one piece's tokenizing.
func (c *Chunker) Split(ctx context.Context, format Format, title, text string) ([]Chunk, error) {
	title = strings.TrimSpace(title)
	var blocks []block
	switch format {
	case Markdown:
		blocks = markdownBlocks(title, text, false)
	case PagedMarkdown:
		blocks = markdownBlocks(title, text, true)
	case PlainText, Abstract:
		blocks = textBlocks(title, text)
	default:
		return nil, fmt.Errorf("chunker: unknown format %d", format)
	}
	units, err := c.sizeBlocks(ctx, text, blocks)
	if err != nil {
		return nil, err
	}
	chunks, err := c.pack(ctx, text, units)
	if err != nil {
		return nil, err
	}
	for i := range chunks {
		chunks[i].ChunkIndex = i
		chunks[i].TotalChunks = len(chunks)
	}
	return chunks, nil
}

type unitKind uint8

const (
	prose unitKind = iota
	heading
	code
)

// unit is an indivisible span of the source for packing.
type unit struct {
	start, end int
	// synthetic, when set, is the text of a re-fenced code part; such units
	// always form a chunk of their own.
	synthetic string
	path      []string
	kind      unitKind
	tokens    int
	page      int
}

func (c *Chunker) newUnit(src string, start, end int, path []string, kind unitKind) unit {
	return unit{start: start, end: end, path: path, kind: kind, tokens: c.tok.Count(src[start:end])}
}

// block is a structural span before size-based splitting.
type block struct {
	start, end int
	page       int
	path       []string
	kind       unitKind
	// fence lines of a code block, kept to re-wrap its parts.
	open, close string
	bodyStart   int
	bodyEnd     int
}

// textBlocks handles plain text and abstracts: paragraphs under one header.
func textBlocks(title, src string) []block {
	var path []string
	if title != "" {
		path = []string{title}
	}
	var blocks []block
	forEachParagraph(src, 0, len(src), func(s, e int) {
		blocks = append(blocks, block{start: s, end: e, path: path, kind: prose})
	})
	return blocks
}

// sizeBlocks turns blocks into units no larger than the target, splitting
// prose by lines and sentences and oversized code blocks by lines.
func (c *Chunker) sizeBlocks(ctx context.Context, src string, blocks []block) ([]unit, error) {
	target := c.opts.TargetTokens
	var units []unit
	for _, b := range blocks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u := c.newUnit(src, b.start, b.end, b.path, b.kind)
		var us []unit
		var err error
		switch {
		case u.tokens <= target:
			us = []unit{u}
		case b.kind == code && u.tokens <= c.opts.MaxCodeTokens:
			us = []unit{u} // kept whole, in a chunk of its own
		case b.kind == code:
			us, err = c.splitCode(ctx, src, b)
		default:
			us, err = c.splitProse(ctx, src, b.start, b.end, b.path, b.kind)
		}
		if err != nil {
			return nil, err
		}
		for i := range us {
			us[i].page = b.page
		}
		units = append(units, us...)
	}
	return units, nil
}

// splitProse cuts an oversized prose span at sentence starts (which include
// line starts), then cuts any still-oversized sentence at token boundaries.
func (c *Chunker) splitProse(ctx context.Context, src string, start, end int, path []string, kind unitKind) ([]unit, error) {
	var out []unit
	starts := sentenceStarts(src, start, end)
	for i, s := range starts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e := end
		if i+1 < len(starts) {
			e = starts[i+1]
		}
		e = trimRightSpace(src, s, e)
		if e <= s {
			continue
		}
		u := c.newUnit(src, s, e, path, kind)
		if u.tokens <= c.opts.TargetTokens {
			out = append(out, u)
			continue
		}
		for _, r := range c.cutTokens(src, s, e, c.opts.TargetTokens) {
			out = append(out, c.newUnit(src, r[0], r[1], path, kind))
		}
	}
	return out, nil
}

// cutTokens splits src[start:end] at pre-tokenizer piece boundaries into
// ranges of at most limit tokens, preferring to cut before a space; a piece
// of more than limit tokens is cut inside (cutPiece).
func (c *Chunker) cutTokens(src string, start, end, limit int) [][2]int {
	var out [][2]int
	segStart, segTokens := start, 0
	c.tok.Pieces(src[start:end], func(ps, pe, n int) {
		ps, pe = ps+start, pe+start
		if segTokens+n > limit && segTokens > 0 {
			out = append(out, [2]int{segStart, ps})
			segStart, segTokens = ps, 0
			// Drop the leading space of a " word" piece from the new segment.
			if src[ps] == ' ' {
				segStart = ps + 1
			}
		}
		if n > limit {
			// No piece boundary to cut at: re-cutting the piece with a
			// smaller limit would find none either, forever.
			out = append(out, cutPiece(src, segStart, pe, n, limit)...)
			segStart, segTokens = pe, 0
			return
		}
		segTokens += n
	})
	if segStart < end {
		out = append(out, [2]int{segStart, end})
	}
	// Re-cutting can change tokenization at the edges by a token; verify
	// and halve any segment that still overflows (rare).
	var fixed [][2]int
	for _, r := range out {
		if c.tok.Count(src[r[0]:r[1]]) <= limit || r[1]-r[0] < 2 {
			fixed = append(fixed, r)
			continue
		}
		fixed = append(fixed, c.cutTokens(src, r[0], r[1], limit-limit/8)...)
	}
	return fixed
}

// cutPiece cuts src[start:end], which ends with a piece of n > limit
// tokens (a run of letters with no space or punctuation: CJK text without
// punctuation, a DNA sequence), into runs of whole runes of about limit
// tokens each by the run's average bytes per token; cutTokens re-cuts what
// still overflows.
func cutPiece(src string, start, end, n, limit int) [][2]int {
	size := max((end-start)*limit/n, 1)
	var out [][2]int
	for s := start; s < end; {
		e := min(s+size, end)
		for e < end && !utf8.RuneStart(src[e]) {
			e++
		}
		out = append(out, [2]int{s, e})
		s = e
	}
	return out
}

// splitCode splits a code block over the hard cap into line-aligned parts,
// each wrapped in the original fences.
func (c *Chunker) splitCode(ctx context.Context, src string, b block) ([]unit, error) {
	fenceTokens := c.tok.Count(b.open + "\n" + b.close)
	limit := c.opts.TargetTokens - fenceTokens - 2
	if limit < 16 {
		limit = 16
	}
	var out []unit
	emit := func(s, e int) {
		body := strings.TrimRight(src[s:e], "\n")
		text := b.open + "\n" + body + "\n" + b.close
		out = append(out, unit{start: s, end: e, synthetic: text, path: b.path, kind: code, tokens: c.tok.Count(text)})
	}
	partStart, partTokens := b.bodyStart, 0
	for ls := b.bodyStart; ls < b.bodyEnd; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		le := strings.IndexByte(src[ls:b.bodyEnd], '\n')
		if le < 0 {
			le = b.bodyEnd
		} else {
			le = ls + le + 1
		}
		n := c.tok.Count(src[ls:le])
		if n > limit {
			// A single giant line: flush, then cut it at token boundaries.
			if partStart < ls {
				emit(partStart, ls)
			}
			for _, r := range c.cutTokens(src, ls, le, limit) {
				emit(r[0], r[1])
			}
			partStart, partTokens = le, 0
			ls = le
			continue
		}
		if partTokens+n > limit && partStart < ls {
			emit(partStart, ls)
			partStart, partTokens = ls, 0
		}
		partTokens += n
		ls = le
	}
	if partStart < b.bodyEnd {
		emit(partStart, b.bodyEnd)
	}
	return out, nil
}

// pack greedily fills chunks with consecutive units of one section subtree.
func (c *Chunker) pack(ctx context.Context, src string, units []unit) ([]Chunk, error) {
	target := c.opts.TargetTokens
	var out []Chunk
	overlapStart, overlapTokens := -1, 0
	for i := 0; i < len(units); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u := units[i]
		if u.synthetic != "" || u.tokens > target {
			text := u.synthetic
			if text == "" {
				text = src[u.start:u.end]
			}
			out = append(out, Chunk{ChunkText: text, ContextHeader: header(u.path), ChunkTokenCount: c.tok.Count(text), Page: u.page})
			overlapStart, overlapTokens = -1, 0
			i++
			continue
		}
		budget := target - overlapTokens
		used, j := u.tokens, i+1
		for j < len(units) {
			v := units[j]
			if v.synthetic != "" || v.tokens > target || !hasPrefix(v.path, u.path) {
				break
			}
			// +1: the separator between units usually costs about a token.
			if used+1+v.tokens > budget {
				break
			}
			used += 1 + v.tokens
			j++
		}
		// Do not leave a heading dangling at the end of a chunk.
		for j-1 > i && units[j-1].kind == heading && j < len(units) {
			j--
		}
		start := u.start
		if overlapStart >= 0 {
			start = overlapStart
		}
		text := src[start:units[j-1].end]
		n := c.tok.Count(text)
		for n > target && j-1 > i {
			j--
			text = src[start:units[j-1].end]
			n = c.tok.Count(text)
		}
		ov := overlapTokens
		if n > target && start != u.start {
			start, ov = u.start, 0
			text = src[start:units[j-1].end]
			n = c.tok.Count(text)
		}
		out = append(out, Chunk{ChunkText: text, ContextHeader: header(u.path), ChunkTokenCount: n, OverlapTokens: ov, Page: u.page})

		overlapStart, overlapTokens = -1, 0
		if j < len(units) && c.opts.OverlapTokens > 0 {
			last, next := units[j-1], units[j]
			if last.kind == prose && next.kind == prose && next.synthetic == "" &&
				next.tokens <= target && equalPath(last.path, next.path) {
				overlapStart, overlapTokens = c.overlap(src, last)
			}
		}
		i = j
	}
	return out, nil
}

// overlap picks the start of the tail of u to repeat in the next chunk: the
// earliest sentence start whose tail fits OverlapTokens, else the earliest
// word boundary that fits. It returns -1 when nothing fits.
func (c *Chunker) overlap(src string, u unit) (int, int) {
	limit := c.opts.OverlapTokens
	for _, s := range sentenceStarts(src, u.start, u.end) {
		if s == u.start && u.tokens > limit {
			continue
		}
		if n := c.tok.Count(src[s:u.end]); n <= limit {
			return s, n
		}
	}
	// Token tail: walk pieces, remembering boundaries before spaces.
	type bound struct{ pos, tokensAfter int }
	var bounds []bound
	total := 0
	c.tok.Pieces(src[u.start:u.end], func(ps, _, n int) {
		ps += u.start
		if src[ps] == ' ' {
			bounds = append(bounds, bound{pos: ps + 1, tokensAfter: total})
		}
		total += n
	})
	for _, b := range bounds {
		after := total - b.tokensAfter
		if after <= limit+1 && b.pos < u.end {
			if n := c.tok.Count(src[b.pos:u.end]); n <= limit && n > 0 {
				return b.pos, n
			}
		}
	}
	return -1, 0
}

func header(path []string) string {
	parts := make([]string, 0, len(path))
	for _, p := range path {
		if p == "" || (len(parts) > 0 && strings.EqualFold(parts[len(parts)-1], p)) {
			continue
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " > ")
}

func hasPrefix(path, prefix []string) bool {
	if len(path) < len(prefix) {
		return false
	}
	for i := range prefix {
		if path[i] != prefix[i] {
			return false
		}
	}
	return true
}

func equalPath(a, b []string) bool { return len(a) == len(b) && hasPrefix(a, b) }
