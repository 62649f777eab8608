package tools_test

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
)

// Every tool and resource template the server registers has an access
// rule naming a registered tool (the one its auth check names), and the
// rules name nothing the server does not register: a new tool or resource
// cannot ship without someone deciding which key may call it. The bridge's
// catalogue is the same set.
func TestEveryToolAndResourceHasAnAccessRule(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	lt, err := h.cli.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	lr, err := h.cli.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	lres, err := h.cli.ListResources(ctx, mcp.ListResourcesRequest{})
	require.NoError(t, err)
	require.Empty(t, lres.Resources, "a fixed resource needs a rule in accessRules too")

	toolNames := map[string]bool{}
	var registered []string
	for _, tool := range lt.Tools {
		toolNames[tool.Name] = true
		registered = append(registered, tool.Name)
	}
	for _, tmpl := range lr.ResourceTemplates {
		registered = append(registered, tmpl.URITemplate.Raw())
	}
	require.NotEmpty(t, toolNames)
	for _, name := range registered {
		tool, ok := tools.AccessRule(name)
		require.True(t, ok, "%s has no access rule (tools.accessRules)", name)
		require.True(t, toolNames[tool], "%s's rule names %q, which is no registered tool", name, tool)
	}
	require.ElementsMatch(t, registered, tools.AccessRules(), "the rules and the server name the same tools and resources")

	catTools, catTemplates := tools.Catalog()
	var catalogue []string
	for _, tool := range catTools {
		catalogue = append(catalogue, tool.Name)
	}
	for _, tmpl := range catTemplates {
		catalogue = append(catalogue, tmpl.URITemplate.Raw())
	}
	require.ElementsMatch(t, registered, catalogue, "the bridge lists what the server registers")
}
