package transport_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
)

// newScopedHTTP is the adapter's HTTP handler as main builds it: lists
// narrowed to the caller's tool scope (scoped) or not (the handler before).
func newScopedHTTP(t *testing.T, env *testfake.Env, scoped bool) *httptest.Server {
	logger := slog.New(slog.DiscardHandler)
	opts := tools.Options{Clients: env.Clients, Key: tools.APIKeyFromContext, KeyHint: transport.HTTPKeyHint, Logger: logger}
	var scope tools.ListScope
	if scoped {
		scope = tools.NewListScope(opts)
	}
	srv := httptest.NewServer(transport.HTTPHandler(tools.New(opts), env.Clients, logger, 0, scope))
	t.Cleanup(srv.Close)
	return srv
}

// postRaw posts one JSON-RPC message and returns the answer's bytes.
func postRaw(t *testing.T, url, key, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return out
}

const (
	listToolsMsg     = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	listTemplatesMsg = `{"jsonrpc":"2.0","id":4,"method":"resources/templates/list"}`
)

// A caller whose key may call every tool, and one without a key, get the
// very bytes the unfiltered server sends.
func TestListsOfAFullKeyAreByteIdentical(t *testing.T) {
	env := testfake.Start(t)
	before, after := newScopedHTTP(t, env, false), newScopedHTTP(t, env, true)
	cases := []struct{ name, key, body string }{
		{"tools, full key", testfake.KeyGood, listToolsMsg},
		{"templates, full key", testfake.KeyGood, listTemplatesMsg},
		{"tools, no key", "", listToolsMsg},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := postRaw(t, before.URL, tc.key, tc.body)
			require.Contains(t, string(want), `"result"`)
			require.Equal(t, string(want), string(postRaw(t, after.URL, tc.key, tc.body)))
		})
	}
}

// With auth unreachable, tools/list fails closed with the typed, retryable
// error a tool call gets, and lists nothing; a refused key gets its typed
// refusal.
func TestListsFailClosed(t *testing.T) {
	env := testfake.Start(t)
	srv := newScopedHTTP(t, env, true)
	type rpcAnswer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	list := func(key, body string) rpcAnswer {
		var a rpcAnswer
		require.NoError(t, json.Unmarshal(postRaw(t, srv.URL, key, body), &a))
		return a
	}
	refused := list("bmcis_wrong_key", listToolsMsg)
	require.Nil(t, refused.Result)
	require.Equal(t, transport.ListRefusedCode, refused.Error.Code)
	require.Equal(t, "AUTH_INVALID", refused.Error.Data["code"])
	unsaid := list(testfake.KeyScopeUnsaid, listToolsMsg)
	require.Nil(t, unsaid.Result, "a refusal naming no tools lists nothing")
	require.Equal(t, transport.ListRefusedCode, unsaid.Error.Code)
	require.Equal(t, "AUTH_INVALID", unsaid.Error.Data["code"])
	require.Equal(t, "TOOL_NOT_ALLOWED", unsaid.Error.Data["details"].(map[string]any)["reason"])
	require.Equal(t, "This API key may not use tools/list.", unsaid.Error.Message)

	env.Stop("auth")
	callErr := call(t, srv.URL, map[string]string{"X-API-Key": testfake.KeyGood}, tools.ToolGetChunks,
		map[string]any{"chunk_ids": []any{1001}})["error"].(map[string]any)
	require.Equal(t, "SERVICE_UNAVAILABLE", callErr["code"])
	for _, body := range []string{listToolsMsg, listTemplatesMsg} {
		a := list(testfake.KeyGood, body)
		require.Nil(t, a.Result, "no list at all")
		require.NotNil(t, a.Error)
		require.Equal(t, transport.ListRefusedCode, a.Error.Code)
		require.Equal(t, callErr["code"], a.Error.Data["code"])
		require.Equal(t, true, a.Error.Data["retryable"])
		require.Equal(t, callErr["message"], a.Error.Data["message"])
		require.Equal(t, callErr["message"], a.Error.Message)
	}
}
