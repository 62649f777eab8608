package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

var allTools = []string{"find_vendor_info", "get_chunks", "semantic_search"}

// listed returns the names of c's tools/list and the URI templates of its
// resources/templates/list, sorted.
func listed(t *testing.T, c *client.Client) (names, templates []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ts, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	for _, tool := range ts.Tools {
		names = append(names, tool.Name)
	}
	rt, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	for _, tmpl := range rt.ResourceTemplates {
		templates = append(templates, tmpl.URITemplate.Raw())
	}
	slices.Sort(names)
	slices.Sort(templates)
	return names, templates
}

// tools/list and resources/templates/list show a key only what its tool
// scope lets it call; a call outside it is still refused with
// TOOL_NOT_ALLOWED naming the allowed tools.
func TestToolsListShowsTheKeysTools(t *testing.T) {
	s := demo(t)
	a := adapterHTTP(t, s, nil)
	cases := []struct {
		name      string
		tools     []string
		want      []string
		templates []string
		refused   string
	}{
		{"every tool", nil, allTools, []string{"kb://chunks/{chunk_id}", "kb://vendors/{vendor_name}"}, ""},
		{"find_vendor_info only", []string{"find_vendor_info"}, []string{"find_vendor_info"}, []string{"kb://vendors/{vendor_name}"}, "semantic_search"},
		{"search and chunks", []string{"semantic_search", "get_chunks"}, []string{"get_chunks", "semantic_search"}, []string{"kb://chunks/{chunk_id}"}, "find_vendor_info"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := s.CreateKey(t, stacktest.Key{Name: "toolslist", Tools: tc.tools, PerMinute: 1000, PerHour: 1000, PerDay: 1000})
			c := httpClient(t, a, map[string]string{"X-API-Key": k})
			names, templates := listed(t, c)
			require.Equal(t, tc.want, names)
			require.Equal(t, tc.templates, templates)
			if tc.refused != "" {
				env := callTool(t, c, tc.refused, map[string]any{"query": "incident", "vendor_name": "Globex"})
				require.Equal(t, "TOOL_NOT_ALLOWED", env["error"].(map[string]any)["details"].(map[string]any)["reason"], "%v", env)
			}
		})
	}
}

// What a tools/list costs: nothing for a key limited to tools (auth
// refuses the list's check before its limiter); one unit for an unscoped
// key's first list, like any request, and nothing for its lists while the
// allow cache remembers that check (BMCIS_AUTH_ALLOW_CACHE_TTL): its two
// lists cost one unit, so one of its two units is left for a call. A
// refused call forgets the remembered list, so a spent key's next list
// gets its refusal.
func TestToolsListCost(t *testing.T) {
	s := demo(t)
	// Longer than the test, on a slow machine too.
	a := adapterHTTP(t, s, map[string]string{"BMCIS_AUTH_ALLOW_CACHE_TTL": "30s"})
	const perMinute = 2
	scoped := s.CreateKey(t, stacktest.Key{Name: "toolslist-cost-scoped", Tools: []string{"find_vendor_info"}, PerMinute: perMinute, PerHour: 100, PerDay: 100})
	c := httpClient(t, a, map[string]string{"X-API-Key": scoped})
	for range 3 * perMinute {
		names, _ := listed(t, c)
		require.Equal(t, []string{"find_vendor_info"}, names)
	}
	for range perMinute {
		require.Equal(t, "success", status(callTool(t, c, "find_vendor_info", map[string]any{"vendor_name": "Globex"})))
	}

	unscoped := s.CreateKey(t, stacktest.Key{Name: "toolslist-cost-unscoped", PerMinute: perMinute, PerHour: 100, PerDay: 100})
	c = httpClient(t, a, map[string]string{"X-API-Key": unscoped})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range perMinute {
		_, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		require.NoError(t, err)
	}
	require.Equal(t, "success", status(callTool(t, c, "find_vendor_info", map[string]any{"vendor_name": "Globex"})),
		"the second list cost nothing: a unit is left")
	env := callTool(t, c, "find_vendor_info", map[string]any{"vendor_name": "Globex"})
	require.Equal(t, "RATE_LIMIT", code(env))
	_, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.ErrorContains(t, err, env["error"].(map[string]any)["message"].(string), "a spent key gets its refusal, not a list")
}

// With auth stopped, tools/list is an error, not a list: the same typed,
// retryable refusal a call gets.
func TestToolsListFailsClosedWithoutAuth(t *testing.T) {
	s := demo(t)
	authSvc := s.StartService(t, stacktest.Auth, nil)
	a := adapterHTTP(t, s, map[string]string{"BMCIS_AUTH_ADDR": authSvc.Addr(), "BMCIS_AUTH_ALLOW_CACHE_TTL": "0s"})
	c := httpClient(t, a, map[string]string{"X-API-Key": key(t)})
	names, _ := listed(t, c)
	require.Equal(t, allTools, names)

	authSvc.Stop(t)
	env := callTool(t, c, "find_vendor_info", map[string]any{"vendor_name": "Globex"})
	require.Equal(t, "SERVICE_UNAVAILABLE", code(env))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.Nil(t, res)
	require.ErrorContains(t, err, env["error"].(map[string]any)["message"].(string))
}
