package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	platform "github.com/bmcis/knowledge/platform/config"

	"github.com/bmcis/knowledge/mcp-adapter/internal/config"
)

func TestOAuth(t *testing.T) {
	httpEnv := func(extra map[string]string) map[string]string {
		m := map[string]string{
			config.EnvServiceToken: token,
			config.EnvTransport:    "http",
			config.EnvCursorSecret: "cursor-secret-0123456789abcdef0123456789",
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		bad    []string
		expect config.OAuthConfig
	}{
		{"off by default", httpEnv(nil), nil, config.OAuthConfig{Scopes: []string{"kb:read"}, KeyRefreshInterval: 5 * time.Second, GroupsClaim: "groups"}},
		{"on", httpEnv(map[string]string{
			config.EnvOAuthIssuer: "https://idp.example.com/realms/kb", config.EnvOAuthResource: "https://kb.example.com/mcp",
			config.EnvOAuthScopes: "kb:read, kb:read:security", config.EnvOAuthKeyRefresh: "1m",
		}), nil, config.OAuthConfig{Issuer: "https://idp.example.com/realms/kb", Resource: "https://kb.example.com/mcp", Scopes: []string{"kb:read", "kb:read:security"}, KeyRefreshInterval: time.Minute, GroupsClaim: "groups"}},
		{"untyped tokens accepted", httpEnv(map[string]string{
			config.EnvOAuthIssuer: "https://idp.example.com", config.EnvOAuthResource: "https://kb.example.com/mcp", config.EnvOAuthUntypedTokens: "true",
			config.EnvOAuthGroupsClaim: "roles",
		}), nil, config.OAuthConfig{Issuer: "https://idp.example.com", Resource: "https://kb.example.com/mcp", Scopes: []string{"kb:read"}, KeyRefreshInterval: 5 * time.Second, AcceptUntypedTokens: true, GroupsClaim: "roles"}},
		{"untyped tokens not a boolean", httpEnv(map[string]string{
			config.EnvOAuthIssuer: "https://idp.example.com", config.EnvOAuthResource: "https://kb.example.com/mcp", config.EnvOAuthUntypedTokens: "sometimes",
		}), []string{config.EnvOAuthUntypedTokens}, config.OAuthConfig{}},
		{"http on loopback", httpEnv(map[string]string{
			config.EnvOAuthIssuer: "http://127.0.0.1:9000", config.EnvOAuthResource: "http://localhost:8090/mcp", config.EnvOAuthJWKSURL: "http://127.0.0.1:9000/jwks",
		}), nil, config.OAuthConfig{Issuer: "http://127.0.0.1:9000", Resource: "http://localhost:8090/mcp", JWKSURL: "http://127.0.0.1:9000/jwks", Scopes: []string{"kb:read"}, KeyRefreshInterval: 5 * time.Second, GroupsClaim: "groups"}},
		{"key refresh interval out of range", httpEnv(map[string]string{
			config.EnvOAuthIssuer: "https://idp.example.com", config.EnvOAuthResource: "https://kb.example.com/mcp", config.EnvOAuthKeyRefresh: "1ms",
		}), []string{config.EnvOAuthKeyRefresh}, config.OAuthConfig{}},
		{"no resource", httpEnv(map[string]string{config.EnvOAuthIssuer: "https://idp.example.com"}), []string{config.EnvOAuthResource}, config.OAuthConfig{}},
		{"plain http elsewhere", httpEnv(map[string]string{config.EnvOAuthIssuer: "http://idp.example.com", config.EnvOAuthResource: "http://kb.example.com/mcp"}),
			[]string{config.EnvOAuthIssuer, config.EnvOAuthResource}, config.OAuthConfig{}},
		{"resource without issuer", httpEnv(map[string]string{config.EnvOAuthResource: "https://kb.example.com/mcp"}), []string{config.EnvOAuthResource}, config.OAuthConfig{}},
		{"stdio", map[string]string{config.EnvServiceToken: token, config.EnvOAuthIssuer: "https://idp.example.com", config.EnvOAuthResource: "https://kb.example.com/mcp"},
			[]string{config.EnvOAuthIssuer}, config.OAuthConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := platform.FromMap(tc.env)
			c := config.Load(env)
			if len(tc.bad) == 0 {
				require.NoError(t, env.Err())
				require.Equal(t, tc.expect, c.OAuth)
				return
			}
			require.Error(t, env.Err())
			for _, name := range tc.bad {
				require.Contains(t, env.Err().Error(), name)
			}
		})
	}
}
