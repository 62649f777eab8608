package render_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/envelope"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
)

func searchEnvelope(n int, withText bool) *envelope.Envelope {
	docs := testfake.Documents()
	cur := "eyJxdWVyeV9oYXNoIjoiYWJjIiwib2Zmc2V0IjoxMH0.c2lnbmF0dXJlMTIz"
	env := &envelope.Envelope{
		Metadata:         envelope.Metadata{Operation: "semantic_search", Version: envelope.Version, Timestamp: "2026-11-01T12:00:00.000Z", RequestID: "req_00112233aabbccdd", Status: envelope.StatusSuccess},
		Results:          []envelope.Object{},
		Pagination:       &envelope.Pagination{Cursor: &cur, PageSize: 10, HasMore: true, TotalAvailable: 99, ReturnedCount: n},
		ExecutionContext: envelope.ExecutionContext{RequestID: "req_00112233aabbccdd", ExecutionTimeMS: 1.25},
		Warnings:         []envelope.Warning{{Level: envelope.LevelInfo, Code: "LOW_QUALITY_RESULTS", Message: "m", Suggestion: envelope.Ptr("s")}},
	}
	for i := 0; i < n; i++ {
		d := docs[i%len(docs)]
		o := envelope.Object{{Key: "chunk_id", Value: int64(1000 + i)}, {Key: "source_file", Value: "docs/" + d.Name},
			{Key: "source_category", Value: d.Category}, {Key: "hybrid_score", Value: 0.8123}, {Key: "rank", Value: i + 1},
			{Key: "chunk_index", Value: 0}, {Key: "total_chunks", Value: 3}}
		if withText {
			o = append(o, envelope.Field{Key: "chunk_text", Value: envelope.Text{S: d.Text, Tokens: tokens.Count(d.Text)}})
		}
		env.Results = append(env.Results, o)
	}
	return env
}

func TestTokensUsedIsExact(t *testing.T) {
	for _, n := range []int{0, 1, 3, 10, 40} {
		for _, text := range []bool{false, true} {
			for _, f := range render.Formats {
				t.Run(fmt.Sprintf("%d/%v/%s", n, text, f), func(t *testing.T) {
					env := searchEnvelope(n, text)
					b := render.Estimate(env, render.View{Title: "Results", Mode: "metadata"}, f)
					env.ExecutionContext.TokenBreakdown, env.ExecutionContext.TokensEstimated = &b, b.Total()
					out, err := render.Render(env, render.View{Title: "Results", Mode: "metadata"}, f)
					require.NoError(t, err)
					total := 0
					for _, b := range out.Blocks {
						total += tokens.Count(b)
					}
					require.Equal(t, total, out.TokensUsed)
					require.Equal(t, total, env.ExecutionContext.TokensUsed)
					var decoded struct {
						ExecutionContext struct {
							TokensUsed int `json:"tokens_used"`
						} `json:"execution_context"`
					}
					require.NoError(t, json.Unmarshal(out.JSON, &decoded))
					require.Equal(t, total, decoded.ExecutionContext.TokensUsed, "the JSON states its own count")
					switch f {
					case render.JSON:
						require.Len(t, out.Blocks, 1)
						require.Equal(t, string(out.JSON), out.Blocks[0])
						full, err := envelope.Marshal(env)
						require.NoError(t, err)
						require.Equal(t, string(full), out.Blocks[0], "splicing the count equals re-encoding")
					case render.Markdown:
						require.Len(t, out.Blocks, 1)
						require.True(t, strings.HasPrefix(out.Blocks[0], "## Results"))
					case render.Both:
						require.Len(t, out.Blocks, 2)
						require.Equal(t, string(out.JSON), out.Blocks[1])
					}
					require.InDelta(t, total, b.Total(), 0.1*float64(total), "the estimate made before rendering")
				})
			}
		}
	}
}

func TestMarkdownContent(t *testing.T) {
	env := searchEnvelope(2, false)
	md := render.MarkdownText(env, render.View{Title: `Search results for "x"`, Mode: "metadata", Tool: "semantic_search"})
	require.Contains(t, md, `## Search results for "x"`)
	require.Contains(t, md, "Results 1-2 of 99 · metadata mode")
	require.Contains(t, md, "1. **docs/")
	require.Contains(t, md, "score 0.812")
	require.Contains(t, md, "Next page: call `semantic_search` again with the same query and cursor `eyJ")
	require.Contains(t, md, "(97 more results)")
	require.Contains(t, md, "LOW_QUALITY_RESULTS: m (s)")

	env.Pagination.HasMore, env.Pagination.Cursor = false, nil
	require.Contains(t, render.MarkdownText(env, render.View{}), "This is the last page.")

	vendor := &envelope.Envelope{
		Metadata: envelope.Metadata{Operation: "find_vendor_info", Status: envelope.StatusSuccess},
		Results: []envelope.Object{{
			{Key: "vendor_name", Value: "Acme"},
			{Key: "entities", Value: []envelope.Object{{{Key: "entity_id", Value: "e1"}, {Key: "name", Value: "Cloud"}, {Key: "entity_type", Value: "PRODUCT"}, {Key: "confidence", Value: 0.9}, {Key: "snippet", Value: "A product."}}}},
			{Key: "relationships", Value: []envelope.Object{{{Key: "relationship_id", Value: "r1"}, {Key: "source_id", Value: "e1"}, {Key: "target_id", Value: "e2"}, {Key: "relationship_type", Value: "PARTNERS_WITH"}, {Key: "metadata", Value: nil}}}},
			{Key: "statistics", Value: envelope.Object{{Key: "entity_count", Value: 1}, {Key: "relationship_count", Value: 1}, {Key: "entity_type_distribution", Value: map[string]int{"PRODUCT": 1}}, {Key: "relationship_type_distribution", Value: map[string]int{}}}},
		}},
		Warnings: []envelope.Warning{},
	}
	md = render.MarkdownText(vendor, render.View{Title: "Vendor: Acme", Mode: "full"})
	require.Contains(t, md, "- **Cloud** (PRODUCT, confidence 0.90): A product.")
	require.Contains(t, md, "- Cloud PARTNERS_WITH `e2`", "an end without a name is named by the listed entities, else by id")
	require.Contains(t, md, "Entity types: PRODUCT 1")

	// Both ends named by the graph: the vendor itself is never listed
	// among its entities. Evidence renders with its snippets.
	vendor.Results[0][2].Value = []envelope.Object{{{Key: "relationship_id", Value: "r1"}, {Key: "source_id", Value: "v"}, {Key: "source_name", Value: "Acme"},
		{Key: "target_id", Value: "e1"}, {Key: "target_name", Value: "Cloud"}, {Key: "relationship_type", Value: "PRODUCES"}, {Key: "metadata", Value: nil}}}
	vendor.Results[0] = append(vendor.Results[0], envelope.Field{Key: "evidence", Value: []envelope.Object{{{Key: "chunk_id", Value: int64(7)},
		{Key: "source_file", Value: "contracts.md"}, {Key: "mention_count", Value: 2}, {Key: "snippet", Value: "Acme renewed."}}}})
	md = render.MarkdownText(vendor, render.View{Title: "Vendor: Acme", Mode: "full"})
	require.Contains(t, md, "- Acme PRODUCES Cloud")
	require.Contains(t, md, "### Evidence (1)\n- **contracts.md** (chunk 7, 2 mentions)\n  > Acme renewed.")

	errEnv := &envelope.Envelope{
		Metadata: envelope.Metadata{Operation: "find_vendor_info", Status: envelope.StatusError, RequestID: "req_1"},
		Error:    &envelope.Error{Code: "RATE_LIMIT", Message: "Rate limit exceeded", Retryable: true, Suggestion: envelope.Ptr("Wait."), Remaining: &envelope.Remaining{{Tier: "minute"}, {Tier: "hour", Value: 3}, {Tier: "day"}}},
	}
	md = render.MarkdownText(errEnv, render.View{})
	require.Contains(t, md, "## Error: RATE_LIMIT")
	require.Contains(t, md, "Suggestion: Wait.")
	require.Contains(t, md, "Remaining: 0 this minute, 3 this hour, 0 this day.")
	require.Contains(t, md, "req_1")
}

func TestParseFormatAndToolResult(t *testing.T) {
	f, ok := render.ParseFormat("", render.Markdown)
	require.True(t, ok)
	require.Equal(t, render.Markdown, f, "no format: the default given")
	f, ok = render.ParseFormat(" Both ", render.Markdown)
	require.True(t, ok)
	require.Equal(t, render.Both, f)
	_, ok = render.ParseFormat("html", render.Markdown)
	require.False(t, ok)

	env := searchEnvelope(1, false)
	env.Metadata.Status = envelope.StatusError
	out, err := render.Render(env, render.View{}, render.JSON)
	require.NoError(t, err)
	res := render.ToolResult(out, env)
	require.True(t, res.IsError)
	require.Equal(t, json.RawMessage(out.JSON), res.StructuredContent)
}

func TestResourceLinks(t *testing.T) {
	view := render.View{Title: "t", Mode: "metadata", Tool: "semantic_search", ChunkLinks: 3}
	for _, f := range render.Formats {
		env := searchEnvelope(5, false)
		out, err := render.Render(env, view, f)
		require.NoError(t, err)
		require.Len(t, out.Links, 3, f)
		n := 0
		for i, l := range out.Links {
			require.Equal(t, fmt.Sprintf("kb://chunks/%d", 1000+i), l.URI)
			b, err := json.Marshal(l)
			require.NoError(t, err)
			require.JSONEq(t, fmt.Sprintf(`{"type":"resource_link","uri":"kb://chunks/%d","name":"chunk %d"}`, 1000+i, 1000+i), string(b),
				"no empty description or mimeType")
			n += tokens.Count(string(b))
		}
		blocks := 0
		for _, b := range out.Blocks {
			blocks += tokens.Count(b)
		}
		require.Equal(t, blocks+n, env.ExecutionContext.TokensUsed, "%s: tokens_used counts the links", f)
		res := render.ToolResult(out, env)
		require.Len(t, res.Content, len(out.Blocks)+3, "links after the text")
	}
	out, err := render.Render(searchEnvelope(5, true), view, render.Markdown)
	require.NoError(t, err)
	require.Empty(t, out.Links, "results that carry their text get no link")
	view.ChunkLinks = 0
	out, err = render.Render(searchEnvelope(5, false), view, render.Markdown)
	require.NoError(t, err)
	require.Empty(t, out.Links)
}

// TestDraftIsEstimateAndRender: the one walk of EstimateDraft gives the
// estimate of Estimate, and RenderDraft from it the answer of Render.
func TestDraftIsEstimateAndRender(t *testing.T) {
	view := render.View{Title: "Results", Mode: "metadata", ChunkLinks: 3}
	for _, n := range []int{0, 1, 10} {
		for _, text := range []bool{false, true} {
			for _, f := range render.Formats {
				t.Run(fmt.Sprintf("%d/%v/%s", n, text, f), func(t *testing.T) {
					env := searchEnvelope(n, text)
					env.ExecutionContext.CacheHit = n == 1
					want := render.Estimate(env, view, f)
					got, d := render.EstimateDraft(env, view, f)
					require.Equal(t, want, got)
					again, _ := render.EstimateDraft(env, view, f)
					require.Equal(t, want, again, "the same answer again, its estimate memoised")
					if text && n > 0 {
						// The same text with another known count is another
						// estimate, not the one memoised.
						r := env.Results[0]
						i := slices.IndexFunc(r, func(f envelope.Field) bool { return f.Key == "chunk_text" })
						body := r[i].Value.(envelope.Text)
						r[i].Value = envelope.Text{S: body.S, Tokens: body.Tokens + 40}
						changed, _ := render.EstimateDraft(env, view, f)
						require.Equal(t, render.Estimate(env, view, f), changed)
						if f != render.JSON {
							require.NotEqual(t, want, changed)
						}
						r[i].Value = body
					}
					wantOut, err := render.Render(env, view, f)
					require.NoError(t, err)
					gotOut, err := render.RenderDraft(env, view, f, d)
					require.NoError(t, err)
					require.Equal(t, wantOut, gotOut)
				})
			}
		}
	}
}

// TestKeptIsRender: a kept answer rendered again with other per-call
// fields (request ids of other lengths and characters, timestamps,
// timings), from what render.Keep kept, has the estimate and the output,
// byte for byte and count for count, of a render from scratch.
func TestKeptIsRender(t *testing.T) {
	view := render.View{Title: "Results", Mode: "metadata", ChunkLinks: 3}
	ids := []string{"", "req_x", "req_00112233aabbccdd", `req "quoted" \ id`, "Ünïcode-ид-🦘", "a,\"results\":1", "7", "req_" + strings.Repeat("9", 40)}
	for _, n := range []int{0, 1, 10} {
		for _, text := range []bool{false, true} {
			for _, f := range []render.Format{render.JSON, render.Both} {
				t.Run(fmt.Sprintf("%d/%v/%s", n, text, f), func(t *testing.T) {
					kept := *searchEnvelope(n, text)
					kept.QueryAnalysis = &envelope.QueryAnalysis{UnmatchedTerms: []string{"walrus"}, Vendors: []string{"Acme Corp"}}
					kept.Metadata.Timestamp, kept.Metadata.RequestID = "", ""
					kept.ExecutionContext = envelope.ExecutionContext{CacheHit: true}
					results, err := envelope.EncodeResults(kept.Results)
					require.NoError(t, err)
					k, err := render.Keep(&kept, view, f, results)
					require.NoError(t, err)
					require.Equal(t, 2, k.FixedParts(), "the spans around the per-call fields are kept")
					for i, id := range ids {
						env := kept
						env.Metadata.Timestamp = fmt.Sprintf("2026-11-%02dT12:%02d:00.%03dZ", 1+i, i*7, i*111)
						env.Metadata.RequestID, env.ExecutionContext.RequestID = id, id
						require.Equal(t, render.Estimate(&env, view, f), k.Estimate(&env), id)
						env.ExecutionContext.TokensEstimated = k.Estimate(&env).Total()
						env.ExecutionContext.ExecutionTimeMS = []float64{0.1, 3, 12, 1234}[i%4]
						env.ExecutionContext.FormattingTimeMS = []float64{0, 0, 15, 0}[i%4]
						fresh, again := env, env
						want, err := render.Render(&fresh, view, f)
						require.NoError(t, err)
						got, err := render.RenderDraft(&again, view, f, k.Draft())
						require.NoError(t, err)
						require.Equal(t, want, got, id)
					}
				})
			}
		}
	}
}
