package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/bridge"
	"github.com/bmcis/knowledge/mcp-adapter/internal/cursor"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
	"github.com/bmcis/knowledge/platform/deadaddr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// endpoint is the adapter's streamable-HTTP server over stand-in backends.
func endpoint(t *testing.T) string {
	env := testfake.Start(t)
	codec, err := cursor.New([]byte("0123456789abcdef0123"))
	require.NoError(t, err)
	opts := tools.Options{
		Clients: env.Clients, Key: tools.APIKeyFromContext, KeyHint: transport.HTTPKeyHint,
		Cursors: codec, Thresholds: warnings.Defaults, Desktop: true, Logger: quiet,
	}
	srv := httptest.NewServer(transport.HTTPHandler(tools.New(opts), env.Clients, quiet, 0, tools.NewListScope(opts)))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// desktop connects an MCP client to the bridge's server, as Claude Desktop
// does over stdio.
func desktop(t *testing.T, o bridge.Options) *client.Client {
	return desktopNamed(t, o, "desktop")
}

// desktopNamed is desktop with the client name the Desktop's initialize
// gives.
func desktopNamed(t *testing.T, o bridge.Options, name string) *client.Client {
	o.Logger = quiet
	if o.KeyHint == "" {
		o.KeyHint = transport.StdioKeyHint
	}
	b := bridge.New(o)
	t.Cleanup(b.Close)
	c, err := client.NewInProcessClient(b.Server())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var env map[string]any
	require.NoError(t, json.Unmarshal(b, &env))
	return res, env
}

func errCode(env map[string]any) string {
	e, _ := env["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestForwardsToTheEndpoint(t *testing.T) {
	c := desktop(t, bridge.Options{URL: endpoint(t), APIKey: testfake.KeyGood})
	ctx := context.Background()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	require.Len(t, list.Tools, 3)

	res, env := callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "incident", "page_size": 3, "response_mode": "ids_only"})
	require.False(t, res.IsError)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	require.Len(t, env["results"], 3)
	require.NotNil(t, res.StructuredContent, "structuredContent crosses the bridge")
	cur := env["pagination"].(map[string]any)["cursor"].(string)
	_, env = callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "incident", "cursor": cur})
	require.Equal(t, 4.0, env["results"].([]any)[0].(map[string]any)["rank"])

	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "kb://chunks/1001"
	read, err := c.ReadResource(ctx, rr)
	require.NoError(t, err)
	require.Len(t, read.Contents, 2)

	// The endpoint's own denials come back unchanged.
	c2 := desktop(t, bridge.Options{URL: endpoint(t), APIKey: "bmcis_wrong_key"})
	_, env = callTool(t, c2, tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	require.Equal(t, "AUTH_INVALID", errCode(env))
}

func TestFailuresAreEnvelopes(t *testing.T) {
	dead := "http://" + deadaddr.Loopback(t) + "/mcp"
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(unavailable.Close)
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); slow.Close() })
	// BMCIS_MCP_URL naming another web server (the gateway, a wrong path):
	// retrying cannot help, so the answer says to check the URL.
	notMCP := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notMCP.Close)

	cases := []struct {
		name, url, key, code, message string
		retryable                     bool
	}{
		{"unreachable", dead, testfake.KeyGood, "SERVICE_UNAVAILABLE", "could not be reached", true},
		{"HTTP 503", unavailable.URL, testfake.KeyGood, "SERVICE_UNAVAILABLE", "answered with an error", true},
		{"timeout", slow.URL, testfake.KeyGood, "SERVICE_UNAVAILABLE", "did not answer in time", true},
		{"not an MCP endpoint", notMCP.URL + "/v1", testfake.KeyGood, "SERVICE_UNAVAILABLE", "BMCIS_MCP_URL does not name an MCP endpoint: it answered HTTP 404", false},
		{"no key", dead, "", "AUTH_REQUIRED", "API key", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := desktop(t, bridge.Options{URL: tc.url, APIKey: tc.key, Timeout: time.Second})
			for _, tool := range []string{tools.ToolSemanticSearch, tools.ToolGetChunks} {
				res, env := callTool(t, c, tool, map[string]any{"query": "backups", "chunk_ids": []any{1}, "format": "markdown"})
				require.True(t, res.IsError)
				require.Equal(t, tc.code, errCode(env), "%v", env)
				require.Contains(t, env["error"].(map[string]any)["message"], tc.message)
				require.Equal(t, tc.retryable, env["error"].(map[string]any)["retryable"])
				require.Equal(t, tool, env["_metadata"].(map[string]any)["operation"])
				require.Len(t, res.Content, 1, "format markdown: one text block")
			}
			rr := mcp.ReadResourceRequest{}
			rr.Params.URI = "kb://vendors/Acme"
			read, err := c.ReadResource(context.Background(), rr)
			require.NoError(t, err, "a resource read is answered too")
			var env map[string]any
			require.NoError(t, json.Unmarshal([]byte(read.Contents[len(read.Contents)-1].(mcp.TextResourceContents).Text), &env))
			require.Equal(t, tc.code, errCode(env))
		})
	}
}

// A redirect from the endpoint is refused before anything goes to its
// target: Go would re-send X-API-Key to any host and scheme, here a plain
// http server.
func TestRefusesRedirects(t *testing.T) {
	reached := make(chan http.Header, 10)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Header.Clone()
		http.Error(w, "no", http.StatusTeapot)
	}))
	t.Cleanup(plain.Close)
	keys := make(chan string, 10)
	redirecting := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("X-API-Key")
		http.Redirect(w, r, plain.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirecting.Close)

	b := bridge.New(bridge.Options{URL: redirecting.URL + "/mcp", APIKey: testfake.KeyGood, KeyHint: transport.StdioKeyHint, Timeout: 5 * time.Second, Logger: quiet})
	bridge.SetTransport(b, redirecting.Client().Transport)
	t.Cleanup(b.Close)
	c, err := client.NewInProcessClient(b.Server())
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "desktop", Version: "1"}
	_, err = c.Initialize(context.Background(), init)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	res, env := callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	// The target answers before the client sees its response, so anything
	// it received is in reached by now.
	select {
	case h := <-reached:
		t.Fatalf("the redirect target was reached (X-API-Key %q)", h.Get("X-API-Key"))
	default:
	}
	require.True(t, res.IsError)
	require.Equal(t, "SERVICE_UNAVAILABLE", errCode(env), "%v", env)
	e := env["error"].(map[string]any)
	require.Contains(t, e["message"], "redirect to "+plain.Listener.Addr().String())
	require.Equal(t, false, e["retryable"])
	text, err := json.Marshal(res)
	require.NoError(t, err)
	require.NotContains(t, string(text), testfake.KeyGood)
	require.Equal(t, testfake.KeyGood, <-keys, "the endpoint itself got the key")
}

// TestPassesTheDesktopsName: the endpoint (its audit trail) sees the
// Desktop's own name with the bridge's, made valid UTF-8 without control
// characters and bounded, so the bridge's part always survives.
func TestPassesTheDesktopsName(t *testing.T) {
	cases := []struct{ name, desktop, want string }{
		{"Claude Desktop", "claude-ai", "claude-ai via bmcis-knowledge-bridge"},
		{"no name", "", "bmcis-knowledge-bridge"},
		{"blank", "  \t ", "bmcis-knowledge-bridge"},
		{"control characters", "evil\nname\x00", "evil\uFFFDname\uFFFD via bmcis-knowledge-bridge"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb via bmcis-knowledge-bridge"},
		{"long, cut on a rune boundary", strings.Repeat("é", 150), strings.Repeat("é", 100) + " via bmcis-knowledge-bridge"},
		{"long, odd bytes", "x" + strings.Repeat("é", 150), "x" + strings.Repeat("é", 99) + " via bmcis-knowledge-bridge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			names := make(chan string, 4)
			c := desktopNamed(t, bridge.Options{URL: endpointSeeing(t, names), APIKey: testfake.KeyGood}, tc.desktop)
			_, env := callTool(t, c, tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
			require.Equal(t, "success", env["_metadata"].(map[string]any)["status"], "%v", env)
			got := <-names
			require.Equal(t, tc.want, got)
			require.True(t, utf8.ValidString(got))
			require.LessOrEqual(t, len(got), 256, "auth keeps 256 bytes of a client name")
		})
	}
}

// endpointSeeing is endpoint, sending to names the client name each
// tools/call carries (protocol 2026-07-28 on, which the bridge negotiates
// with the adapter: the name the audit trail records) or an initialize
// gives (earlier protocols).
func endpointSeeing(t *testing.T, names chan<- string) string {
	target, err := url.Parse(endpoint(t))
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var msg struct {
			Method string `json:"method"`
			Params struct {
				ClientInfo *mcp.Implementation        `json:"clientInfo"`
				Meta       map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil {
			switch {
			case msg.Method == "initialize" && msg.Params.ClientInfo != nil:
				names <- msg.Params.ClientInfo.Name
			case msg.Method == "tools/call":
				var info mcp.Implementation
				require.NoError(t, json.Unmarshal(msg.Params.Meta[mcp.MetaKeyClientInfo], &info))
				names <- info.Name
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// TestAnswersInTheDesktopsProtocol: the Desktop negotiated 2025-06-18 with
// the bridge, which speaks 2026-07-28 with the endpoint; the answers it
// passes on carry nothing of the newer protocol (resultType, the
// serverInfo with its icon in _meta), which would cost bytes and tokens
// on every call.
func TestAnswersInTheDesktopsProtocol(t *testing.T) {
	b := bridge.New(bridge.Options{URL: endpoint(t), APIKey: testfake.KeyGood, KeyHint: transport.StdioKeyHint, Logger: quiet})
	t.Cleanup(b.Close)
	c, err := client.NewInProcessClient(b.Server())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-06-18"
	init.Params.ClientInfo = mcp.Implementation{Name: "claude-ai", Version: "1"}
	got, err := c.Initialize(ctx, init)
	require.NoError(t, err)
	require.Equal(t, "2025-06-18", got.ProtocolVersion)
	t.Cleanup(func() { _ = c.Close() })

	res, env := callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "incident", "page_size": 2, "response_mode": "ids_only"})
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"])
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "resultType")
	require.NotContains(t, string(raw), mcp.MetaKeyServerInfo)
	require.NotContains(t, string(raw), "base64")
}

// TestClassifiesTheEndpointsHTTPStatus: mcp-go reads any 4xx to initialize
// as "no streamable HTTP here"; the bridge tells a proxy's refusal (401,
// 403), a retryable answer (408, 429, 5xx, with Retry-After) and a URL
// that names no MCP endpoint apart, never echoing the key.
func TestClassifiesTheEndpointsHTTPStatus(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		header      map[string]string
		body        string
		code        string
		reason      string // details.reason, for AUTH_INVALID
		message     string
		retryable   bool
		resetInSecs int // 0: no reset_in_seconds
	}{
		{name: "401 from a proxy", status: 401, code: "AUTH_INVALID", reason: "HTTP_401", message: "refused the API key (HTTP 401)"},
		{name: "403 from a WAF", status: 403, code: "AUTH_INVALID", reason: "HTTP_403", message: "refused access (HTTP 403)"},
		{name: "404", status: 404, code: "SERVICE_UNAVAILABLE", message: "BMCIS_MCP_URL does not name an MCP endpoint: it answered HTTP 404"},
		{name: "405", status: 405, code: "SERVICE_UNAVAILABLE", message: "BMCIS_MCP_URL does not name an MCP endpoint: it answered HTTP 405"},
		{name: "400 without JSON-RPC", status: 400, body: "bad request", code: "SERVICE_UNAVAILABLE", message: "BMCIS_MCP_URL does not name an MCP endpoint: it answered HTTP 400"},
		{name: "400 with a JSON-RPC error", status: 400, header: map[string]string{"Content-Type": "application/json"},
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Unsupported protocol version"}}`,
			code: "SERVICE_UNAVAILABLE", message: "HTTP 400 with a JSON-RPC error), most likely a protocol version"},
		{name: "200 HTML page", status: 200, header: map[string]string{"Content-Type": "text/html"}, body: "<html></html>",
			code: "SERVICE_UNAVAILABLE", message: "BMCIS_MCP_URL does not name an MCP endpoint: it answered HTTP 200 with text/html"},
		{name: "408", status: 408, code: "SERVICE_UNAVAILABLE", message: "gave up waiting for the request (HTTP 408)", retryable: true},
		{name: "429 without Retry-After", status: 429, code: "SERVICE_UNAVAILABLE", message: "limiting requests (HTTP 429)", retryable: true},
		{name: "429 with Retry-After", status: 429, header: map[string]string{"Retry-After": "7"}, code: "SERVICE_UNAVAILABLE", message: "limiting requests (HTTP 429)", retryable: true, resetInSecs: 7},
		{name: "429 with a huge Retry-After", status: 429, header: map[string]string{"Retry-After": "86400"}, code: "SERVICE_UNAVAILABLE", message: "limiting requests (HTTP 429)", retryable: true, resetInSecs: 60},
		{name: "500", status: 500, code: "SERVICE_UNAVAILABLE", message: "answered with an error (HTTP 500)", retryable: true},
		{name: "502", status: 502, code: "SERVICE_UNAVAILABLE", message: "answered with an error (HTTP 502)", retryable: true},
		{name: "503 with a Retry-After date", status: 503, header: map[string]string{"Retry-After": time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat)},
			code: "SERVICE_UNAVAILABLE", message: "answered with an error (HTTP 503)", retryable: true, resetInSecs: 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			c := desktop(t, bridge.Options{URL: srv.URL + "/mcp", APIKey: testfake.KeyGood, Timeout: 5 * time.Second})
			res, env := callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "backups"})
			require.True(t, res.IsError)
			e := env["error"].(map[string]any)
			require.Equal(t, tc.code, e["code"], "%v", env)
			require.Contains(t, e["message"], tc.message)
			require.Equal(t, tc.retryable, e["retryable"])
			if tc.reason != "" {
				require.Equal(t, tc.reason, e["details"].(map[string]any)["reason"])
				require.Contains(t, e["suggestion"], "API key")
			}
			if strings.Contains(tc.message, "not an MCP endpoint") {
				// The user's own setting is wrong: the suggestion names it,
				// not only "contact the administrator".
				require.Contains(t, e["suggestion"], "Server URL setting, or BMCIS_MCP_URL")
				// The endpoint answered: it is the URL that is wrong, not
				// a service that is down.
				require.NotContains(t, e["message"], "unavailable")
			}
			if tc.resetInSecs > 0 {
				// An HTTP date is read to the second, so 20 s may be 19.
				require.InDelta(t, tc.resetInSecs, e["reset_in_seconds"], 1)
				require.Contains(t, e["suggestion"], "Retry in")
			} else {
				require.NotContains(t, e, "reset_in_seconds")
			}
			raw, err := json.Marshal(res)
			require.NoError(t, err)
			require.NotContains(t, string(raw), testfake.KeyGood)
		})
	}
}

// TestKeepsTheEndpointsRetryAfter: in front of the real adapter, a proxy
// answers 429 with Retry-After: 1 until the test lets it through. A call
// within that second is answered without reaching it; the first call after
// it reaches the adapter.
func TestKeepsTheEndpointsRetryAfter(t *testing.T) {
	target, err := url.Parse(endpoint(t))
	require.NoError(t, err)
	adapter := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	// Switched by the test, not by a clock: a slow start on a loaded
	// machine must not let the first call through.
	var limiting atomic.Bool
	limiting.Store(true)
	hits := make(chan struct{}, 100)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- struct{}{}
		if limiting.Load() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		adapter.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c := desktop(t, bridge.Options{URL: proxy.URL + target.Path, APIKey: testfake.KeyGood})

	args := map[string]any{"chunk_ids": []any{1001}}
	_, env := callTool(t, c, tools.ToolGetChunks, args)
	answered := time.Now() // the bridge's pause ends a second after the 429, so before this + 1 s
	e := env["error"].(map[string]any)
	require.Equal(t, "SERVICE_UNAVAILABLE", e["code"], "%v", env)
	require.Contains(t, e["message"], "HTTP 429")
	require.Equal(t, true, e["retryable"])
	require.Equal(t, 1.0, e["reset_in_seconds"])
	reached := len(hits)
	require.Positive(t, reached)

	_, env = callTool(t, c, tools.ToolGetChunks, args)
	e = env["error"].(map[string]any)
	require.Contains(t, e["message"], "Retry-After")
	require.Equal(t, true, e["retryable"])
	require.Equal(t, 1.0, e["reset_in_seconds"])
	require.Len(t, hits, reached, "the call within Retry-After did not reach the endpoint")

	limiting.Store(false)
	time.Sleep(time.Until(answered.Add(time.Second)) + 50*time.Millisecond)
	_, env = callTool(t, c, tools.ToolGetChunks, args)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"], "%v", env)
}

// TestRetryAfterHoldsEveryConnection: the endpoint's Retry-After holds
// the bridge back from it whichever of its two connections a request
// would take. A Desktop that elicits calls tools through one and reads
// resources through the other; after a 429 to a call, a read asks the
// endpoint nothing either until the pause has passed.
func TestRetryAfterHoldsEveryConnection(t *testing.T) {
	target, err := url.Parse(endpoint(t))
	require.NoError(t, err)
	adapter := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var limiting atomic.Bool
	var hits atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if limiting.Load() {
			w.Header().Set("Retry-After", "60") // far beyond the test: no clock decides it
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		adapter.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	b := bridge.New(bridge.Options{URL: proxy.URL + target.Path, APIKey: testfake.KeyGood, Logger: quiet, KeyHint: transport.StdioKeyHint})
	t.Cleanup(b.Close)
	decline := elicitationFunc(func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	})
	c, err := client.NewInProcessClientWithOptions(b.Server(), client.WithElicitationHandler(decline))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "desktop", Version: "1"}
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	_, err = c.Initialize(ctx, init)
	require.NoError(t, err)

	read := func() map[string]any {
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = "kb://chunks/1001"
		res, err := c.ReadResource(ctx, rr)
		require.NoError(t, err)
		var env map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Contents[len(res.Contents)-1].(mcp.TextResourceContents).Text), &env))
		return env
	}
	args := map[string]any{"chunk_ids": []any{1001}}
	_, env := callTool(t, c, tools.ToolGetChunks, args)
	require.Equal(t, "success", env["_metadata"].(map[string]any)["status"], "%v", env)
	require.Empty(t, errCode(read()), "both connections are open")

	limiting.Store(true)
	_, env = callTool(t, c, tools.ToolGetChunks, args)
	require.Contains(t, env["error"].(map[string]any)["message"], "HTTP 429")
	reached := hits.Load()

	env = read()
	require.Equal(t, "SERVICE_UNAVAILABLE", errCode(env), "%v", env)
	require.Contains(t, env["error"].(map[string]any)["message"], "Retry-After")
	require.Equal(t, reached, hits.Load(), "the read within Retry-After did not reach the endpoint")
}

// elicitationFunc is a client.ElicitationHandler of a function.
type elicitationFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitationFunc) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, req)
}

// TestOwnAnswersInEitherProtocol: the envelopes the bridge makes itself
// (no key, the endpoint unreachable), as they go over stdio, carry
// resultType (and the serverInfo _meta) for a Desktop that negotiated
// 2026-07-28, as its forwarded answers do, and nothing of that protocol
// for an older one. mcp-go's server stamps them
// (server.decorateResponse, for every result of a 2026-07-28 request).
func TestOwnAnswersInEitherProtocol(t *testing.T) {
	dead := "http://" + deadaddr.Loopback(t) + "/mcp"
	for _, tc := range []struct {
		protocol, want string // want: "" for the protocol the Desktop gets when it asks none
		modern         bool
	}{
		{protocol: "", want: mcp.LATEST_PROTOCOL_VERSION, modern: true},
		{protocol: "2025-06-18", want: "2025-06-18"},
	} {
		for _, key := range []string{"", testfake.KeyGood} {
			t.Run(tc.want+" key "+map[bool]string{true: "set", false: "unset"}[key != ""], func(t *testing.T) {
				lines := stdioDesktop(t, bridge.Options{URL: dead, APIKey: key, Timeout: time.Second}, tc.protocol, tc.want)
				require.Len(t, lines, 2, "a tools/call and a resources/read answer")
				for _, line := range lines {
					var msg struct {
						Result map[string]json.RawMessage `json:"result"`
					}
					require.NoError(t, json.Unmarshal([]byte(line), &msg), line)
					require.NotNil(t, msg.Result, line)
					if tc.modern {
						require.JSONEq(t, `"complete"`, string(msg.Result["resultType"]), line)
						require.Contains(t, string(msg.Result["_meta"]), mcp.MetaKeyServerInfo)
					} else {
						require.NotContains(t, msg.Result, "resultType")
						require.NotContains(t, msg.Result, "_meta")
					}
				}
				code := map[bool]string{true: "SERVICE_UNAVAILABLE", false: "AUTH_REQUIRED"}[key != ""]
				require.Contains(t, lines[0], `"code":"`+code+`"`)
			})
		}
	}
}

// stdioDesktop runs the bridge behind transport.ServeStdio, the way the
// binary serves Claude Desktop, initializes asking protocol (the newest
// when empty), calls get_chunks and reads a chunk, and returns the raw
// stdout lines of those two answers.
func stdioDesktop(t *testing.T, o bridge.Options, protocol, want string) []string {
	o.Logger, o.KeyHint = quiet, transport.StdioKeyHint
	b := bridge.New(o)
	t.Cleanup(b.Close)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- transport.ServeStdio(ctx, b.Server(), inR, outW, quiet) }()
	t.Cleanup(func() { cancel(); _ = inW.Close(); _ = outW.Close(); <-served })
	lines := make(chan string, 16)
	tee := io.TeeReader(outR, &lineWriter{lines: lines})
	c := client.NewClient(mcptransport.NewIO(tee, inW, io.NopCloser(strings.NewReader(""))))
	require.NoError(t, c.Start(ctx))
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocol
	init.Params.ClientInfo = mcp.Implementation{Name: "claude-ai", Version: "1"}
	got, err := c.Initialize(ctx, init)
	require.NoError(t, err)
	require.Equal(t, want, got.ProtocolVersion)
	for len(lines) > 0 { // the handshake's
		<-lines
	}
	callTool(t, c, tools.ToolGetChunks, map[string]any{"chunk_ids": []any{1001}})
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "kb://chunks/1001"
	_, err = c.ReadResource(ctx, rr)
	require.NoError(t, err)
	return []string{<-lines, <-lines}
}

// lineWriter sends each whole line written to it to lines (a read of
// the pipe may end mid-line).
type lineWriter struct {
	lines   chan<- string
	pending []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.pending[:i])
		w.pending = w.pending[i+1:]
	}
}

// The bridge lists, of its offline catalogue, what the endpoint lists for
// the key: all of it, byte for byte, for a key with every tool; only
// find_vendor_info and its template for a key limited to it; the whole
// catalogue, offline, without a key or when the endpoint is down (the
// endpoint still checks every call).
func TestListsWhatTheEndpointListsForTheKey(t *testing.T) {
	url := endpoint(t)
	offline := desktop(t, bridge.Options{URL: "http://" + deadaddr.Loopback(t) + "/mcp", APIKey: testfake.KeyGood})
	all, err := offline.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	require.Len(t, all.Tools, 3)
	allTemplates, err := offline.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	require.Len(t, allTemplates.ResourceTemplates, 2)
	cases := []struct {
		name      string
		o         bridge.Options
		tools     []string
		templates []string
	}{
		{"every tool", bridge.Options{URL: url, APIKey: testfake.KeyGood}, nil, nil},
		{"no key", bridge.Options{URL: url}, nil, nil},
		{"endpoint down", bridge.Options{URL: "http://" + deadaddr.Loopback(t) + "/mcp", APIKey: testfake.KeyGood}, nil, nil},
		{"vendor only", bridge.Options{URL: url, APIKey: testfake.KeyVendorOnly}, []string{tools.ToolFindVendorInfo}, []string{tools.VendorURITemplate}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := desktop(t, tc.o)
			list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
			require.NoError(t, err)
			templates, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
			require.NoError(t, err)
			if tc.tools == nil {
				want, _ := json.Marshal(all)
				got, _ := json.Marshal(list)
				require.Equal(t, string(want), string(got), "the offline catalogue, unchanged")
				want, _ = json.Marshal(allTemplates)
				got, _ = json.Marshal(templates)
				require.Equal(t, string(want), string(got))
				return
			}
			var names, uris []string
			for _, tool := range list.Tools {
				names = append(names, tool.Name)
			}
			for _, tmpl := range templates.ResourceTemplates {
				uris = append(uris, tmpl.URITemplate.Raw())
			}
			require.Equal(t, tc.tools, names)
			require.Equal(t, tc.templates, uris)
		})
	}
}

// TestLogsTheEndpointsHTTPStatus: the operator's log line for a failed
// call or list names what the user was told (the status), not only the
// MCP client's own wording, which reads every 4xx to initialize as "likely
// a legacy SSE server"; never the key.
func TestLogsTheEndpointsHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusTooManyRequests, "limiting requests (HTTP 429)"},
		{http.StatusForbidden, "refused access (HTTP 403)"},
		{http.StatusNotFound, "does not name an MCP endpoint: it answered HTTP 404"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			var logs lockedBuffer
			b := bridge.New(bridge.Options{URL: srv.URL + "/mcp", APIKey: testfake.KeyGood, KeyHint: transport.StdioKeyHint,
				Timeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			t.Cleanup(b.Close)
			c, err := client.NewInProcessClient(b.Server())
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			require.NoError(t, c.Start(ctx))
			_, err = c.Initialize(ctx, mcp.InitializeRequest{})
			require.NoError(t, err)
			_, err = c.ListTools(ctx, mcp.ListToolsRequest{})
			require.NoError(t, err)
			callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "backups"})

			var list, call string
			for _, line := range strings.Split(logs.String(), "\n") {
				switch {
				case strings.Contains(line, "endpoint tools/list"):
					list = line
				case strings.Contains(line, "MCP endpoint call failed"):
					call = line
				}
			}
			require.Contains(t, list, tc.want, "%s", logs.String())
			require.Contains(t, call, tc.want, "%s", logs.String())
			require.NotContains(t, logs.String(), testfake.KeyGood)
		})
	}
}

// lockedBuffer is a bytes.Buffer the bridge's goroutines may log to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestListKeepsTheEndpointsRetryAfter: a 429 with Retry-After to the
// endpoint tools/list a Desktop's list asks pauses the bridge as a call's
// does: the templates list and the first call that follow ask nothing.
func TestListKeepsTheEndpointsRetryAfter(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return hits
	}
	c := desktop(t, bridge.Options{URL: srv.URL + "/mcp", APIKey: testfake.KeyGood, Timeout: 5 * time.Second})
	_, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	reached := count()
	require.Positive(t, reached)
	_, err = c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	_, env := callTool(t, c, tools.ToolSemanticSearch, map[string]any{"query": "backups"})
	e := env["error"].(map[string]any)
	require.Contains(t, e["message"], "Retry-After")
	require.InDelta(t, 30, e["reset_in_seconds"], 1)
	require.Equal(t, reached, count(), "nothing asked within the endpoint's Retry-After")
}

// TestDesktopStartAsksTheEndpointsListOnce: a Desktop lists tools, then
// templates, at start; both narrow from one endpoint tools/list (which
// costs an unscoped key a rate-limit unit), not one each.
func TestDesktopStartAsksTheEndpointsListOnce(t *testing.T) {
	target, err := url.Parse(endpoint(t))
	require.NoError(t, err)
	adapter := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var mu sync.Mutex
	lists := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"method":"tools/list"`) {
			mu.Lock()
			lists++
			mu.Unlock()
		}
		adapter.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	c := desktop(t, bridge.Options{URL: proxy.URL + target.Path, APIKey: testfake.KeyVendorOnly})
	list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	require.Len(t, list.Tools, 1)
	templates, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	require.NoError(t, err)
	require.Len(t, templates.ResourceTemplates, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, lists)
}
