package transport_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/origin"

	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
)

// guarded is the handler as the binary serves it: the Origin check around
// the MCP routes.
func guarded(t *testing.T) *httptest.Server {
	env := testfake.Start(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{Clients: env.Clients, Key: tools.APIKeyFromContext, Logger: logger})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = transport.CheckOrigin(origin.New(srv.Listener.Addr().String(), "https://claude.example.com"),
		transport.HTTPHandler(m, env.Clients, logger, 0, nil))
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body) // to EOF: the answer ends
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

const listTools = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

func TestOriginAllowList(t *testing.T) {
	srv := guarded(t)
	own := "http://" + srv.Listener.Addr().String()
	cases := []struct {
		name, path, origin string
		want               int
	}{
		{"no origin", "/mcp", "", http.StatusOK},
		{"allowed origin", "/mcp", "https://claude.example.com", http.StatusOK},
		{"own origin", "/mcp", own, http.StatusOK},
		{"bad origin", "/mcp", "https://evil.example.com", http.StatusForbidden},
		{"bad origin on health", "/healthz", "https://evil.example.com", http.StatusForbidden},
		{"null origin", "/mcp", "null", http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := http.MethodPost
			if c.path != "/mcp" {
				method = http.MethodGet
			}
			var h []string
			if c.origin != "" {
				h = []string{"Origin", c.origin}
			}
			code, _, body := do(t, method, srv.URL+c.path, listTools, h...)
			require.Equal(t, c.want, code, body)
		})
	}
}

// GET /mcp (an event stream on a stateful server) answers 405 at once and
// ends; so do the other methods but POST.
func TestGETOnMCPDoesNotHoldTheConnection(t *testing.T) {
	srv := guarded(t)
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		code, h, body := do(t, m, srv.URL+"/mcp", "", "Accept", "text/event-stream")
		require.Equal(t, http.StatusMethodNotAllowed, code, m)
		require.Equal(t, http.MethodPost, h.Get("Allow"))
		require.Contains(t, body, "stateless", m)
	}
}

// MCP-Protocol-Version: a version the server does not speak is 400; no
// header means the transport's default; a supported one is served.
func TestProtocolVersionHeader(t *testing.T) {
	srv := guarded(t)
	cases := []struct {
		name, version string
		want          int
	}{
		{"absent", "", http.StatusOK},
		{"supported", "2025-06-18", http.StatusOK},
		{"older supported", "2025-03-26", http.StatusOK},
		{"unsupported", "1999-01-01", http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h []string
			if c.version != "" {
				h = []string{"MCP-Protocol-Version", c.version}
			}
			code, _, body := do(t, http.MethodPost, srv.URL+"/mcp", listTools, h...)
			require.Equal(t, c.want, code, body)
			if c.want == http.StatusOK {
				require.Contains(t, body, tools.ToolSemanticSearch)
			}
		})
	}
}
