package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The catalogue is the adapter's (mcp_catalog.json, kept exact by the
// adapter's TestGatewayCatalog); these check the gateway reads all of it.
func TestCatalogFromAdapter(t *testing.T) {
	require.Len(t, tools, 3)
	names := []string{}
	for _, tl := range tools {
		names = append(names, tl.Name)
		require.NotEmpty(t, tl.Description, tl.Name)
		require.NotEmpty(t, tl.backend, tl.Name)
		require.NotEmpty(t, tl.rpc, tl.Name)
		require.Equal(t, "object", tl.InputSchema["type"], tl.Name)
		props := tl.InputSchema["properties"].(map[string]any)
		require.Contains(t, props, "format", "%s: the adapter's format parameter", tl.Name)
		require.Contains(t, props, "response_mode", tl.Name)
		require.Equal(t, true, tl.Annotations["readOnlyHint"], tl.Name)
	}
	require.Equal(t, []string{"semantic_search", "get_chunks", "find_vendor_info"}, names)
	require.Contains(t, tools[0].InputSchema["properties"], "fields")
	require.Contains(t, tools[1].InputSchema["properties"], "fields")

	require.Len(t, resourceTemplates, 2)
	for _, rt := range resourceTemplates {
		require.NotEmpty(t, rt.backend, rt.Name)
		require.NotEmpty(t, rt.ContentType, rt.Name)
	}
	require.Equal(t, "kb://chunks/{chunk_id}", resourceTemplates[0].URITemplate)
}

func TestParseCatalogRejectsDrift(t *testing.T) {
	_, _, err := parseCatalog([]byte(`{"tools":[{"name":"semantic_search","inputSchema":{"type":"object"}},{"name":"get_chunks","inputSchema":{"type":"object"}},{"name":"find_vendor_info","inputSchema":{"type":"object"}},{"name":"new_tool","inputSchema":{"type":"object"}}]}`))
	require.ErrorContains(t, err, `tool "new_tool" has no backend`)
	_, _, err = parseCatalog([]byte(`{"tools":[{"name":"semantic_search","inputSchema":{"type":"object"}}]}`))
	require.ErrorContains(t, err, `no tool "get_chunks"`)
	_, _, err = parseCatalog([]byte(`{"tools":[{"name":"semantic_search","inputSchema":{"type":"object"}},{"name":"get_chunks","inputSchema":{"type":"object"}},{"name":"find_vendor_info","inputSchema":{"type":"object"}}],"resourceTemplates":[{"name":"other","uriTemplate":"kb://x/{y}"}]}`))
	require.ErrorContains(t, err, `resource template "other" has no backend`)
	_, _, err = parseCatalog([]byte(`not json`))
	require.Error(t, err)
}

// TestServerDescriptionsClaimNoSetting: the dashboard shows these to
// operators, so they must hold under every configuration: the fusion is
// BMCIS_SEARCH_FUSION's (convex by default with the builtin embedder), the
// vector side often the in-memory mirror rather than pgvector, and the rate
// limit tiers have their one home in platform/ratelimit.Tiers.
func TestServerDescriptionsClaimNoSetting(t *testing.T) {
	for _, tc := range []struct {
		server, claim string
	}{
		{"search", "RRF"},
		{"search", "pgvector"},
		{"auth", "(minute, hour, day)"},
	} {
		t.Run(tc.server+" "+tc.claim, func(t *testing.T) {
			require.NotContains(t, ServerNamed(tc.server).Description, tc.claim)
		})
	}
	require.Contains(t, ServerNamed("auth").Description, "audit trail", "auth stores the audit trail the dashboard's operators read")
}
