// Package render turns an envelope into the content of a tool answer:
// format "json" (the default) is the envelope as one compact JSON text
// block, "markdown" a readable rendering, "both" the markdown then the JSON
// block. The envelope always travels as structuredContent too. Render also
// fills execution_context.tokens_used with the exact cl100k count of the
// text blocks it returns.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

// Format selects the content blocks of an answer.
type Format string

// Formats.
const (
	JSON     Format = "json"
	Markdown Format = "markdown"
	Both     Format = "both"
)

// Formats lists every format.
var Formats = []Format{JSON, Markdown, Both}

// DefaultFormat is the format of answers that name none, unless configured
// otherwise (BMCIS_DEFAULT_FORMAT): the markdown carries the same answer for
// about half the tokens of the JSON envelope (docs/MCP.md, Output formats).
const DefaultFormat = Markdown

// Names lists the format names.
func Names() []string {
	out := make([]string, len(Formats))
	for i, f := range Formats {
		out[i] = string(f)
	}
	return out
}

// ParseFormat accepts a format name; "" yields def.
func ParseFormat(s string, def Format) (Format, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return def, true
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, true
		}
	}
	return "", false
}

// View is what the markdown rendering needs beyond the envelope.
type View struct {
	// Title heads the markdown ("Search results for \"jwt\"").
	Title string
	// Mode is the response mode used.
	Mode string
	// Tool is the tool to call for the next page.
	Tool string
	// ChunkLinks is how many leading results get a resource_link block to
	// kb://chunks/{id} (see Links).
	ChunkLinks int
}

// Output is a rendered answer.
type Output struct {
	// Blocks are the text blocks, in order.
	Blocks []string
	// JSON is the final envelope encoding (structuredContent), whatever the
	// format.
	JSON []byte
	// Links are resource_link blocks, after the text blocks.
	Links []Link
	// TokensUsed is the exact token count of Blocks and Links.
	TokensUsed int
}

// ChunkURIPrefix starts the URI of a chunk resource (kb://chunks/{id}).
const ChunkURIPrefix = "kb://chunks/"

// Links are the resource_link blocks of the first view.ChunkLinks results
// that have a chunk_id and no chunk_text: a client can open the chunk in
// full with one click, and a result that already carries its text needs no
// link. Each costs about 20 tokens, so only the few worth reading get one.
func Links(env *envelope.Envelope, view View) []Link {
	var out []Link
	for _, r := range env.Results {
		if len(out) >= view.ChunkLinks {
			break
		}
		id, ok := r.Int("chunk_id")
		if _, full := r.Get("chunk_text"); !ok || full {
			continue
		}
		s := strconv.Itoa(id)
		out = append(out, Link{mcp.NewResourceLink(ChunkURIPrefix+s, "chunk "+s, "", "")})
	}
	return out
}

// Link is a resource_link block written without the empty optional
// members mcp-go always writes ("description":"","mimeType":""), which
// cost 6 tokens a link and say nothing.
type Link struct{ mcp.ResourceLink }

// MarshalJSON writes type, uri, name and only the optional members set.
func (l Link) MarshalJSON() ([]byte, error) {
	type compact struct {
		Type        string `json:"type"`
		URI         string `json:"uri"`
		Name        string `json:"name"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
		MIMEType    string `json:"mimeType,omitempty"`
		Size        *int64 `json:"size,omitempty"`
	}
	r := l.ResourceLink
	return json.Marshal(compact{r.Type, r.URI, r.Name, r.Title, r.Description, r.MIMEType, r.Size})
}

// Compact rewrites the resource links of content as Link, so that an
// answer passed on (the bridge) travels as the endpoint wrote it.
func Compact(content []mcp.Content) {
	for i, c := range content {
		if l, ok := c.(mcp.ResourceLink); ok && l.Meta == nil && l.Annotations == nil {
			content[i] = Link{l}
		}
	}
}

// linkTokens is the cl100k count of the links as they travel (their JSON,
// which MarshalJSON writes compact; the count of a link is memoised, as
// the same chunks recur).
func linkTokens(links []Link) int {
	n := 0
	for _, l := range links {
		b, err := l.MarshalJSON()
		if err == nil {
			n += tokens.CountLines(string(b))
		}
	}
	return n
}

// Estimate estimates, part by part, the tokens the blocks of format f will
// use, without producing them.
func Estimate(env *envelope.Envelope, view View, f Format) envelope.TokenBreakdown {
	b, _ := estimate(env, view, f, false)
	return b
}

// Draft is the markdown an estimate's walk wrote, for RenderDraft of the
// same envelope: the walk that prices the markdown can write it too, so
// an answer is walked once, not twice (issue 32).
type Draft struct {
	md string
	ok bool
	// links and their token count, which every format counts.
	links      []Link
	linkTokens int
	// A kept answer's (Kept): the markdown's count when counted, the
	// encoded results, and the parts of the JSON block it writes the same.
	mdTokens  int
	mdCounted bool
	results   []byte
	fixed     []fixedPart
}

// EstimateDraft is Estimate that also keeps the markdown, for a RenderDraft
// of env unchanged since.
func EstimateDraft(env *envelope.Envelope, view View, f Format) (envelope.TokenBreakdown, Draft) {
	return estimate(env, view, f, true)
}

func estimate(env *envelope.Envelope, view View, f Format, draft bool) (envelope.TokenBreakdown, Draft) {
	var b envelope.TokenBreakdown
	var d Draft
	if f == Markdown || f == Both {
		if draft {
			b, d = draftMarkdown(env, view)
		} else {
			b = estimateMarkdown(env, view)
		}
	}
	if f == JSON || f == Both {
		j := envelope.EstimateJSON(env)
		b.Results += j.Results
		b.Metadata += j.Metadata
		b.Pagination += j.Pagination
		b.Warnings += j.Warnings
	}
	// The links are short and few: counted, not estimated.
	links := Links(env, view)
	n := linkTokens(links)
	b.Results += n
	if draft {
		d.links, d.linkTokens = links, n
	}
	return b, d
}

// Render produces the blocks of format f and sets
// env.ExecutionContext.TokensUsed to their exact token count. In the JSON
// block that count describes the block itself: the count is solved so the
// number written is the number of tokens of the text that contains it.
func Render(env *envelope.Envelope, view View, f Format) (*Output, error) {
	return RenderDraft(env, view, f, Draft{})
}

// RenderDraft is Render using the markdown of d (EstimateDraft of env
// unchanged since) when it has one.
func RenderDraft(env *envelope.Envelope, view View, f Format, d Draft) (*Output, error) {
	out := &Output{Links: d.links}
	// mdTokens counts everything but the JSON block: the markdown and the
	// links.
	mdTokens := d.linkTokens
	if d.links == nil {
		out.Links = Links(env, view)
		mdTokens = linkTokens(out.Links)
	}
	if f == Markdown || f == Both {
		md := d.md
		if !d.ok {
			md = MarkdownText(env, view)
		}
		out.Blocks = append(out.Blocks, md)
		if d.mdCounted {
			mdTokens += d.mdTokens
		} else {
			// Line by line, memoised: most lines recur between answers.
			mdTokens += tokens.CountLines(md)
		}
	}
	if f == Markdown {
		env.ExecutionContext.TokensUsed = mdTokens
		j, err := envelope.Encode(env)
		if err != nil {
			return nil, fmt.Errorf("encode envelope: %w", err)
		}
		out.JSON, out.TokensUsed = j, mdTokens
		return out, nil
	}

	// The JSON block contains tokens_used. Encode it with 0, count, then
	// solve n = base - 1 + tokens(n): cl100k splits a number into groups of
	// up to three digits, one token each, and the number is delimited by
	// punctuation on both sides, so only its own tokens change.
	env.ExecutionContext.TokensUsed = 0
	var j0 []byte
	var err error
	if d.results != nil {
		j0, err = envelope.EncodeWith(env, d.results)
	} else {
		j0, err = envelope.Encode(env)
	}
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	base := mdTokens + d.countJSON(j0)
	n := base
	for range 4 {
		next := base - 1 + numberTokens(n)
		if next == n {
			break
		}
		n = next
	}
	env.ExecutionContext.TokensUsed = n
	j, ok := spliceTokensUsed(j0, n)
	if !ok {
		if j, err = envelope.Encode(env); err != nil {
			return nil, fmt.Errorf("encode envelope: %w", err)
		}
	}
	out.Blocks = append(out.Blocks, string(j))
	out.JSON, out.TokensUsed = j, n
	return out, nil
}

// spliceTokensUsed writes n in place of the 0 that j's execution context
// holds for tokens_used. Quotes inside JSON strings are escaped, so the
// marker below only matches the envelope's own member.
func spliceTokensUsed(j []byte, n int) ([]byte, bool) {
	const marker = `"execution_context":{"tokens_estimated":`
	i := bytes.Index(j, []byte(marker))
	if i < 0 {
		return nil, false
	}
	const used = `,"tokens_used":0,`
	k := bytes.Index(j[i:], []byte(used))
	if k < 0 {
		return nil, false
	}
	at := i + k + len(used) - 2 // the 0
	out := make([]byte, 0, len(j)+8)
	out = append(out, j[:at]...)
	out = strconv.AppendInt(out, int64(n), 10)
	return append(out, j[at+1:]...), true
}

// numberTokens is the cl100k token count of a non-negative integer.
func numberTokens(n int) int {
	digits := len(fmt.Sprint(n))
	return (digits + 2) / 3
}

// ToolResult wraps a rendered answer for MCP: text blocks, the envelope as
// structuredContent, and isError for error envelopes.
func ToolResult(out *Output, env *envelope.Envelope) *mcp.CallToolResult {
	content := make([]mcp.Content, 0, len(out.Blocks)+len(out.Links))
	for _, b := range out.Blocks {
		content = append(content, mcp.NewTextContent(b))
	}
	for _, l := range out.Links {
		content = append(content, l)
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: json.RawMessage(out.JSON),
		IsError:           env.Metadata.Status == envelope.StatusError,
	}
}
