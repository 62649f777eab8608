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

	"github.com/bmcis/knowledge/mcp-adapter/internal/oauth"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
	"github.com/bmcis/knowledge/platform/deadaddr"
)

// The OAuth guard in front of the endpoint, without a reachable issuer
// (a loopback port that refuses connections): metadata is served, a missing
// credential is challenged, API keys pass untouched, and a token that
// cannot be checked answers 503 with Retry-After, not 401 (the token may
// be fine; the client must not throw it away). The real provider is in
// mcp-adapter/e2e (TestOAuthResourceServer).
func TestOAuthGuard(t *testing.T) {
	issuer := "http://" + deadaddr.Loopback(t)
	v := oauth.New(oauth.Config{Issuer: issuer, Resource: "https://kb.example.com/mcp"})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := oauth.FromContext(r.Context())
		_, _ = io.WriteString(w, "inner "+map[bool]string{true: "with identity", false: "without identity"}[ok])
	})
	srv := httptest.NewServer(transport.WithOAuth(v, inner, slog.New(slog.DiscardHandler), nil))
	defer srv.Close()

	do := func(method, path string, header ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}

	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, body := do(http.MethodGet, p)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		var meta map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &meta))
		require.Equal(t, "https://kb.example.com/mcp", meta["resource"])
		require.Equal(t, []any{issuer}, meta["authorization_servers"])
		require.Equal(t, []any{"kb:read"}, meta["scopes_supported"])
	}
	resp, _ := do(http.MethodPost, "/.well-known/oauth-protected-resource")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	for _, tc := range []struct {
		name   string
		header []string
		code   int
		body   string
	}{
		{"no credential", nil, http.StatusUnauthorized, "authorization required"},
		{"API key header", []string{"X-API-Key", "bmcis_abc_def"}, http.StatusOK, "inner without identity"},
		{"API key as bearer", []string{"Authorization", "Bearer bmcis_abc_def"}, http.StatusOK, "inner without identity"},
		// An access token's header: it may be valid once the keys come.
		{"token, issuer unreachable", []string{"Authorization", "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9.e30.c2ln"}, http.StatusServiceUnavailable, "retry shortly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(http.MethodPost, "/mcp", tc.header...)
			require.Equal(t, tc.code, resp.StatusCode, body)
			require.Contains(t, body, tc.body)
			switch tc.code {
			case http.StatusUnauthorized:
				require.Equal(t, `Bearer resource_metadata="https://kb.example.com/.well-known/oauth-protected-resource/mcp", scope="kb:read"`, resp.Header.Get("WWW-Authenticate"))
			case http.StatusServiceUnavailable:
				require.Equal(t, "5", resp.Header.Get("Retry-After"))
				require.Empty(t, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	resp, body := do(http.MethodGet, "/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode, "other paths are not guarded")
	require.Equal(t, "inner without identity", body)
}
