package tools_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// A chunk of a paged document (the demo PDFs) carries its page from
// metadata mode up, in search results and chunks fetched by id, in JSON
// and markdown; other chunks carry none, and ids_only never does.
func TestPageOfPDFChunks(t *testing.T) {
	h := newReal(t)
	search := func(mode string) []map[string]any {
		a := h.call(tools.ToolSemanticSearch, map[string]any{"query": "vendor uptime service credits review",
			"response_mode": mode, "page_size": 10, "format": "json"})
		require.Equal(t, "success", a.status())
		return a.results()
	}
	for _, r := range search("ids_only") {
		require.NotContains(t, r, "page", "ids_only has no page")
	}
	pages := map[float64]float64{} // chunk id -> page
	for _, mode := range []string{"metadata", "preview", "full"} {
		var pdf, other int
		for _, r := range search(mode) {
			page, paged := r["page"]
			if !strings.HasSuffix(r["source_file"].(string), ".pdf") {
				require.False(t, paged, "%s: %v is not paged", mode, r["source_file"])
				other++
				continue
			}
			require.True(t, paged, "%s: a PDF chunk has its page: %v", mode, r)
			require.GreaterOrEqual(t, page.(float64), 1.0)
			id := r["chunk_id"].(float64)
			if p, seen := pages[id]; seen {
				require.Equal(t, p, page, "the same page in every mode")
			}
			pages[id] = page.(float64)
			if header, ok := r["context_header"].(string); ok {
				// The PDF extractor also names the page in the header.
				require.Contains(t, header, fmt.Sprintf("p. %d", int(page.(float64))), "%s: %v", mode, r)
			}
			pdf++
		}
		require.Positive(t, pdf, "%s: the query finds the demo PDFs", mode)
		require.Positive(t, other, "%s: and other documents", mode)
	}

	// get_chunks says the same, and markdown reads it.
	var ids []any
	for id := range pages {
		ids = append(ids, id)
	}
	a := h.call(tools.ToolGetChunks, map[string]any{"chunk_ids": ids, "response_mode": "metadata", "format": "both"})
	require.Equal(t, "success", a.status())
	for _, r := range a.results() {
		require.Equal(t, pages[r["chunk_id"].(float64)], r["page"], "%v", r)
		require.Contains(t, a.blocks[0], fmt.Sprintf("page %d", int(r["page"].(float64))))
	}
}
