package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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

// The binary's HTTP listener: GET /mcp without a key answers 405 at once
// and ends (no event stream held open), a foreign Origin gets 403 on every
// path, the listener's own origin and no Origin pass, and an unsupported
// MCP-Protocol-Version is 400.
func TestAdapterBinaryHTTPGuards(t *testing.T) {
	s := demo(t)
	a := adapterHTTP(t, s, map[string]string{"BMCIS_MCP_ALLOWED_ORIGINS": "https://claude.example.com"})
	do := func(method, path, body string, headers ...string) (int, string) {
		req, err := http.NewRequest(method, a+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		require.NoError(t, err, "%s %s must answer and end", method, path)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for range 50 {
		code, _ := do(http.MethodGet, "/mcp", "", "Accept", "text/event-stream")
		require.Equal(t, http.StatusMethodNotAllowed, code)
	}
	cases := []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"no origin", http.MethodPost, "/mcp", nil, http.StatusOK},
		{"allowed origin", http.MethodPost, "/mcp", []string{"Origin", "https://claude.example.com"}, http.StatusOK},
		{"own origin", http.MethodPost, "/mcp", []string{"Origin", strings.Replace(a, "127.0.0.1", "localhost", 1)}, http.StatusOK},
		{"bad origin", http.MethodPost, "/mcp", []string{"Origin", "https://evil.example.com"}, http.StatusForbidden},
		{"bad origin on readyz", http.MethodGet, "/readyz", []string{"Origin", "https://evil.example.com"}, http.StatusForbidden},
		{"unsupported protocol version", http.MethodPost, "/mcp", []string{"MCP-Protocol-Version", "1999-01-01"}, http.StatusBadRequest},
		{"supported protocol version", http.MethodPost, "/mcp", []string{"MCP-Protocol-Version", "2025-06-18"}, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := do(c.method, c.path, list, c.headers...)
			require.Equal(t, c.want, code, body)
		})
	}
}
