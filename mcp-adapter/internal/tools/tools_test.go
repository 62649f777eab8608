package tools_test

// Tool tests against the real services (stack_test.go): every tool × mode ×
// format, fields, pagination, warnings, errors, needsInput and resources,
// each answer validated against the tool's output schema (decode).

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/stacktest"

	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/limits"
)

var worstEstimate struct {
	sync.Mutex
	ratio      float64
	used, est  int
	checked    int
	maxPerTool map[string]float64
}

var (
	modes   = []string{"ids_only", "metadata", "preview", "full"}
	formats = []string{"json", "markdown", "both"}
	signalF = []string{"confidence", "ranking"}
)

// checkTokens verifies the token accounting of an answer: tokens_used is
// the exact count of the text blocks, and tokens_estimated is within 10 %.
func checkTokens(t *testing.T, a answer) {
	t.Helper()
	total := 0
	for _, b := range a.blocks {
		total += tokens.Count(b)
	}
	for _, l := range a.links {
		b, err := json.Marshal(render.Link{ResourceLink: l})
		require.NoError(t, err)
		total += tokens.Count(string(b))
	}
	ec := a.execution()
	used := int(ec["tokens_used"].(float64))
	est := int(ec["tokens_estimated"].(float64))
	require.Equal(t, total, used, "tokens_used must be the exact cl100k count of the returned text")
	require.InDelta(t, used, est, 0.10*float64(used), "tokens_estimated %d must be within 10%% of tokens_used %d", est, used)
	r := math.Abs(float64(est-used)) / float64(used)
	worstEstimate.Lock()
	worstEstimate.checked++
	if worstEstimate.maxPerTool == nil {
		worstEstimate.maxPerTool = map[string]float64{}
	}
	op := a.env["_metadata"].(map[string]any)["operation"].(string)
	worstEstimate.maxPerTool[op] = max(worstEstimate.maxPerTool[op], r)
	if r > worstEstimate.ratio {
		worstEstimate.ratio, worstEstimate.used, worstEstimate.est = r, used, est
	}
	worstEstimate.Unlock()
	// token_breakdown is there when the budget shaped the answer.
	if b, ok := ec["token_breakdown"].(map[string]any); ok {
		sum := 0.0
		for _, v := range b {
			sum += v.(float64)
		}
		require.Equal(t, float64(est), sum, "token_breakdown must add up to tokens_estimated")
	}
	require.Equal(t, a.env["_metadata"].(map[string]any)["request_id"], ec["request_id"])
	require.Greater(t, ec["execution_time_ms"].(float64), 0.0)
}

func checkFormat(t *testing.T, a answer, format string) {
	t.Helper()
	switch format {
	case "json":
		require.Len(t, a.blocks, 1)
		require.NotNil(t, a.jsonBlock(), "the json block is the envelope")
		require.Equal(t, a.env, a.jsonBlock(), "the JSON block and structuredContent carry the same envelope")
		require.NotContains(t, a.blocks[0], "\n", "compact JSON")
	case "markdown":
		require.Len(t, a.blocks, 1)
		require.Nil(t, a.jsonBlock())
		require.True(t, strings.HasPrefix(a.blocks[0], "## "), "markdown starts with a heading")
	case "both":
		require.Len(t, a.blocks, 2)
		require.True(t, strings.HasPrefix(a.blocks[0], "## "))
		require.Equal(t, a.env, a.jsonBlock())
	}
}

func TestSemanticSearchModesAndFormats(t *testing.T) {
	h := newReal(t)
	for _, mode := range modes {
		for _, format := range formats {
			for _, size := range []int{1, 5, 10} {
				t.Run(fmt.Sprintf("%s/%s/%d", mode, format, size), func(t *testing.T) {
					a := h.call(tools.ToolSemanticSearch, map[string]any{
						"query": "access reviews for privileged roles", "response_mode": mode, "format": format, "page_size": size,
					})
					require.Equal(t, "success", a.status())
					checkFormat(t, a, format)
					checkTokens(t, a)
					rs := a.results()
					require.Len(t, rs, size)
					want := projection.SearchFields(projection.Mode(mode))
					if mode != "ids_only" {
						want = append(want, signalF...)
					}
					for i, r := range rs {
						require.ElementsMatch(t, present(t, want, r), keysOf(withoutDedup(t, r)), "result %d has exactly the mode's fields", i)
						require.Equal(t, float64(i+1), r["rank"])
						require.Greater(t, r["hybrid_score"].(float64), 0.0)
					}
					switch mode {
					case "preview":
						for _, r := range rs {
							require.LessOrEqual(t, len([]rune(r["chunk_snippet"].(string))), projection.SnippetLength+3)
							require.NotEmpty(t, r["context_header"])
						}
					case "full":
						for _, r := range rs {
							require.NotEmpty(t, r["chunk_text"])
							require.Greater(t, r["chunk_token_count"].(float64), 0.0, "the search service fills chunk_token_count")
							require.Contains(t, []any{"hybrid", "bm25", "vector"}, r["score_type"], "which retrievers returned it")
						}
					}
					if mode != "ids_only" {
						require.True(t, strings.HasSuffix(rs[0]["source_file"].(string), ".md"))
						require.NotEmpty(t, rs[0]["source_category"])
					}
					p := a.pagination()
					require.Equal(t, float64(size), p["page_size"])
					require.Equal(t, float64(len(rs)), p["returned_count"])
					require.True(t, p["has_more"].(bool))
					require.Greater(t, p["total_available"].(float64), 10.0)
					if mode == "ids_only" {
						require.Nil(t, a.env["query_analysis"], "no desktop signals in ids_only")
						require.Nil(t, a.env["_metadata"].(map[string]any)["visual_hints"])
					} else {
						// Page signals at their defaults are left out:
						// what is written says something.
						if qa, ok := a.env["query_analysis"].(map[string]any); ok {
							require.NotEmpty(t, qa["unmatched_terms"])
						}
						if vh, ok := a.env["_metadata"].(map[string]any)["visual_hints"].(map[string]any); ok {
							require.NotEmpty(t, vh)
						}
					}
				})
			}
		}
	}
}

// chunkIDs runs a search and returns the chunk ids of its first page.
func chunkIDs(t *testing.T, h *harness, query string, n int) []any {
	t.Helper()
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": query, "response_mode": "ids_only", "page_size": n})
	require.Equal(t, "success", a.status())
	var ids []any
	for _, r := range a.results() {
		ids = append(ids, r["chunk_id"])
	}
	require.Len(t, ids, n)
	return ids
}

func TestGetChunksModesAndFormats(t *testing.T) {
	h := newReal(t)
	ids := chunkIDs(t, h, "data retention policy", 5)
	for _, mode := range modes {
		for _, format := range formats {
			t.Run(mode+"/"+format, func(t *testing.T) {
				a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": mode, "format": format})
				require.Equal(t, "success", a.status())
				checkFormat(t, a, format)
				checkTokens(t, a)
				rs := a.results()
				require.Len(t, rs, len(ids))
				for i, r := range rs {
					want := projection.ChunkFields(projection.Mode(mode))
					if _, paged := r["page"]; !paged { // only a paged format's chunks have a page
						want = slices.DeleteFunc(slices.Clone(want), func(f string) bool { return f == "page" })
					}
					require.ElementsMatch(t, want, keysOf(r))
					require.Equal(t, ids[i], r["chunk_id"], "chunks come in the order asked")
				}
				require.Nil(t, a.env["pagination"])
			})
		}
	}
}

func TestGetChunksDefaultsToFullAndReportsMissing(t *testing.T) {
	h := newReal(t)
	ids := chunkIDs(t, h, "kafka topic naming", 2)
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{ids[0], 987654321, fmt.Sprint(ids[1]), ids[0]}})
	require.Equal(t, "partial", a.status())
	rs := a.results()
	require.Len(t, rs, 2, "duplicates collapse, missing ids are left out")
	require.Contains(t, rs[0], "chunk_text")
	require.Equal(t, ids[1], rs[1]["chunk_id"], `"123" strings are accepted as ids`)
	require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
	require.Contains(t, a.env["warnings"].([]any)[0].(map[string]any)["message"], "987654321")
	checkTokens(t, a)
}

// TestGetChunksManyMissingFitsTheBudget: an answer with nothing to trim
// (every id unknown) still keeps to the budget: the unknown ids are listed
// up to a bound and counted.
func TestGetChunksManyMissingFitsTheBudget(t *testing.T) {
	h := newReal(t, withConfig("MAX_TOKENS_PER_RESPONSE", "1000"))
	unknown := make([]any, limits.ChunkIDs.Max)
	for i := range unknown {
		unknown[i] = 987_000_000 + i
	}
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": unknown, "format": format})
			checkTokens(t, a)
			require.LessOrEqual(t, int(a.execution()["tokens_used"].(float64)), 1000)
			require.Equal(t, "partial", a.status())
			require.Empty(t, a.results())
			msg := a.env["warnings"].([]any)[0].(map[string]any)["message"].(string)
			require.Equal(t, fmt.Sprintf("Chunks not found: %s and %d more (%d of %d)",
				joinAny(unknown[:tools.MaxListedMissing]), limits.ChunkIDs.Max-tools.MaxListedMissing, limits.ChunkIDs.Max, limits.ChunkIDs.Max), msg)
		})
	}
}

func joinAny(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func TestFindVendorInfoModesAndFormats(t *testing.T) {
	h := newReal(t)
	for _, vendor := range []string{"Globex Corporation", BigVendor} {
		for _, mode := range modes {
			for _, format := range formats {
				t.Run(vendor+"/"+mode+"/"+format, func(t *testing.T) {
					a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": vendor, "response_mode": mode, "format": format})
					checkFormat(t, a, format)
					checkTokens(t, a)
					rs := a.results()
					require.Len(t, rs, 1)
					require.ElementsMatch(t, projection.VendorFields(projection.Mode(mode)), keysOf(rs[0]))
					require.Equal(t, vendor, rs[0]["vendor_name"])
					switch mode {
					case "preview":
						require.Len(t, rs[0]["entities"].([]any), 5)
						require.Len(t, rs[0]["relationships"].([]any), 5)
						require.Nil(t, rs[0]["entities"].([]any)[0].(map[string]any)["snippet"])
					case "full":
						require.LessOrEqual(t, len(rs[0]["entities"].([]any)), 100)
						require.LessOrEqual(t, len(rs[0]["relationships"].([]any)), 500)
						snippets := 0
						for _, e := range rs[0]["entities"].([]any) {
							require.Contains(t, e, "snippet", "full mode lists the snippet (null when the entity has none)")
							if e.(map[string]any)["snippet"] != nil {
								snippets++
							}
						}
						require.Positive(t, snippets)
					case "metadata":
						st := rs[0]["statistics"].(map[string]any)
						require.Greater(t, st["entity_count"].(float64), 5.0)
						require.Len(t, rs[0]["top_entities"].([]any), 5)
						require.NotEmpty(t, rs[0]["last_updated"])
					}
					over := vendor == BigVendor && (mode == "full" || mode == "ids_only")
					if over {
						require.Equal(t, "partial", a.status(), "a graph over the caps is partial")
						require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
						ents := rs[0]["entity_ids"]
						if mode == "full" {
							ents = rs[0]["entities"]
						}
						require.Len(t, ents, 100, "full and ids_only list at most 100 entities")
					} else {
						require.Equal(t, "success", a.status())
					}
					if vendor == BigVendor && mode == "ids_only" {
						// The relationships among the listed entities.
						n := len(rs[0]["relationship_ids"].([]any))
						require.True(t, n > 100 && n <= 500, "%d relationship ids", n)
					}
				})
			}
		}
	}
}

func TestFindVendorInfoWithoutRelationships(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "globex", "response_mode": "preview", "include_relationships": false})
	require.Equal(t, "success", a.status())
	require.Empty(t, a.results()[0]["relationships"])
	require.Equal(t, "Globex Corporation", a.results()[0]["vendor_name"], "names match ignoring case, aliases included")
}

func TestFieldsNarrowAndInvalidFields(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{
		"query": "jwt token validation", "fields": []any{"hybrid_score", "chunk_id", "source_file"},
	})
	require.Equal(t, "success", a.status())
	require.Len(t, a.results(), 10)
	for _, r := range a.results() {
		require.Equal(t, []string{"chunk_id", "hybrid_score", "source_file"}, sorted(keysOf(r)), "fields narrow, signals left out")
	}
	checkTokens(t, a)

	for _, mode := range modes {
		allowed := projection.SearchFields(projection.Mode(mode))
		outside := "chunk_text"
		if mode == "full" {
			outside = "chunk_snippet"
		}
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "jwt token validation", "response_mode": mode, "fields": []any{"chunk_id", outside}})
		require.Equal(t, "error", a.status())
		require.Equal(t, "INVALID_FIELDS", a.errCode())
		require.Equal(t, fmt.Sprintf("Fields ['%s'] not available in '%s' mode", outside, mode), a.errObj()["message"])
		require.ElementsMatch(t, toAny(allowed), a.errObj()["allowed_fields"])
		require.ElementsMatch(t, toAny(allowed), a.errObj()["details"].(map[string]any)["allowed_fields"])
		checkTokens(t, a)
	}

	ids := chunkIDs(t, h, "jwt token validation", 1)
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": "preview", "fields": []any{"chunk_snippet"}})
	require.Equal(t, []string{"chunk_snippet"}, keysOf(a.results()[0]))
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": "ids_only", "fields": []any{"hybrid_score"}})
	require.Equal(t, "INVALID_FIELDS", a.errCode())
	require.Equal(t, []any{"chunk_id"}, a.errObj()["allowed_fields"])
}

func sorted(s []string) []string { sort.Strings(s); return s }

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func TestPaginationReturnsEveryResultOnceInOrder(t *testing.T) {
	h := newReal(t)
	const query = "vendor security questionnaire"
	// The whole ranked list in one direct call to the search service, to
	// compare the pages with.
	var want []int64
	for off := 0; ; off += 50 {
		pg, _, err := h.realClients().SearchPage(context.Background(), query, off, 50, nil)
		require.NoError(t, err)
		for _, hit := range pg.GetResults() {
			want = append(want, hit.GetChunk().GetChunkId())
		}
		if off+50 >= int(pg.GetTotalAvailable()) {
			require.Len(t, want, int(pg.GetTotalAvailable()))
			break
		}
	}
	require.Greater(t, len(want), 50, "enough results for several pages of 50")
	for _, size := range []int{7, 10, 50} {
		for _, mode := range []string{"ids_only", "metadata"} {
			t.Run(fmt.Sprint(mode, "/", size), func(t *testing.T) {
				args := map[string]any{"query": query, "page_size": size, "response_mode": mode}
				var got []int64
				var ranks []int
				pages := 0
				for ; pages < 200; pages++ {
					a := h.call(tools.ToolSemanticSearch, args)
					require.Equal(t, "success", a.status())
					p := a.pagination()
					require.Equal(t, float64(len(want)), p["total_available"])
					for _, r := range a.results() {
						got = append(got, int64(r["chunk_id"].(float64)))
						ranks = append(ranks, int(r["rank"].(float64)))
						require.ElementsMatch(t, keysOf(withoutDedup(t, r)), present(t, append(projection.SearchFields(projection.Mode(mode)), signalFor(mode)...), r), "later pages keep the cursor's mode")
					}
					if !p["has_more"].(bool) {
						require.Nil(t, p["cursor"])
						break
					}
					require.Len(t, a.results(), size, "the cursor keeps the page size")
					// Later pages keep the cursor's mode and page size.
					args = map[string]any{"query": "  " + query + " ", "cursor": p["cursor"]}
				}
				require.Equal(t, want, got, "every result exactly once, in rank order")
				require.True(t, slices.IsSorted(ranks))
				require.Equal(t, 1, ranks[0])
				require.Equal(t, len(want), ranks[len(ranks)-1])
				require.Equal(t, (len(want)+size-1)/size, pages+1)
			})
		}
	}
}

// withoutDedup drops the deduplication block, which only results with near
// duplicates carry (checking it when present).
func withoutDedup(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	d, ok := r["deduplication"].(map[string]any)
	if !ok {
		return r
	}
	require.True(t, d["is_duplicate"].(bool) || len(d["similar_chunk_ids"].([]any)) > 0, "a default deduplication block is left out")
	out := map[string]any{}
	for k, v := range r {
		if k != "deduplication" {
			out[k] = v
		}
	}
	return out
}

func signalFor(mode string) []string {
	if mode == "ids_only" {
		return nil
	}
	return signalF
}

func TestInvalidCursor(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident roles", "page_size": 5})
	cur := a.pagination()["cursor"].(string)
	require.LessOrEqual(t, len(cur), 40, "a compact cursor")
	// The fifth character encodes the offset's bits.
	swap := byte('A')
	if cur[4] == swap {
		swap = 'B'
	}
	tampered := cur[:4] + string(swap) + cur[5:]
	for name, tc := range map[string]struct{ query, cursor string }{
		"malformed":   {"incident roles", "not-a-cursor"},
		"tampered":    {"incident roles", tampered},
		"other query": {"something else entirely", cur},
		"bad tag":     {"incident roles", cur[:len(cur)-4] + "AAAA"},
	} {
		t.Run(name, func(t *testing.T) {
			a := h.call(tools.ToolSemanticSearch, map[string]any{"query": tc.query, "cursor": tc.cursor})
			require.Equal(t, "INVALID_CURSOR", a.errCode())
			require.NotEmpty(t, a.errObj()["suggestion"])
			require.False(t, a.errObj()["retryable"].(bool))
			checkTokens(t, a)
		})
	}
	// Another replica with the same secret accepts the cursor.
	other := newReal(t)
	a = other.call(tools.ToolSemanticSearch, map[string]any{"query": "incident roles", "cursor": cur})
	require.Equal(t, "success", a.status())
	require.Equal(t, 6.0, a.results()[0]["rank"])
}

func TestTokenLimitTrimsPageAndCursorResumes(t *testing.T) {
	h := newReal(t, withConfig("MAX_TOKENS_PER_RESPONSE", "3000"))
	args := map[string]any{"query": "security incident reporting", "response_mode": "full", "page_size": 10}
	a := h.call(tools.ToolSemanticSearch, args)
	require.Equal(t, "partial", a.status())
	require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
	checkTokens(t, a)
	used := int(a.execution()["tokens_used"].(float64))
	require.LessOrEqual(t, used, 3000)
	require.Equal(t, used > 2400, slices.Contains(a.warningCodes(), "TOKEN_LIMIT_WARNING"),
		"TOKEN_LIMIT_WARNING exactly when over 80%% of the limit (%d tokens)", used)
	p := a.pagination()
	kept := len(a.results())
	require.Less(t, kept, 10)
	require.Positive(t, kept)
	require.Equal(t, float64(kept), p["returned_count"])
	require.Equal(t, float64(10), p["page_size"])
	lastRank := a.results()[kept-1]["rank"].(float64)

	next := h.call(tools.ToolSemanticSearch, map[string]any{"query": args["query"], "cursor": p["cursor"]})
	require.Equal(t, lastRank+1, next.results()[0]["rank"], "the cursor resumes at the first omitted result")
}

func TestTokenLimitExceeded(t *testing.T) {
	// The configuration accepts 1,000 tokens at least; one full result of
	// the demo corpus plus the envelope fits in that, so the budget is set
	// directly here, well under that answer (499 tokens in json).
	th := warnings.Defaults
	th.MaxTokens = 450
	h := newRealWithClient(t, nil, nil, []harnessOpt{withThresholds(th)})
	// Sized for the JSON envelope.
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "security incident reporting", "response_mode": "full", "page_size": 3, "format": "json"})
	require.Equal(t, "error", a.status())
	require.Equal(t, "TOKEN_LIMIT_EXCEEDED", a.errCode())
	require.Contains(t, a.warningCodes(), "TOKEN_LIMIT_EXCEEDED")
	sugg := a.errObj()["suggestion"].(string)
	require.Regexp(t, `Use '(ids_only|metadata|preview)' mode`, sugg, "the suggestion names a mode that fits: %s", sugg)
	needed := a.errObj()["details"].(map[string]any)["tokens_needed"].(float64)
	require.Greater(t, needed, 450.0)
	checkTokens(t, a)

	// The mode the suggestion names does fit.
	m := strings.SplitN(strings.SplitN(sugg, "Use '", 2)[1], "'", 2)[0]
	a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "security incident reporting", "response_mode": m, "page_size": 3})
	require.Contains(t, []string{"success", "partial"}, a.status(), "mode %s: %v", m, a.env["error"])

	// get_chunks: the longest chunk of a page in full mode.
	pg, _, err := h.realClients().SearchPage(context.Background(), "security incident reporting", 0, 20, nil)
	require.NoError(t, err)
	longest := pg.GetResults()[0].GetChunk()
	for _, hit := range pg.GetResults() {
		if hit.GetChunk().GetChunkTokenCount() > longest.GetChunkTokenCount() {
			longest = hit.GetChunk()
		}
	}
	require.Greater(t, longest.GetChunkTokenCount(), int32(300), "with the envelope, more than the 450-token budget")
	ids := []any{longest.GetChunkId()}
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids})
	require.Equal(t, "TOKEN_LIMIT_EXCEEDED", a.errCode())
	require.Contains(t, a.errObj()["suggestion"], "'preview' mode")
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": "preview"})
	require.Equal(t, "success", a.status())
}

func TestVendorTrimmedToBudget(t *testing.T) {
	h := newReal(t, withConfig("MAX_TOKENS_PER_RESPONSE", "4000"))
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": BigVendor, "response_mode": "full", "format": "both"})
	require.Equal(t, "partial", a.status())
	require.LessOrEqual(t, int(a.execution()["tokens_used"].(float64)), 4000)
	checkTokens(t, a)
	r := a.results()[0]
	require.Less(t, len(r["relationships"].([]any)), 500)
	require.Equal(t, float64(bigRelationships), r["statistics"].(map[string]any)["relationship_count"], "statistics count the whole neighbourhood")
}

func TestWarnings(t *testing.T) {
	t.Run("deprecated top_k", func(t *testing.T) {
		h := newReal(t)
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "data retention", "top_k": 3, "page_size": 4})
		require.Contains(t, a.warningCodes(), "DEPRECATED_PARAMETER")
		require.Len(t, a.results(), 4, "page_size wins")
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "data retention", "top_k": 3})
		require.NotContains(t, a.warningCodes(), "DEPRECATED_PARAMETER")
		require.Len(t, a.results(), 3)
	})
	t.Run("low quality", func(t *testing.T) {
		h := newReal(t)
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "qqxv zzkj"})
		require.Contains(t, a.warningCodes(), "LOW_QUALITY_RESULTS", "no result at all")
		require.Empty(t, a.results())
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "response_mode": "ids_only"})
		require.NotContains(t, a.warningCodes(), "LOW_QUALITY_RESULTS")

		// Results, but no real match: the top hit is a keyword match on one
		// term of four with no semantic similarity.
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "quantum chromodynamics of medieval pottery", "response_mode": "full"})
		require.NotEmpty(t, a.results())
		require.Contains(t, a.warningCodes(), "LOW_QUALITY_RESULTS", "weak top result on a first page")

		// Later pages of a good query never warn, although their rank-based
		// hybrid scores are all low.
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "response_mode": "ids_only", "page_size": 5})
		require.NotContains(t, a.warningCodes(), "LOW_QUALITY_RESULTS")
		for page := 2; page <= 3; page++ {
			cur, ok := a.pagination()["cursor"].(string)
			require.True(t, ok, "page %d has a cursor", page)
			a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "cursor": cur})
			require.NotEmpty(t, a.results(), "page %d", page)
			require.NotContains(t, a.warningCodes(), "LOW_QUALITY_RESULTS", "page %d", page)
		}
		for _, r := range a.results() {
			require.Less(t, r["hybrid_score"].(float64), 0.5, "page 3 has only low rank-based scores")
		}

		// LOW_QUALITY_THRESHOLD=1: the similarity is always below 1, so the
		// warning follows the query-term coverage of the top result.
		h = newReal(t, withConfig("LOW_QUALITY_THRESHOLD", "1"))
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "response_mode": "ids_only"})
		require.NotContains(t, a.warningCodes(), "LOW_QUALITY_RESULTS", "every term matched")
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity penguins", "response_mode": "ids_only"})
		require.Contains(t, a.warningCodes(), "LOW_QUALITY_RESULTS", "one term unmatched")
	})
	t.Run("cache miss slow", func(t *testing.T) {
		// 0 disables the warning, so the smallest positive threshold makes
		// every cache miss "slow".
		h := newReal(t, withConfig("CACHE_MISS_SLOW_THRESHOLD", "1ns"))
		q := fmt.Sprintf("warehouse modelling %d", time.Now().UnixNano())
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": q})
		require.Contains(t, a.warningCodes(), "CACHE_MISS_SLOW")
		require.False(t, a.execution()["cache_hit"].(bool))
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": q})
		require.NotContains(t, a.warningCodes(), "CACHE_MISS_SLOW")
		require.True(t, a.execution()["cache_hit"].(bool), "the search service's cache serves the repeat")
		require.NotContains(t, a.execution(), "database_time_ms", "no database read, no database time")
		// A threshold no miss reaches, however loaded the machine: no warning.
		h = newReal(t, withConfig("CACHE_MISS_SLOW_THRESHOLD", "1m"))
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": q + " again"})
		require.False(t, a.execution()["cache_hit"].(bool))
		require.NotContains(t, a.warningCodes(), "CACHE_MISS_SLOW", "a miss under the threshold is not slow")
	})
	t.Run("rate limiter degraded", func(t *testing.T) {
		h := newReal(t, withAddr(stacktest.Auth, degradedAuthAddr(t)))
		ids := chunkIDs(t, h, "backups", 1)
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{tools.ToolSemanticSearch, map[string]any{"query": "backups"}},
			{tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"}},
			{tools.ToolGetChunks, map[string]any{"chunk_ids": ids}},
		} {
			a := h.call(tc.tool, tc.args)
			require.Equal(t, "success", a.status(), tc.tool)
			require.Contains(t, a.warningCodes(), "RATE_LIMITER_DEGRADED", tc.tool)
			checkTokens(t, a)
		}
	})
	t.Run("token limit warning", func(t *testing.T) {
		h := newReal(t, withConfig("MAX_TOKENS_PER_RESPONSE", "3000"))
		seen := map[bool]bool{}
		for _, size := range []int{2, 5, 15} {
			a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident review", "response_mode": "preview", "page_size": size, "format": "json"})
			used := a.execution()["tokens_used"].(float64)
			over := used > 2400
			seen[over] = true
			require.Equal(t, over, slices.Contains(a.warningCodes(), "TOKEN_LIMIT_WARNING"), "%d results, %v tokens", size, used)
			checkTokens(t, a)
		}
		require.True(t, seen[true] && seen[false], "page sizes on both sides of the threshold")
	})
}

func TestErrorCodes(t *testing.T) {
	s := demoStack(t)
	revoked := s.CreateKey(t, stacktest.Key{Name: "mcp-revoked"})
	s.RevokeKey(t, revoked)
	long := strings.Repeat("a", 501)
	probe := newReal(t)
	ids := chunkIDs(t, probe, "jwt", 1)
	cases := []struct {
		name, key, tool, code string
		args                  map[string]any
		check                 func(t *testing.T, a answer)
	}{
		{name: "auth required", key: "-", tool: tools.ToolSemanticSearch, code: "AUTH_REQUIRED", args: map[string]any{"query": "x"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Authentication required. API key must be provided.", a.errObj()["message"])
			}},
		{name: "auth invalid", key: "bmcis_aaaaaaaaaaaaaaaa_" + strings.Repeat("b", 52), tool: tools.ToolFindVendorInfo, code: "AUTH_INVALID", args: map[string]any{"vendor_name": "Globex"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid API key. Please check your credentials.", a.errObj()["message"])
				require.Equal(t, "AUTH_INVALID", a.errObj()["details"].(map[string]any)["reason"])
				require.Equal(t, "Verify the API key with your BMCIS administrator, or request a new one.", a.errObj()["suggestion"])
			}},
		{name: "malformed key", key: "not-a-key", tool: tools.ToolGetChunks, code: "AUTH_INVALID", args: map[string]any{"chunk_ids": ids}},
		{name: "auth revoked", key: revoked, tool: tools.ToolGetChunks, code: "AUTH_INVALID", args: map[string]any{"chunk_ids": ids},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "AUTH_REVOKED", a.errObj()["details"].(map[string]any)["reason"])
				require.Equal(t, "Invalid API key. Please check your credentials.", a.errObj()["message"], "the contract's message")
				require.Equal(t, "This API key has been revoked and cannot be used again; ask your BMCIS administrator for a new key.", a.errObj()["suggestion"])
				if a.blocks[0][0] != '{' {
					require.Contains(t, a.blocks[0], "Suggestion: This API key has been revoked", "the markdown says so")
				}
				for _, b := range a.blocks {
					require.NotContains(t, b, "chunk_text", "no backend data in a denied answer")
				}
			}},
		{name: "vendor not found", tool: tools.ToolFindVendorInfo, code: "VENDOR_NOT_FOUND", args: map[string]any{"vendor_name": "Globx"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Vendor 'Globx' not found. Try using semantic_search first to find exact vendor names.", a.errObj()["message"])
				// The graph's nearest name first; then at most 3 vendors the
				// chunks that best match the name mention (the misspelling
				// shares its character n-grams with "Globex", so the search
				// finds the uptime review that names it and its peers).
				sugg := a.errObj()["suggestions"].([]any)
				require.Equal(t, "Globex Corporation", sugg[0])
				require.LessOrEqual(t, len(sugg), 4)
				ni := a.env["needs_input"].(map[string]any)
				require.Equal(t, "needsInput:v1", ni["kind"])
				require.Equal(t, sugg, ni["needsInput"].(map[string]any)["suggestions"].(map[string]any)["vendor_name"])
			}},
		{name: "vendor ambiguous", tool: tools.ToolFindVendorInfo, code: "VENDOR_AMBIGUOUS", args: map[string]any{"vendor_name": "Acme"},
			check: func(t *testing.T, a answer) {
				require.True(t, strings.HasPrefix(a.errObj()["message"].(string), "Ambiguous vendor name. Multiple matches found: ['"))
				require.ElementsMatch(t, []any{"Acme Corp", "ACME Inc", "Acme Ltd"}, a.errObj()["suggestions"])
				ni := a.env["needs_input"].(map[string]any)
				require.Len(t, ni["options"], 3)
				require.Equal(t, "vendor_name", ni["options"].([]any)[0].(map[string]any)["field"])
			}},
		{name: "query too long", tool: tools.ToolSemanticSearch, code: "QUERY_TOO_LONG", args: map[string]any{"query": long},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid request parameters: query exceeds 500 characters", a.errObj()["message"])
			}},
		{name: "page size", tool: tools.ToolSemanticSearch, code: "INVALID_PARAMS", args: map[string]any{"query": "x", "top_k": 51},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid request parameters: top_k must be between 1 and 50", a.errObj()["message"])
			}},
		{name: "unknown param", tool: tools.ToolSemanticSearch, code: "INVALID_PARAMS", args: map[string]any{"query": "x", "mode": "full"}},
		{name: "bad mode", tool: tools.ToolFindVendorInfo, code: "INVALID_PARAMS", args: map[string]any{"vendor_name": "x", "response_mode": "everything"}},
		{name: "bad format", tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": ids, "format": "html"}},
		{name: "too many ids", tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": manyIDs(101)}},
		{name: "far too many ids", tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": manyIDs(140_000)},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid request parameters: chunk_ids must hold 1 to 100 ids (got 140000)", a.errObj()["message"])
			}},
		{name: "negative id", tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": []any{-3}}},
		{name: "vendor name too long", tool: tools.ToolFindVendorInfo, code: "INVALID_PARAMS", args: map[string]any{"vendor_name": strings.Repeat("v", 201)}},
		{name: "invalid fields", tool: tools.ToolSemanticSearch, code: "INVALID_FIELDS", args: map[string]any{"query": "x", "response_mode": "ids_only", "fields": []any{"source_file"}}},
		{name: "invalid cursor", tool: tools.ToolSemanticSearch, code: "INVALID_CURSOR", args: map[string]any{"query": "x", "cursor": "abc.def"}},
		{name: "too many fields", tool: tools.ToolSemanticSearch, code: "INVALID_PARAMS", args: map[string]any{"query": "x", "fields": manyNames(60_000)},
			check: func(t *testing.T, a answer) {
				require.Equal(t, fmt.Sprintf("Invalid request parameters: fields must hold at most %d names (got 60000)", projection.MaxRequestedFields), a.errObj()["message"])
			}},
		{name: "too many fields, no key", key: "-", tool: tools.ToolGetChunks, code: "AUTH_REQUIRED", args: map[string]any{"chunk_ids": ids, "fields": manyNames(60_000)}},
		{name: "many invalid fields", tool: tools.ToolGetChunks, code: "INVALID_FIELDS", args: map[string]any{"chunk_ids": ids, "fields": manyNames(projection.MaxRequestedFields)},
			check: func(t *testing.T, a answer) {
				require.Equal(t, fmt.Sprintf("Fields ['field0', 'field1', 'field2', 'field3', 'field4'] and %d more not available in 'full' mode", projection.MaxRequestedFields-5), a.errObj()["message"])
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			switch tc.key {
			case "":
				h = probe
			case "-":
				h = newRealWithClient(t, nil, nil, []harnessOpt{withKey("")})
			default:
				h = newRealWithClient(t, nil, nil, []harnessOpt{withKey(tc.key)})
			}
			for _, format := range formats {
				args := map[string]any{}
				for k, v := range tc.args {
					args[k] = v
				}
				if tc.name != "bad format" {
					args["format"] = format
				}
				a := h.call(tc.tool, args)
				require.Equal(t, "error", a.status())
				require.True(t, a.res.IsError)
				require.Equal(t, tc.code, a.errCode())
				require.Empty(t, a.results())
				require.NotEmpty(t, a.env["_metadata"].(map[string]any)["message"])
				checkTokens(t, a)
				if format != "json" {
					require.Contains(t, a.blocks[0], tc.code, "the markdown names the code")
				}
				if tc.check != nil {
					tc.check(t, a)
				}
			}
		})
	}
}

// manyNames are n distinct field names no mode has.
func manyNames(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("field%d", i)
	}
	return out
}

func manyIDs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = 1001 + i
	}
	return out
}

// A key limited to 2 calls a minute: the third call answers RATE_LIMIT with
// what the auth service reports.
func TestRateLimit(t *testing.T) {
	s := demoStack(t)
	key := s.CreateKey(t, stacktest.Key{Name: "mcp-limited", PerMinute: 2, PerHour: 100, PerDay: 1000})
	h := newRealWithClient(t, nil, nil, []harnessOpt{withKey(key)})
	for i := 0; i < 2; i++ {
		a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Initech"})
		require.Equal(t, "success", a.status(), "call %d is within the limit", i+1)
	}
	for _, tool := range []string{tools.ToolSemanticSearch, tools.ToolGetChunks} {
		args := map[string]any{"query": "x"}
		if tool == tools.ToolGetChunks {
			args = map[string]any{"chunk_ids": []any{1}}
		}
		a := h.call(tool, args)
		require.Equal(t, "RATE_LIMIT", a.errCode())
		e := a.errObj()
		require.Equal(t, "Rate limit exceeded", e["message"])
		rem := e["remaining"].(map[string]any)
		require.Equal(t, 0.0, rem["minute"])
		require.Equal(t, 98.0, rem["hour"])
		require.Equal(t, 998.0, rem["day"])
		reset := e["reset_in_seconds"].(float64)
		require.True(t, reset >= 1 && reset <= 60, "reset in %v s", reset)
		require.True(t, e["retryable"].(bool))
		require.Contains(t, e["suggestion"], "Wait ")
		checkTokens(t, a)
	}
}

// A stopped vendorgraph makes find_vendor_info answer SERVICE_UNAVAILABLE
// within its deadline while the other tools keep working; it recovers when
// the service is back.
func TestBackendDownOnlyAffectsItsTools(t *testing.T) {
	s := demoStack(t)
	vg := s.StartService(t, stacktest.VendorGraph, nil)
	h := newReal(t, withAddr(stacktest.VendorGraph, vg.Addr()), withConfig("BMCIS_VENDORGRAPH_TIMEOUT", "2s"))
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Hooli"})
	require.Equal(t, "success", a.status())

	vg.Stop(t)
	start := time.Now()
	a = h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Initech"})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode())
	require.True(t, a.errObj()["retryable"].(bool))
	require.Equal(t, "The vendorgraph service is unavailable: it cannot be reached", a.errObj()["message"])
	// Bounded by its 2 s deadline, not hanging: five times that is room for
	// a loaded machine.
	require.Less(t, time.Since(start), 10*time.Second, "answers within the deadline")
	checkTokens(t, a)
	a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	require.Equal(t, "success", a.status())
	ids := chunkIDs(t, h, "backups", 1)
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids})
	require.Equal(t, "success", a.status())

	vg.Restart(t)
	waitFor(t, 15*time.Second, func() bool {
		return h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Initech"}).status() == "success"
	}, "find_vendor_info recovers once vendorgraph is back")
}

func TestAuthDownFailsClosed(t *testing.T) {
	h := newReal(t, withAddr(stacktest.Auth, deadAddr(t)), withConfig("BMCIS_AUTH_TIMEOUT", "1s"))
	start := time.Now()
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode())
	require.True(t, a.errObj()["retryable"].(bool))
	require.Contains(t, a.errObj()["message"], "The auth service is unavailable")
	require.Empty(t, a.results(), "nothing is returned unless auth allowed the call")
	// Bounded by the 1 s auth deadline, not hanging: ten times that is room
	// for a loaded machine.
	require.Less(t, time.Since(start), 10*time.Second)
}

// Permanent misconfigurations are not retryable: a search address that
// points at another service (UNIMPLEMENTED) and a wrong service token
// (UNAUTHENTICATED).
func TestMisconfiguredBackends(t *testing.T) {
	s := demoStack(t)
	h := newReal(t, withAddr(stacktest.Search, s.Addr(stacktest.VendorGraph)))
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1}})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode())
	require.False(t, a.errObj()["retryable"].(bool))
	require.Contains(t, a.errObj()["message"], "not implemented")

	h = newReal(t, withServiceToken("not-the-service-token-0000-0123456789abcdef"))
	a = h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Hooli"})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode(), "auth refuses the adapter itself")
	require.Contains(t, a.errObj()["message"], "auth")
}

// The search and vendorgraph services on a database of their own, which the
// test then takes away (DB_CONNECTION) and breaks (SEARCH_FAILED). Auth is
// the demo stack's, on another database, so only those two tools fail.
func TestDatabaseFailures(t *testing.T) {
	demo := demoStack(t)
	// No cache and no vector mirror: every search's vector side goes to
	// PostgreSQL. (The mirror answers from memory until the change feed's
	// listener hears the cut, milliseconds after it.)
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search, stacktest.VendorGraph},
		Env: map[string]string{"BMCIS_SEARCH_CACHE_SIZE": "0", "BMCIS_SEARCH_VECTOR_MIRROR_MB": "0"}})
	s.IngestDemoDocs(t) // enough chunks for the builtin embedder: vector queries go to PostgreSQL
	s.ImportGraphLines(t, []string{`{"kind":"entity","id":"v1","name":"Vendor One","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`})
	h := newReal(t, withAddr(stacktest.Search, s.Addr(stacktest.Search)), withAddr(stacktest.VendorGraph, s.Addr(stacktest.VendorGraph)),
		withAddr(stacktest.Auth, demo.Addr(stacktest.Auth)))
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	require.Equal(t, "success", a.status())

	// The search service keeps its chunks in memory: a chunk id it does not
	// hold is looked up in PostgreSQL.
	const unknown = 987654321
	restore := s.CutDatabase(t)
	for _, tc := range []struct {
		tool, message string
		args          map[string]any
	}{
		{tools.ToolSemanticSearch, "Search failed: Database connection error", map[string]any{"query": "restore drills quarterly"}},
		{tools.ToolGetChunks, "Search failed: Database connection error", map[string]any{"chunk_ids": []any{unknown}}},
		{tools.ToolFindVendorInfo, "Vendor info retrieval failed: Database connection error", map[string]any{"vendor_name": "Vendor One"}},
	} {
		a := h.call(tc.tool, tc.args)
		require.Equal(t, "DB_CONNECTION", a.errCode(), "%s: %v", tc.tool, a.env["error"])
		require.True(t, a.errObj()["retryable"].(bool))
		require.Equal(t, tc.message, a.errObj()["message"])
		checkTokens(t, a)
	}
	restore()
	waitFor(t, 20*time.Second, func() bool {
		return h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{unknown}}).status() == "partial"
	}, "the services reconnect once the database is back")

	// A schema the search service does not expect fails inside it: an
	// internal error, reported as SEARCH_FAILED with its request id.
	s.Exec(t, "ALTER TABLE chunks RENAME TO chunks_moved")
	defer s.Exec(t, "ALTER TABLE chunks_moved RENAME TO chunks")
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{unknown}})
	require.Equal(t, "SEARCH_FAILED", a.errCode(), "%v", a.env["error"])
	require.True(t, a.errObj()["retryable"].(bool))
	require.Regexp(t, `^Search failed: internal error \(request id req_[0-9a-f]+\)$`, a.errObj()["message"])
	require.Equal(t, "Internal", a.errObj()["details"].(map[string]any)["grpc_code"])
	checkTokens(t, a)
}

func TestRequestIDPropagates(t *testing.T) {
	h := newReal(t)
	ids := chunkIDs(t, h, "sso", 1)
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids})
	id := a.env["_metadata"].(map[string]any)["request_id"].(string)
	require.True(t, strings.HasPrefix(id, "req_"))
	// The services log every RPC with the caller's request id.
	for _, svc := range []string{stacktest.Search, stacktest.Auth} {
		h.stack.Service(svc).WaitLog(t, `"request_id":"`+id+`"`, 5*time.Second)
	}
	ts := a.env["_metadata"].(map[string]any)["timestamp"].(string)
	_, err := time.Parse(time.RFC3339, ts)
	require.NoError(t, err)
}

func TestEmptyQueryNeedsInput(t *testing.T) {
	h := newReal(t)
	for _, format := range formats {
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "  ", "format": format})
		require.Equal(t, "INVALID_PARAMS", a.errCode())
		ni := a.env["needs_input"].(map[string]any)
		require.Equal(t, "needsInput:v1", ni["kind"])
		require.Equal(t, "elicitation", ni["type"])
		require.Equal(t, []any{"query"}, ni["needsInput"].(map[string]any)["fields"])
		var values []string
		for _, o := range ni["options"].([]any) {
			values = append(values, o.(map[string]any)["label"].(string))
		}
		require.Len(t, values, 5, "the five indexed categories become suggestions: %v", values)
		checkTokens(t, a)
		if format != "json" {
			require.Contains(t, a.blocks[0], "Input needed")
		}
	}
}

func TestToolsListing(t *testing.T) {
	h := newReal(t)
	res, err := h.cli.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	require.Len(t, res.Tools, 3)
	for _, tool := range res.Tools {
		a := tool.Annotations
		require.True(t, *a.ReadOnlyHint, tool.Name)
		require.False(t, *a.DestructiveHint, tool.Name)
		require.True(t, *a.IdempotentHint, tool.Name)
		require.False(t, *a.OpenWorldHint, tool.Name)
		first := strings.SplitN(tool.Description, ". ", 2)[0]
		require.True(t, strings.HasPrefix(first, "Use this "), "first sentence says when to use %s", tool.Name)
		require.Equal(t, "object", tool.OutputSchema.Type, tool.Name)
		require.Contains(t, tool.OutputSchema.Properties, "_metadata", tool.Name)
	}
	tmpl, err := h.cli.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	var uris []string
	for _, rt := range tmpl.ResourceTemplates {
		uris = append(uris, rt.URITemplate.Raw())
	}
	require.ElementsMatch(t, []string{tools.ChunkURITemplate, tools.VendorURITemplate}, uris)
}

func TestResources(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "oauth2 authorization code flow", "response_mode": "preview", "page_size": 1})
	top := a.results()[0]
	id := int64(top["chunk_id"].(float64))
	for _, tc := range []struct {
		uri, want string
	}{
		{fmt.Sprintf("kb://chunks/%d", id), top["context_header"].(string)},
		{"kb://vendors/Globex%20Corporation", "Globex Corporation"},
		{"kb://vendors/Acme%20Corp", "Acme Cloud Platform"},
	} {
		res, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: tc.uri}})
		require.NoError(t, err, tc.uri)
		require.Len(t, res.Contents, 2)
		md := res.Contents[0].(mcp.TextResourceContents)
		js := res.Contents[1].(mcp.TextResourceContents)
		require.Equal(t, "text/markdown", md.MIMEType)
		require.Equal(t, "application/json", js.MIMEType)
		require.Contains(t, md.Text, tc.want)
		require.Contains(t, js.Text, `"_metadata"`)
		require.Contains(t, js.Text, `"status":"success"`)
	}
	for uri, code := range map[string]string{"kb://vendors/acme": "VENDOR_AMBIGUOUS", "kb://chunks/0": "INVALID_PARAMS"} {
		res, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		require.NoError(t, err)
		require.Contains(t, res.Contents[len(res.Contents)-1].(mcp.TextResourceContents).Text, code)
	}
	res, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "kb://chunks/987654321"}})
	require.NoError(t, err)
	require.Contains(t, res.Contents[len(res.Contents)-1].(mcp.TextResourceContents).Text, "PARTIAL_RESULTS")
}

// The search service returns what the desktop signals are computed from:
// retriever ranks, token counts, dates, duplicate links and query terms.
func TestRealSearchFillsTheSignalInputs(t *testing.T) {
	h := newReal(t)
	pg, _, err := h.realClients().SearchPage(context.Background(), "reporting a security incident", 0, 50, nil)
	require.NoError(t, err)
	require.Len(t, pg.GetResults(), 50)
	require.ElementsMatch(t, []string{"reporting", "security", "incident"}, pg.GetQueryTerms())
	both, dups := 0, 0
	for _, hit := range pg.GetResults() {
		c := hit.GetChunk()
		require.Positive(t, c.GetChunkTokenCount(), "chunk_token_count")
		require.Equal(t, int(c.GetChunkTokenCount()), tokens.Count(c.GetChunkText()), "chunk_token_count is the cl100k count of the text")
		require.NotNil(t, c.GetUpdatedAt(), "updated_at from the front matter")
		updated := c.GetUpdatedAt().AsTime()
		require.True(t, updated.Year() >= 2024 && updated.Before(time.Now()), "updated_at %s", updated)
		bm25, vector := hit.GetBm25Rank() > 0, hit.GetVectorRank() > 0
		require.True(t, bm25 || vector, "at least one retriever ranked chunk %d", c.GetChunkId())
		if bm25 && vector {
			both++
		}
		if hit.GetIsDuplicate() {
			dups++
			require.NotEmpty(t, hit.GetSimilarChunkIds())
		}
		want := map[[2]bool]searchv1.RetrievalMode{{true, true}: searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
			{true, false}: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, {false, true}: searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR}[[2]bool{bm25, vector}]
		require.Equal(t, want, hit.GetScoreType(), "score_type names the retrievers that returned the chunk")
	}
	require.Greater(t, both, 10, "both retrievers agree on many results")
	require.Positive(t, dups, "the copied section is flagged as a duplicate")
}

func TestSignalsAreDerivedFromRetrievers(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident commander bridge status update", "page_size": 20, "response_mode": "preview"})
	require.Len(t, a.results(), 20, "a full page to check")
	// Full mode carries each result's score_type, which ranking.score_method
	// must repeat.
	full := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident commander bridge status update", "page_size": 20, "response_mode": "full"})
	scoreType := map[any]any{}
	for _, r := range full.results() {
		scoreType[r["chunk_id"]] = r["score_type"]
	}
	for _, r := range a.results() {
		c := r["confidence"].(map[string]any)
		for _, k := range []string{"score_reliability", "source_quality", "recency", "overall"} {
			v := c[k].(float64)
			require.True(t, v >= 0 && v <= 1, "%s in 0..1", k)
		}
		require.Less(t, c["recency"].(float64), 1.0, "dated documents age")
		rk := r["ranking"].(map[string]any)
		require.Contains(t, []any{"hybrid", "bm25", "vector"}, rk["score_method"])
		require.Equal(t, scoreType[r["chunk_id"]], rk["score_method"], "ranking.score_method is the result's score_type")
		require.NotEmpty(t, rk["explanation"])
		weights := map[string]float64{"security": 0.9, "authentication": 0.9, "cloud-providers": 0.85, "data-platforms": 0.85, "vendor-management": 0.85}
		require.Equal(t, weights[r["source_category"].(string)], c["source_quality"], "category weights from the configuration")
	}
	prev := math.Inf(1)
	for _, r := range a.results() {
		p := r["ranking"].(map[string]any)["percentile"].(float64)
		require.LessOrEqual(t, p, prev, "percentiles fall with rank")
		prev = p
	}
	require.Nil(t, a.env["query_analysis"], "every query term matched: the default is left out")
	a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident zyxqwv", "page_size": 5, "response_mode": "metadata"})
	qa := a.env["query_analysis"].(map[string]any)
	require.Equal(t, map[string]any{"unmatched_terms": []any{"zyxqwv"}}, qa, "only what the query alone does not tell")
	require.Contains(t, a.blocks[0], "Terms not found on this page: zyxqwv")
}

func TestDuplicatesAreFlagged(t *testing.T) {
	h := newReal(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "reporting a security incident", "page_size": 10, "response_mode": "preview"})
	found := false
	for _, r := range a.results() {
		d, ok := r["deduplication"].(map[string]any)
		if ok && d["is_duplicate"].(bool) {
			found = true
			require.NotEmpty(t, d["similar_chunk_ids"])
			require.Equal(t, 1.0, d["confidence"], "the section copied word for word compares as identical")
		}
	}
	require.True(t, found, "the copy of 'Reporting a security incident' is flagged as a duplicate")
	// The results say it: no visual hint repeats it.
	vh, _ := a.env["_metadata"].(map[string]any)["visual_hints"].(map[string]any)
	require.NotContains(t, vh, "collapse_duplicates")
}

func TestDesktopEnhancementsOff(t *testing.T) {
	h := newReal(t, withConfig("ENABLE_DESKTOP_ENHANCEMENTS", "false"))
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "jwt", "response_mode": "preview"})
	require.ElementsMatch(t, present(t, projection.SearchFields(projection.Preview), a.results()[0]), keysOf(a.results()[0]))
	require.Nil(t, a.env["query_analysis"])
	require.Nil(t, a.env["_metadata"].(map[string]any)["visual_hints"])
	checkTokens(t, a)
}

// tokens_estimated stays within 10 % of tokens_used on the real corpus for
// every tool, mode, format and size (checkTokens requires it of each
// answer); this sweep covers the sizes and reports the worst case.
func TestTokenEstimateAcrossModesAndSizes(t *testing.T) {
	h := newReal(t, withConfig("MAX_TOKENS_PER_RESPONSE", "100000"))
	var calls atomic.Int32
	for _, q := range []string{"how do we rotate api keys", "aws landing zone account structure", "dbt model naming conventions"} {
		for _, mode := range modes {
			for _, size := range []int{1, 3, 10, 25, 50} {
				for _, format := range formats {
					a := h.call(tools.ToolSemanticSearch, map[string]any{"query": q, "response_mode": mode, "page_size": size, "format": format})
					require.Equal(t, "success", a.status())
					checkTokens(t, a)
					calls.Add(1)
				}
			}
		}
	}
	ids := chunkIDs(t, h, "security", 50)
	for _, n := range []int{1, 5, 20, 50} {
		for _, mode := range modes {
			for _, format := range formats {
				a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids[:n], "response_mode": mode, "format": format})
				require.Equal(t, "success", a.status())
				checkTokens(t, a)
				calls.Add(1)
			}
		}
	}
	for _, v := range []string{"Hooli", "Acme Corp", BigVendor} {
		for _, mode := range modes {
			for _, format := range formats {
				a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": v, "response_mode": mode, "format": format})
				checkTokens(t, a)
				calls.Add(1)
			}
		}
	}
	worstEstimate.Lock()
	defer worstEstimate.Unlock()
	t.Logf("%d answers in this sweep, %d checked in the package so far; worst estimate error %.1f %% (%d estimated, %d used); per tool %v",
		calls.Load(), worstEstimate.checked, 100*worstEstimate.ratio, worstEstimate.est, worstEstimate.used, worstEstimate.maxPerTool)
}
