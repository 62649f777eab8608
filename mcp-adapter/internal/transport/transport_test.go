package transport_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/version"

	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

func TestAPIKeyHeaders(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"x-api-key", http.Header{"X-Api-Key": {" k1 "}}, "k1"},
		{"bearer", http.Header{"Authorization": {"Bearer k2"}}, "k2"},
		{"bearer lowercase", http.Header{"Authorization": {"bearer k3"}}, "k3"},
		{"x-api-key wins", http.Header{"X-Api-Key": {"k4"}, "Authorization": {"Bearer k5"}}, "k4"},
		{"basic ignored", http.Header{"Authorization": {"Basic abc"}}, ""},
		{"none", http.Header{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, transport.APIKey(tc.header))
		})
	}
}

func newHTTP(t *testing.T) (*httptest.Server, *testfake.Env) {
	env := testfake.Start(t)
	codec, err := cursor.New([]byte("0123456789abcdef0123"))
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{
		Clients: env.Clients, Key: tools.APIKeyFromContext, KeyHint: transport.HTTPKeyHint,
		Cursors: codec, Thresholds: warnings.Defaults, Desktop: true, Logger: logger,
	})
	srv := httptest.NewServer(transport.HTTPHandler(m, env.Clients, logger, 0, nil))
	t.Cleanup(srv.Close)
	return srv, env
}

func call(t *testing.T, url string, headers map[string]string, tool string, args map[string]any) map[string]any {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url+"/mcp", mcptransport.WithHTTPHeaders(headers))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "http-test", Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)
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

func TestStreamableHTTPKeyPerRequest(t *testing.T) {
	srv, _ := newHTTP(t)
	args := map[string]any{"chunk_ids": []any{1001}}
	env := call(t, srv.URL, map[string]string{"X-API-Key": testfake.KeyGood}, tools.ToolGetChunks, args)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	env = call(t, srv.URL, map[string]string{"Authorization": "Bearer " + testfake.KeyGood}, tools.ToolGetChunks, args)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	env = call(t, srv.URL, nil, tools.ToolGetChunks, args)
	require.Equal(t, "AUTH_REQUIRED", env["error"].(map[string]any)["code"])
	require.Equal(t, transport.HTTPKeyHint, env["error"].(map[string]any)["suggestion"])
	env = call(t, srv.URL, map[string]string{"X-API-Key": "bmcis_wrong_key"}, tools.ToolGetChunks, args)
	require.Equal(t, "AUTH_INVALID", env["error"].(map[string]any)["code"])
}

func TestStatelessCursorAcrossServers(t *testing.T) {
	// Two replicas sharing the cursor secret: a cursor from one pages on
	// the other.
	a, _ := newHTTP(t)
	b, _ := newHTTP(t)
	h := map[string]string{"X-API-Key": testfake.KeyGood}
	env := call(t, a.URL, h, tools.ToolSemanticSearch, map[string]any{"query": "incident", "page_size": 3, "response_mode": "ids_only"})
	cur := env["pagination"].(map[string]any)["cursor"].(string)
	env = call(t, b.URL, h, tools.ToolSemanticSearch, map[string]any{"query": "incident", "cursor": cur})
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	require.Equal(t, 4.0, env["results"].([]any)[0].(map[string]any)["rank"])
}

func TestHealthEndpoints(t *testing.T) {
	srv, env := newHTTP(t)
	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, body
	}
	code, body := get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body["status"])
	require.Equal(t, transport.HealthName, body["name"])
	require.Equal(t, version.Version, body["version"])
	code, body = get("/readyz")
	require.Equal(t, http.StatusOK, code, "%v", body)
	env.Stop("vendorgraph")
	code, body = get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NotEqual(t, "SERVING", body["backends"].(map[string]any)["vendorgraph"])
	require.Equal(t, "SERVING", body["backends"].(map[string]any)["search"])
}

func TestServeStdio(t *testing.T) {
	env := testfake.Start(t)
	codec, _ := cursor.New([]byte("0123456789abcdef0123"))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{
		Clients: env.Clients, Key: func(context.Context) string { return "" }, KeyHint: transport.StdioKeyHint,
		Cursors: codec, Thresholds: warnings.Defaults, Logger: logger,
	})
	in := strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"semantic_search","arguments":{"query":"x"}}}`,
	}, "\n") + "\n")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- transport.ServeStdio(context.Background(), m, io.MultiReader(in, blockUntilClosed(t)), pw, logger)
	}()
	dec := json.NewDecoder(pr)
	var got map[string]any
	for {
		var msg map[string]any
		require.NoError(t, dec.Decode(&msg))
		if msg["id"] == 2.0 {
			got = msg
			break
		}
	}
	res := got["result"].(map[string]any)
	require.Equal(t, true, res["isError"], "no key: the call answers AUTH_REQUIRED instead of failing")
	sc := res["structuredContent"].(map[string]any)
	require.Equal(t, "AUTH_REQUIRED", sc["error"].(map[string]any)["code"])
	require.Equal(t, transport.StdioKeyHint, sc["error"].(map[string]any)["suggestion"])
}

// An unknown tool's call gets the same answer over stdio as over HTTP, one
// that names the tools there are (mcp-go's own does not); the session goes
// on serving.
func TestUnknownToolSameAnswerOnStdioAndHTTP(t *testing.T) {
	env := testfake.Start(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{Clients: env.Clients, Key: tools.APIKeyFromContext, Logger: logger})
	srv := httptest.NewServer(transport.HTTPHandler(m, env.Clients, logger, 0, nil))
	t.Cleanup(srv.Close)
	const unknown = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_docs","arguments":{}}}`

	req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(unknown))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var overHTTP map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&overHTTP))
	resp.Body.Close()

	in := strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		unknown,
		`{"jsonrpc":"2.0","id":8,"method":"ping"}`,
	}, "\n") + "\n")
	pr, pw := io.Pipe()
	go func() { _ = transport.ServeStdio(t.Context(), m, io.MultiReader(in, blockUntilClosed(t)), pw, logger) }()
	dec := json.NewDecoder(pr)
	byID := map[float64]map[string]any{}
	for len(byID) < 3 {
		var msg map[string]any
		require.NoError(t, dec.Decode(&msg))
		if id, ok := msg["id"].(float64); ok {
			byID[id] = msg
		}
	}
	require.Equal(t, overHTTP, byID[7], "stdio answers as HTTP does")
	e := byID[7]["error"].(map[string]any)
	require.Equal(t, float64(-32602), e["code"])
	for _, name := range []string{"search_docs", tools.ToolSemanticSearch, tools.ToolGetChunks, tools.ToolFindVendorInfo, "tools/list"} {
		require.Contains(t, e["message"], name)
	}
	require.Contains(t, byID[8], "result", "the session goes on")
}

// blockUntilClosed keeps stdin open until the test ends, like a client that
// stays connected.
func blockUntilClosed(t *testing.T) io.Reader {
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	return pr
}

// TestBodyLimit: an oversized /mcp body answers 413, whether it declares
// its length or is chunked, and the server goes on serving.
func TestBodyLimit(t *testing.T) {
	srv, _ := newHTTP(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	post := func(body io.Reader, length int64) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", body)
		require.NoError(t, err)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := post(strings.NewReader(big), int64(len(big)))
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Contains(t, out["error"].(map[string]any)["message"], "exceeds 1048576 bytes")
	// Chunked: no Content-Length to reject up front.
	code, _ = post(io.MultiReader(strings.NewReader(big)), -1)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)

	// Still serving, and a body under the limit reaches the MCP server.
	env := call(t, srv.URL, map[string]string{"X-API-Key": testfake.KeyGood}, tools.ToolSemanticSearch,
		map[string]any{"query": strings.Repeat("incident ", 40), "response_mode": "ids_only"})
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	code, _ = post(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), -1)
	require.Equal(t, http.StatusOK, code)
}

func TestBodyLimitConfigurable(t *testing.T) {
	env := testfake.Start(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{Clients: env.Clients, Key: tools.APIKeyFromContext, Logger: logger})
	srv := httptest.NewServer(transport.HTTPHandler(m, env.Clients, logger, 100, nil))
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 100) + `"}}`
	resp, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func TestServerTimeouts(t *testing.T) {
	srv := transport.NewServer(http.NotFoundHandler(), transport.ServerLimits{})
	require.Equal(t, 30*time.Second, srv.ReadTimeout)
	require.Equal(t, 120*time.Second, srv.IdleTimeout)
	srv = transport.NewServer(http.NotFoundHandler(), transport.ServerLimits{Read: 2 * time.Second, Idle: time.Minute})
	require.Equal(t, 2*time.Second, srv.ReadTimeout)
	require.Equal(t, time.Minute, srv.IdleTimeout)
}

// Malformed calls a client or model can make answer with what to do
// instead: a batch (valid JSON that MCP no longer takes) is not "not valid
// json", and an unknown tool's error names the tools there are.
func TestMalformedCallsSayWhatToDo(t *testing.T) {
	srv, _ := newHTTP(t)
	post := func(t *testing.T, body string) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-API-Key", testfake.KeyGood)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, out
	}
	tests := []struct {
		name, body string
		code       int
		id         any
		rpcCode    float64
		says       []string
	}{
		{"batch", ` [{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
			http.StatusBadRequest, nil, -32600, []string{"batch", "one request per POST"}},
		{"not json", `{"jsonrpc":`, http.StatusBadRequest, nil, -32700, []string{"not valid json"}},
		{"no method", `{"jsonrpc":"2.0","id":1}`, http.StatusBadRequest, float64(1), -32600, []string{"method"}},
		{"neither id nor method", `{"jsonrpc":"2.0"}`, http.StatusBadRequest, nil, -32600, []string{"method"}},
		{"unknown tool", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_docs","arguments":{}}}`,
			http.StatusOK, float64(7), -32602, []string{"search_docs", tools.ToolSemanticSearch, tools.ToolGetChunks, tools.ToolFindVendorInfo, "tools/list"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, tc.body)
			var out map[string]any
			require.NoError(t, json.Unmarshal(body, &out), "%d %s", code, body)
			require.Equal(t, tc.code, code, "%v", out)
			require.Equal(t, tc.id, out["id"])
			e, ok := out["error"].(map[string]any)
			require.True(t, ok, "%v", out)
			require.Equal(t, tc.rpcCode, e["code"])
			for _, s := range tc.says {
				require.Contains(t, e["message"], s)
			}
		})
	}
	t.Run("a response still passes", func(t *testing.T) {
		code, body := post(t, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		require.Equal(t, http.StatusAccepted, code, "%s", body)
	})
}
