package tools_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tokens"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

var worstEstimate atomic.Value

func init() { worstEstimate.Store(0.0) }

var (
	modes   = []string{"ids_only", "metadata", "preview", "full"}
	formats = []string{"json", "markdown", "both"}
	signalF = []string{"confidence", "ranking", "deduplication"}
)

// checkTokens verifies the token accounting of an answer: tokens_used is
// the exact count of the text blocks, and tokens_estimated is within 10 %.
func checkTokens(t *testing.T, a answer) {
	t.Helper()
	total := 0
	for _, b := range a.blocks {
		total += tokens.Count(b)
	}
	ec := a.execution()
	used := int(ec["tokens_used"].(float64))
	est := int(ec["tokens_estimated"].(float64))
	require.Equal(t, total, used, "tokens_used must be the exact cl100k count of the returned text")
	require.InDelta(t, used, est, 0.10*float64(used), "tokens_estimated %d must be within 10%% of tokens_used %d", est, used)
	if r := math.Abs(float64(est-used)) / float64(used); r > worstEstimate.Load().(float64) {
		worstEstimate.Store(r)
		t.Logf("worst estimate so far: %.3f (%d vs %d)", r, est, used)
	}
	b := ec["token_breakdown"].(map[string]any)
	sum := 0.0
	for _, v := range b {
		sum += v.(float64)
	}
	require.Equal(t, float64(est), sum, "token_breakdown must add up to tokens_estimated")
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
	h := newHarness(t)
	for _, mode := range modes {
		for _, format := range formats {
			for _, size := range []int{1, 5, 10} {
				t.Run(fmt.Sprintf("%s/%s/%d", mode, format, size), func(t *testing.T) {
					a := h.call(tools.ToolSemanticSearch, map[string]any{
						"query": "access reviews for privileged roles", "response_mode": mode, "format": format, "page_size": size,
					})
					require.Contains(t, []string{"success", "partial"}, a.status())
					checkFormat(t, a, format)
					checkTokens(t, a)
					rs := a.results()
					require.NotEmpty(t, rs)
					want := projection.SearchFields(projection.Mode(mode))
					if mode != "ids_only" {
						want = append(want, signalF...)
					}
					for i, r := range rs {
						require.ElementsMatch(t, want, keysOf(r), "result %d has exactly the mode's fields", i)
					}
					if mode == "preview" {
						for _, r := range rs {
							require.LessOrEqual(t, len([]rune(r["chunk_snippet"].(string))), projection.SnippetLength+3)
						}
					}
					p := a.pagination()
					require.NotNil(t, p)
					require.Equal(t, float64(size), p["page_size"])
					require.Equal(t, float64(len(rs)), p["returned_count"])
					require.NotNil(t, a.env["query_analysis"])
					require.NotNil(t, a.env["_metadata"].(map[string]any)["visual_hints"])
				})
			}
		}
	}
}

func TestGetChunksModesAndFormats(t *testing.T) {
	h := newHarness(t)
	ids := []any{1001, 1002, 1003, 1010, 1020}
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
					require.ElementsMatch(t, projection.ChunkFields(projection.Mode(mode)), keysOf(r))
					require.Equal(t, float64(ids[i].(int)), r["chunk_id"], "chunks come in the order asked")
				}
				require.Nil(t, a.env["pagination"])
			})
		}
	}
}

func TestGetChunksDefaultsToFullAndReportsMissing(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1002, 999999, "1003", 1002}})
	require.Equal(t, "partial", a.status())
	rs := a.results()
	require.Len(t, rs, 2, "duplicates collapse, missing ids are left out")
	require.Contains(t, rs[0], "chunk_text")
	require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
	require.Contains(t, a.env["warnings"].([]any)[0].(map[string]any)["message"], "999999")
}

func TestFindVendorInfoModesAndFormats(t *testing.T) {
	h := newHarness(t)
	for _, vendor := range []string{testfake.VendorSmall, testfake.VendorBig} {
		for _, mode := range modes {
			for _, format := range formats {
				t.Run(vendor+"/"+mode+"/"+format, func(t *testing.T) {
					a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": vendor, "response_mode": mode, "format": format})
					require.Contains(t, []string{"success", "partial"}, a.status())
					checkFormat(t, a, format)
					checkTokens(t, a)
					rs := a.results()
					require.Len(t, rs, 1)
					require.ElementsMatch(t, projection.VendorFields(projection.Mode(mode)), keysOf(rs[0]))
					require.Equal(t, vendor, rs[0]["vendor_name"])
					switch mode {
					case "preview":
						require.LessOrEqual(t, len(rs[0]["entities"].([]any)), 5)
						require.LessOrEqual(t, len(rs[0]["relationships"].([]any)), 5)
						require.Nil(t, rs[0]["entities"].([]any)[0].(map[string]any)["snippet"])
					case "full":
						require.LessOrEqual(t, len(rs[0]["entities"].([]any)), 100)
						require.LessOrEqual(t, len(rs[0]["relationships"].([]any)), 500)
						require.NotNil(t, rs[0]["entities"].([]any)[0].(map[string]any)["snippet"])
					}
					if vendor == testfake.VendorBig && (mode == "full" || mode == "ids_only") {
						require.Equal(t, "partial", a.status(), "a graph over the caps is partial")
						require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
					}
				})
			}
		}
	}
}

func TestFindVendorInfoWithoutRelationships(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "globex", "response_mode": "preview", "include_relationships": false})
	require.Equal(t, "success", a.status())
	require.Empty(t, a.results()[0]["relationships"])
	require.Equal(t, testfake.VendorSmall, a.results()[0]["vendor_name"])
}

func TestFieldsNarrowAndInvalidFields(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{
		"query": "jwt tokens", "fields": []any{"hybrid_score", "chunk_id", "source_file"},
	})
	require.Equal(t, "success", a.status())
	for _, r := range a.results() {
		require.Equal(t, []string{"chunk_id", "hybrid_score", "source_file"}, sorted(keysOf(r)), "fields narrow, signals left out")
	}
	checkTokens(t, a)

	a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "jwt tokens", "response_mode": "metadata", "fields": []any{"chunk_id", "chunk_text"}})
	require.Equal(t, "error", a.status())
	require.Equal(t, "INVALID_FIELDS", a.errCode())
	require.Equal(t, "Fields ['chunk_text'] not available in 'metadata' mode", a.errObj()["message"])
	require.ElementsMatch(t, toAny(projection.SearchFields(projection.Metadata)), a.errObj()["allowed_fields"])
	require.ElementsMatch(t, toAny(projection.SearchFields(projection.Metadata)), a.errObj()["details"].(map[string]any)["allowed_fields"])

	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}, "response_mode": "preview", "fields": []any{"chunk_snippet"}})
	require.Equal(t, []string{"chunk_snippet"}, keysOf(a.results()[0]))
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}, "response_mode": "ids_only", "fields": []any{"hybrid_score"}})
	require.Equal(t, "INVALID_FIELDS", a.errCode())
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
	h := newHarness(t)
	for _, size := range []int{7, 10, 50} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			args := map[string]any{"query": "vendor security questionnaire", "page_size": size, "response_mode": "ids_only"}
			var ranks []int
			seen := map[float64]bool{}
			total := -1
			for pages := 0; pages < 100; pages++ {
				a := h.call(tools.ToolSemanticSearch, args)
				require.Equal(t, "success", a.status())
				p := a.pagination()
				if total < 0 {
					total = int(p["total_available"].(float64))
				}
				for _, r := range a.results() {
					id := r["chunk_id"].(float64)
					require.False(t, seen[id], "chunk %v returned twice", id)
					seen[id] = true
					ranks = append(ranks, int(r["rank"].(float64)))
				}
				if !p["has_more"].(bool) {
					require.Nil(t, p["cursor"])
					break
				}
				// Later pages keep the cursor's mode and page size.
				args = map[string]any{"query": "  vendor security questionnaire ", "cursor": p["cursor"]}
			}
			require.Len(t, ranks, total, "every result exactly once")
			require.True(t, slices.IsSorted(ranks))
			require.Equal(t, 1, ranks[0])
			require.Equal(t, total, ranks[len(ranks)-1])
		})
	}
}

func TestInvalidCursor(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident roles", "page_size": 5})
	cur := a.pagination()["cursor"].(string)
	payload, tag, _ := strings.Cut(cur, ".")
	tampered := payload[:len(payload)-2] + "xx" + "." + tag
	for name, tc := range map[string]struct{ query, cursor string }{
		"malformed":   {"incident roles", "not-a-cursor"},
		"tampered":    {"incident roles", tampered},
		"other query": {"something else entirely", cur},
		"bad tag":     {"incident roles", payload + ".AAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(name, func(t *testing.T) {
			a := h.call(tools.ToolSemanticSearch, map[string]any{"query": tc.query, "cursor": tc.cursor})
			require.Equal(t, "INVALID_CURSOR", a.errCode())
			require.NotEmpty(t, a.errObj()["suggestion"])
			require.False(t, a.errObj()["retryable"].(bool))
		})
	}
}

func TestTokenLimitTrimsPageAndCursorResumes(t *testing.T) {
	h := newHarness(t)
	args := map[string]any{"query": testfake.BigTerm + " section", "response_mode": "full", "page_size": 10}
	a := h.call(tools.ToolSemanticSearch, args)
	require.Equal(t, "partial", a.status())
	require.Contains(t, a.warningCodes(), "PARTIAL_RESULTS")
	checkTokens(t, a)
	used := int(a.execution()["tokens_used"].(float64))
	require.LessOrEqual(t, used, 15000)
	require.Equal(t, used > 12000, slices.Contains(a.warningCodes(), "TOKEN_LIMIT_WARNING"),
		"TOKEN_LIMIT_WARNING exactly when over 80%% of the limit (%d tokens)", used)
	p := a.pagination()
	kept := len(a.results())
	require.Less(t, kept, 10)
	require.Equal(t, float64(kept), p["returned_count"])
	require.Equal(t, float64(10), p["page_size"])
	lastRank := a.results()[kept-1]["rank"].(float64)

	next := h.call(tools.ToolSemanticSearch, map[string]any{"query": args["query"], "cursor": p["cursor"]})
	require.Equal(t, lastRank+1, next.results()[0]["rank"], "the cursor resumes at the first omitted result")
}

func TestTokenLimitExceeded(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": testfake.HugeTerm, "response_mode": "full", "page_size": 3})
	require.Equal(t, "error", a.status())
	require.Equal(t, "TOKEN_LIMIT_EXCEEDED", a.errCode())
	require.Contains(t, a.warningCodes(), "TOKEN_LIMIT_EXCEEDED")
	sugg := a.errObj()["suggestion"].(string)
	require.Contains(t, sugg, "'preview' mode", "the suggestion names a mode that fits: %s", sugg)
	needed := a.errObj()["details"].(map[string]any)["tokens_needed"].(float64)
	require.Greater(t, needed, 15000.0)
	checkTokens(t, a)

	huge := int64(0)
	for _, c := range h.env.Search.Chunks() {
		if strings.Contains(c.ChunkText, testfake.HugeTerm) {
			huge = c.ChunkID
		}
	}
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{huge}})
	require.Equal(t, "TOKEN_LIMIT_EXCEEDED", a.errCode())
	require.Contains(t, a.errObj()["suggestion"], "'preview' mode")
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{huge}, "response_mode": "preview"})
	require.Equal(t, "success", a.status())
}

func TestVendorTrimmedToBudget(t *testing.T) {
	h := newHarness(t, withThresholds(thresholds(4000)))
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": testfake.VendorBig, "response_mode": "full", "format": "both"})
	require.Equal(t, "partial", a.status())
	require.LessOrEqual(t, int(a.execution()["tokens_used"].(float64)), 4000)
	checkTokens(t, a)
	r := a.results()[0]
	require.Less(t, len(r["relationships"].([]any)), 500)
}

func TestWarnings(t *testing.T) {
	t.Run("deprecated top_k", func(t *testing.T) {
		h := newHarness(t)
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "data retention", "top_k": 3, "page_size": 4})
		require.Contains(t, a.warningCodes(), "DEPRECATED_PARAMETER")
		require.Len(t, a.results(), 4, "page_size wins")
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "data retention", "top_k": 3})
		require.NotContains(t, a.warningCodes(), "DEPRECATED_PARAMETER")
		require.Len(t, a.results(), 3)
	})
	t.Run("low quality", func(t *testing.T) {
		h := newHarness(t)
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "qqxv zzkj"})
		require.Contains(t, a.warningCodes(), "LOW_QUALITY_RESULTS")
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident severity levels", "response_mode": "ids_only"})
		require.NotContains(t, a.warningCodes(), "LOW_QUALITY_RESULTS")
	})
	t.Run("cache miss slow", func(t *testing.T) {
		th := thresholds(15000)
		th.CacheMissSlow = 20 * time.Millisecond
		h := newHarness(t, withThresholds(th))
		h.env.Search.SetDelay(40 * time.Millisecond)
		defer h.env.Search.SetDelay(0)
		q := fmt.Sprintf("warehouse modelling %d", time.Now().UnixNano())
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": q})
		require.Contains(t, a.warningCodes(), "CACHE_MISS_SLOW")
		require.False(t, a.execution()["cache_hit"].(bool))
		a = h.call(tools.ToolSemanticSearch, map[string]any{"query": q})
		require.NotContains(t, a.warningCodes(), "CACHE_MISS_SLOW")
		require.True(t, a.execution()["cache_hit"].(bool))
	})
	t.Run("rate limiter degraded", func(t *testing.T) {
		h := newHarness(t, withKey(testfake.KeyDegraded))
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{tools.ToolSemanticSearch, map[string]any{"query": "backups"}},
			{tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"}},
			{tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}}},
		} {
			a := h.call(tc.tool, tc.args)
			require.Contains(t, a.warningCodes(), "RATE_LIMITER_DEGRADED", tc.tool)
		}
	})
	t.Run("token limit warning", func(t *testing.T) {
		h := newHarness(t, withThresholds(thresholds(3000)))
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident review", "response_mode": "preview", "page_size": 10})
		used := a.execution()["tokens_used"].(float64)
		if used > 2400 {
			require.Contains(t, a.warningCodes(), "TOKEN_LIMIT_WARNING")
		} else {
			require.NotContains(t, a.warningCodes(), "TOKEN_LIMIT_WARNING")
		}
	})
}

func thresholds(max int) warnings.Thresholds {
	return warnings.Thresholds{MaxTokens: max, WarnRatio: 0.8, LowQuality: 0.5, CacheMissSlow: time.Minute}
}

func statusErr(code int, msg string) error { return status.Error(codes.Code(code), msg) }

func TestErrorCodes(t *testing.T) {
	long := strings.Repeat("a", 501)
	cases := []struct {
		name, key, tool, code string
		args                  map[string]any
		check                 func(t *testing.T, a answer)
	}{
		{name: "auth required", key: "", tool: tools.ToolSemanticSearch, code: "AUTH_REQUIRED", args: map[string]any{"query": "x"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Authentication required. API key must be provided.", a.errObj()["message"])
			}},
		{name: "auth invalid", key: "bmcis_nope_nope", tool: tools.ToolFindVendorInfo, code: "AUTH_INVALID", args: map[string]any{"vendor_name": "Globex"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid API key. Please check your credentials.", a.errObj()["message"])
			}},
		{name: "auth expired", key: testfake.KeyExpired, tool: tools.ToolGetChunks, code: "AUTH_INVALID", args: map[string]any{"chunk_ids": []any{1001}},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "AUTH_EXPIRED", a.errObj()["details"].(map[string]any)["reason"])
			}},
		{name: "auth revoked", key: testfake.KeyRevoked, tool: tools.ToolGetChunks, code: "AUTH_INVALID", args: map[string]any{"chunk_ids": []any{1001}}},
		{name: "rate limit", key: testfake.KeyLimited, tool: tools.ToolSemanticSearch, code: "RATE_LIMIT", args: map[string]any{"query": "x"},
			check: func(t *testing.T, a answer) {
				e := a.errObj()
				require.Equal(t, "Rate limit exceeded", e["message"])
				require.Equal(t, map[string]any{"minute": 0.0, "hour": 450.0, "day": 8500.0}, e["remaining"])
				require.Equal(t, 35.0, e["reset_in_seconds"])
				require.True(t, e["retryable"].(bool))
			}},
		{name: "vendor not found", key: testfake.KeyGood, tool: tools.ToolFindVendorInfo, code: "VENDOR_NOT_FOUND", args: map[string]any{"vendor_name": "Globx"},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Vendor 'Globx' not found. Try using semantic_search first to find exact vendor names.", a.errObj()["message"])
				ni := a.env["needs_input"].(map[string]any)
				require.Equal(t, "needsInput:v1", ni["kind"])
				require.Equal(t, []any{"Globex"}, ni["needsInput"].(map[string]any)["suggestions"].(map[string]any)["vendor_name"])
			}},
		{name: "vendor ambiguous", key: testfake.KeyGood, tool: tools.ToolFindVendorInfo, code: "VENDOR_AMBIGUOUS", args: map[string]any{"vendor_name": "acme"},
			check: func(t *testing.T, a answer) {
				require.True(t, strings.HasPrefix(a.errObj()["message"].(string), "Ambiguous vendor name. Multiple matches found: ["))
				ni := a.env["needs_input"].(map[string]any)
				require.Len(t, ni["options"], 3)
				require.Equal(t, "vendor_name", ni["options"].([]any)[0].(map[string]any)["field"])
			}},
		{name: "query too long", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "QUERY_TOO_LONG", args: map[string]any{"query": long},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid request parameters: query exceeds 500 characters", a.errObj()["message"])
			}},
		{name: "page size", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "INVALID_PARAMS", args: map[string]any{"query": "x", "top_k": 51},
			check: func(t *testing.T, a answer) {
				require.Equal(t, "Invalid request parameters: top_k must be between 1 and 50", a.errObj()["message"])
			}},
		{name: "unknown param", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "INVALID_PARAMS", args: map[string]any{"query": "x", "mode": "full"}},
		{name: "bad mode", key: testfake.KeyGood, tool: tools.ToolFindVendorInfo, code: "INVALID_PARAMS", args: map[string]any{"vendor_name": "x", "response_mode": "everything"}},
		{name: "bad format", key: testfake.KeyGood, tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": []any{1}, "format": "html"}},
		{name: "too many ids", key: testfake.KeyGood, tool: tools.ToolGetChunks, code: "INVALID_PARAMS", args: map[string]any{"chunk_ids": manyIDs(101)}},
		{name: "vendor name too long", key: testfake.KeyGood, tool: tools.ToolFindVendorInfo, code: "INVALID_PARAMS", args: map[string]any{"vendor_name": strings.Repeat("v", 201)}},
		{name: "invalid fields", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "INVALID_FIELDS", args: map[string]any{"query": "x", "response_mode": "ids_only", "fields": []any{"source_file"}}},
		{name: "invalid cursor", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "INVALID_CURSOR", args: map[string]any{"query": "x", "cursor": "abc.def"}},
		{name: "token limit exceeded", key: testfake.KeyGood, tool: tools.ToolSemanticSearch, code: "TOKEN_LIMIT_EXCEEDED", args: map[string]any{"query": testfake.HugeTerm, "response_mode": "full"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withKey(tc.key))
			for _, format := range formats {
				args := map[string]any{}
				for k, v := range tc.args {
					args[k] = v
				}
				if tc.code != "INVALID_PARAMS" || tc.name != "bad format" {
					args["format"] = format
				}
				a := h.call(tc.tool, args)
				require.Equal(t, "error", a.status())
				require.True(t, a.res.IsError)
				require.Equal(t, tc.code, a.errCode())
				require.Empty(t, a.results())
				require.NotEmpty(t, a.env["_metadata"].(map[string]any)["message"])
				checkTokens(t, a)
				if tc.check != nil {
					tc.check(t, a)
				}
			}
		})
	}
}

func manyIDs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = 1001 + i
	}
	return out
}

func TestBackendErrorCodes(t *testing.T) {
	cases := []struct {
		name    string
		fail    func(e *testfake.Env)
		tool    string
		args    map[string]any
		code    string
		retry   bool
		message string
	}{
		{"db connection", func(e *testfake.Env) {
			e.Search.FailNext(statusErr(14, "database unavailable; retry shortly"), statusErr(14, "database unavailable; retry shortly"), statusErr(14, "database unavailable; retry shortly"))
		}, tools.ToolSemanticSearch, map[string]any{"query": "x"}, "DB_CONNECTION", true, "Search failed: Database connection error"},
		{"search failed", func(e *testfake.Env) { e.Search.FailNext(statusErr(13, "internal error (request id x)")) },
			tools.ToolSemanticSearch, map[string]any{"query": "x"}, "SEARCH_FAILED", true, ""},
		{"vendor db", func(e *testfake.Env) {
			e.VendorGraph.FailNext(statusErr(14, "database unavailable"), statusErr(14, "database unavailable"), statusErr(14, "database unavailable"))
		}, tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"}, "DB_CONNECTION", true, "Vendor info retrieval failed: Database connection error"},
		{"unimplemented", func(e *testfake.Env) { e.Search.FailNext(statusErr(12, "not yet")) },
			tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}}, "SERVICE_UNAVAILABLE", false, ""},
		{"auth down", func(e *testfake.Env) {
			e.Auth.FailNext(statusErr(14, "connection refused"), statusErr(14, "connection refused"), statusErr(14, "connection refused"))
		},
			tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}}, "SERVICE_UNAVAILABLE", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.fail(h.env)
			a := h.call(tc.tool, tc.args)
			require.Equal(t, tc.code, a.errCode())
			require.Equal(t, tc.retry, a.errObj()["retryable"])
			if tc.message != "" {
				require.Equal(t, tc.message, a.errObj()["message"])
			}
		})
	}
}

func TestRetriesUnavailable(t *testing.T) {
	h := newHarness(t)
	before := h.env.Search.Calls()
	h.env.Search.FailNext(statusErr(14, "transient"), statusErr(14, "transient"))
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "success", a.status(), "two UNAVAILABLE answers are retried with backoff")
	require.Equal(t, before+3, h.env.Search.Calls())
}

func TestBackendDownOnlyAffectsItsTools(t *testing.T) {
	h := newHarness(t)
	h.env.Stop("vendorgraph")
	start := time.Now()
	a := h.call(tools.ToolFindVendorInfo, map[string]any{"vendor_name": "Globex"})
	require.Equal(t, "SERVICE_UNAVAILABLE", a.errCode())
	require.True(t, a.errObj()["retryable"].(bool))
	require.Less(t, time.Since(start), 6*time.Second, "answers within the deadline")
	a = h.call(tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	require.Equal(t, "success", a.status())
	a = h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "success", a.status())
}

func TestDeniedCallReturnsNothingFromBackend(t *testing.T) {
	h := newHarness(t, withKey(testfake.KeyRevoked))
	h.env.Auth.SetDelay(50 * time.Millisecond) // the backend answers first
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}, "format": "both"})
	require.Equal(t, "AUTH_INVALID", a.errCode())
	for _, b := range a.blocks {
		require.NotContains(t, b, "Data Platform Overview", "no backend data leaks into a denied answer")
	}
}

func TestRequestIDPropagates(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	id := a.env["_metadata"].(map[string]any)["request_id"].(string)
	require.True(t, strings.HasPrefix(id, "req_"))
	require.Contains(t, h.env.RequestIDs(), id, "the backends see the envelope's request id")
	ts := a.env["_metadata"].(map[string]any)["timestamp"].(string)
	_, err := time.Parse(time.RFC3339, ts)
	require.NoError(t, err)
}

func TestEmptyQueryNeedsInput(t *testing.T) {
	h := newHarness(t)
	for _, format := range formats {
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "  ", "format": format})
		require.Equal(t, "INVALID_PARAMS", a.errCode())
		ni := a.env["needs_input"].(map[string]any)
		require.Equal(t, "needsInput:v1", ni["kind"])
		require.Equal(t, "elicitation", ni["type"])
		require.Equal(t, []any{"query"}, ni["needsInput"].(map[string]any)["fields"])
		require.NotEmpty(t, ni["options"], "indexed categories become suggestions")
		if format != "json" {
			require.Contains(t, a.blocks[0], "Input needed")
		}
	}
}

func TestToolsListing(t *testing.T) {
	h := newHarness(t)
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
	h := newHarness(t)
	for _, tc := range []struct {
		uri, want string
	}{
		{"kb://chunks/1002", "Warehouse and lake"},
		{"kb://vendors/Globex", "Globex"},
		{"kb://vendors/Acme%20Corporation", "Acme Corporation"},
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
	}
	res, err := h.cli.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "kb://vendors/acme"}})
	require.NoError(t, err)
	require.Contains(t, res.Contents[len(res.Contents)-1].(mcp.TextResourceContents).Text, "VENDOR_AMBIGUOUS")
}

func TestSignalsAreDerivedFromRetrievers(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "incident commander bridge status update", "page_size": 20, "response_mode": "preview"})
	for _, r := range a.results() {
		c := r["confidence"].(map[string]any)
		for _, k := range []string{"score_reliability", "source_quality", "recency", "overall"} {
			v := c[k].(float64)
			require.True(t, v >= 0 && v <= 1, "%s in 0..1", k)
		}
		rk := r["ranking"].(map[string]any)
		require.Equal(t, "hybrid", rk["score_method"])
		require.NotEmpty(t, rk["explanation"])
		if strings.HasPrefix(r["source_file"].(string), "docs/incident") || strings.HasPrefix(r["source_file"].(string), "archive/incident") {
			require.Equal(t, 0.9, c["source_quality"], "security is weighted 0.9 by config")
		}
	}
	// percentiles fall with rank
	var prev = math.Inf(1)
	for _, r := range a.results() {
		p := r["ranking"].(map[string]any)["percentile"].(float64)
		require.LessOrEqual(t, p, prev)
		prev = p
	}
	qa := a.env["query_analysis"].(map[string]any)
	require.Contains(t, qa["matched_terms"], "incident")
}

func TestDuplicatesAreFlagged(t *testing.T) {
	h := newHarness(t)
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "warehouse lake zones retained thirteen months", "page_size": 50, "response_mode": "preview"})
	found := false
	for _, r := range a.results() {
		d := r["deduplication"].(map[string]any)
		if d["is_duplicate"].(bool) {
			found = true
			require.NotEmpty(t, d["similar_chunk_ids"])
			require.Equal(t, 1.0, d["confidence"], "identical texts on the page compare as identical")
		}
	}
	require.True(t, found, "the archive copy is flagged as a duplicate")
	require.True(t, a.env["_metadata"].(map[string]any)["visual_hints"].(map[string]any)["collapse_duplicates"].(bool))
}

func TestDesktopEnhancementsOff(t *testing.T) {
	h := newHarness(t, func(o *tools.Options) { o.Desktop = false })
	a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "jwt", "response_mode": "preview"})
	require.ElementsMatch(t, projection.SearchFields(projection.Preview), keysOf(a.results()[0]))
	require.Nil(t, a.env["query_analysis"])
	require.Nil(t, a.env["_metadata"].(map[string]any)["visual_hints"])
}
