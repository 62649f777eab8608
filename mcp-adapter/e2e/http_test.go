package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// httpClient is an initialized streamable HTTP MCP client sending headers.
func httpClient(t testing.TB, base string, headers map[string]string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(base+"/mcp", mcptransport.WithHTTPHeaders(headers))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-http", Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func callTool(t testing.TB, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err)
	// The envelope is the structured content, whatever the text format.
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(raw, &env))
	return env
}

func status(env map[string]any) string { return env["_metadata"].(map[string]any)["status"].(string) }

func code(env map[string]any) string {
	if e, ok := env["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	return ""
}

// The binary over streamable HTTP: the key per request in either header,
// cursors accepted by another replica, and health endpoints that follow
// the backends.
func TestAdapterBinaryOverHTTP(t *testing.T) {
	s := demo(t)
	k := key(t)
	vg := s.StartService(t, stacktest.VendorGraph, nil) // stopped below
	extra := map[string]string{"BMCIS_VENDORGRAPH_ADDR": vg.Addr()}
	a := adapterHTTP(t, s, extra)
	b := adapterHTTP(t, s, extra)

	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(a + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body
	}
	code0, body := get("/readyz")
	require.Equal(t, http.StatusOK, code0, "%v", body)
	require.Equal(t, "ready", body["status"])

	ca := httpClient(t, a, map[string]string{"X-API-Key": k})
	env := callTool(t, ca, "semantic_search", map[string]any{"query": "incident severity levels", "response_mode": "ids_only", "page_size": 4})
	require.Equal(t, "success", status(env))
	cur := env["pagination"].(map[string]any)["cursor"].(string)
	cb := httpClient(t, b, map[string]string{"Authorization": "Bearer " + k})
	env = callTool(t, cb, "semantic_search", map[string]any{"query": "incident severity levels", "cursor": cur})
	require.Equal(t, "success", status(env), "another replica accepts the cursor: %v", env["error"])
	require.Equal(t, 5.0, env["results"].([]any)[0].(map[string]any)["rank"])

	env = callTool(t, httpClient(t, a, nil), "get_chunks", map[string]any{"chunk_ids": []any{1}})
	require.Equal(t, "AUTH_REQUIRED", code(env))
	env = callTool(t, httpClient(t, a, map[string]string{"X-API-Key": "bmcis_nope_nope"}), "get_chunks", map[string]any{"chunk_ids": []any{1}})
	require.Equal(t, "AUTH_INVALID", code(env))

	vg.Stop(t)
	code0, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code0)
	require.Equal(t, "degraded", body["status"])
	backends := body["backends"].(map[string]any)
	require.NotEqual(t, "SERVING", backends["vendorgraph"])
	require.Equal(t, "SERVING", backends["search"])
	require.Equal(t, "SERVING", backends["auth"])
	env = callTool(t, ca, "find_vendor_info", map[string]any{"vendor_name": "Globex"})
	require.Equal(t, "SERVICE_UNAVAILABLE", code(env))
	env = callTool(t, ca, "semantic_search", map[string]any{"query": "backups"})
	require.Equal(t, "success", status(env), "the other tools keep working")
	code0, _ = get("/healthz")
	require.Equal(t, http.StatusOK, code0, "liveness does not depend on the backends")
}
