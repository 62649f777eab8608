package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	platform "github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/connlimit"

	"github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
)

const token = "service-token-0123456789abcdef0123456789"

func TestDefaults(t *testing.T) {
	env := platform.FromMap(map[string]string{config.EnvServiceToken: token})
	c := config.Load(env)
	require.NoError(t, env.Err())
	require.Equal(t, config.TransportStdio, c.Transport)
	require.Equal(t, "127.0.0.1:50051", c.SearchAddr)
	require.Equal(t, "127.0.0.1:50052", c.VendorGraphAddr)
	require.Equal(t, "127.0.0.1:50053", c.AuthAddr)
	require.Equal(t, 15000, c.Thresholds.MaxTokens)
	require.Equal(t, 0.8, c.Thresholds.WarnRatio)
	require.Equal(t, 0.5, c.Thresholds.LowQuality)
	require.Equal(t, projection.Metadata, c.DefaultResponseMode)
	require.Equal(t, render.Markdown, c.DefaultFormat)
	require.True(t, c.Desktop)
	require.True(t, c.Signals.IncludeConfidence)
	require.True(t, c.CursorSecretGenerated, "stdio may run without a shared cursor secret")
	require.Len(t, c.CursorSecret, 32)
	require.Equal(t, "", c.APIKey)
	require.Equal(t, 1<<20, c.HTTPMaxBodyBytes)
	require.Equal(t, 30*time.Second, c.HTTPReadTimeout)
	require.Equal(t, 120*time.Second, c.HTTPIdleTimeout)
	require.Equal(t, connlimit.Limits{MaxConns: 512, MaxConnsPerClient: 128, ReadHeaderTimeout: 5 * time.Second}, c.HTTPConns)
	require.Equal(t, 5*time.Second, c.AllowCacheTTL)
	require.Equal(t, time.Second, c.KeyLease)
	require.Equal(t, time.Minute, c.AnswerCacheTTL)
	require.Equal(t, 32<<20, c.AnswerCacheBytes)
	require.Empty(t, c.AllowedOrigins)
}

// TestAnswerCacheSettings: 0 turns the answer cache off; a TTL past 10 min,
// a bound under 1 MiB or a value that is no number is refused, naming
// the variable.
func TestAnswerCacheSettings(t *testing.T) {
	cases := []struct {
		name, ttl, bytes string
		wantTTL          time.Duration
		wantBytes        int
		wantErr          string
	}{
		{name: "off", ttl: "0", bytes: "", wantTTL: 0, wantBytes: 32 << 20},
		{name: "longest", ttl: "10m", bytes: "1048576", wantTTL: 10 * time.Minute, wantBytes: 1 << 20},
		{name: "ttl too long", ttl: "11m", wantErr: config.EnvAnswerCacheTTL + ": must be between 0s and 10m0s, got 11m0s"},
		{name: "ttl no duration", ttl: "1", wantErr: config.EnvAnswerCacheTTL + ": must be a duration"},
		{name: "bytes too few", bytes: "1000", wantErr: config.EnvAnswerCacheBytes + ": must be between 1048576 and"},
		{name: "bytes with a unit", bytes: "32MiB", wantErr: config.EnvAnswerCacheBytes + ": must be an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{config.EnvServiceToken: token}
			if tc.ttl != "" {
				vars[config.EnvAnswerCacheTTL] = tc.ttl
			}
			if tc.bytes != "" {
				vars[config.EnvAnswerCacheBytes] = tc.bytes
			}
			env := platform.FromMap(vars)
			c := config.Load(env)
			if tc.wantErr != "" {
				require.ErrorContains(t, env.Err(), tc.wantErr)
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, tc.wantTTL, c.AnswerCacheTTL)
			require.Equal(t, tc.wantBytes, c.AnswerCacheBytes)
		})
	}
}

func TestValues(t *testing.T) {
	env := platform.FromMap(map[string]string{
		config.EnvServiceToken:                             token,
		config.EnvTransport:                                "HTTP",
		config.EnvHTTPAddr:                                 ":9000",
		config.EnvCursorSecret:                             "cursor-secret-0123456789abcdef0123456789",
		config.EnvMaxTokens:                                "20000",
		config.EnvWarnThreshold:                            "0.9",
		config.EnvCacheMissSlow:                            "100ms",
		config.EnvDesktop:                                  "false",
		config.EnvCategoryWeights:                          "Security=1, docs = 0.4",
		config.EnvDefaultResponseMode:                      "preview",
		config.EnvDefaultFormat:                            "json",
		config.EnvAPIKey:                                   "bmcis_k_s",
		config.EnvHTTPMaxBody:                              "65536",
		config.EnvHTTPReadTimeout:                          "5s",
		config.EnvHTTPIdleTimeout:                          "1m",
		config.EnvHTTPMaxConns:                             "64",
		config.EnvHTTPConnsPrefix + "MAX_CONNS_PER_CLIENT": "8",
		config.EnvHTTPConnsPrefix + "READ_HEADER_TIMEOUT":  "2s",
		config.EnvAllowedOrigins:                           "https://claude.example.com, http://localhost:3000",
		config.EnvKeyLease:                                 "0",
	})
	c := config.Load(env)
	require.NoError(t, env.Err())
	require.Equal(t, config.TransportHTTP, c.Transport)
	require.Equal(t, ":9000", c.HTTPAddr)
	require.Equal(t, []byte("cursor-secret-0123456789abcdef0123456789"), c.CursorSecret)
	require.Equal(t, 20000, c.Thresholds.MaxTokens)
	require.Equal(t, 0.9, c.Thresholds.WarnRatio)
	require.Equal(t, 100*time.Millisecond, c.Thresholds.CacheMissSlow)
	require.False(t, c.Desktop)
	require.Equal(t, map[string]float64{"security": 1, "docs": 0.4}, c.Signals.CategoryWeights)
	require.Equal(t, projection.Preview, c.DefaultResponseMode)
	require.Equal(t, render.JSON, c.DefaultFormat)
	require.Equal(t, "bmcis_k_s", c.APIKey)
	require.Equal(t, 65536, c.HTTPMaxBodyBytes)
	require.Equal(t, 5*time.Second, c.HTTPReadTimeout)
	require.Equal(t, time.Minute, c.HTTPIdleTimeout)
	require.Equal(t, connlimit.Limits{MaxConns: 64, MaxConnsPerClient: 8, ReadHeaderTimeout: 2 * time.Second}, c.HTTPConns)
	require.Equal(t, []string{"https://claude.example.com", "http://localhost:3000"}, c.AllowedOrigins)
	require.Zero(t, c.KeyLease, "0 turns leases off")
}

// TestKeyLeaseBounds: BMCIS_MCP_KEY_LEASE bounds how long a revoked key's
// calls may still pass, so a value past allowcache.MaxLease, negative or
// unreadable stops the adapter with an error naming it and its range.
func TestKeyLeaseBounds(t *testing.T) {
	for _, tc := range []struct {
		value, err string
	}{
		{"6s", "BMCIS_MCP_KEY_LEASE: must be between 0s and 5s, got 6s"},
		{"-1s", "BMCIS_MCP_KEY_LEASE: must be between 0s and 5s, got -1s"},
		{"soon", `BMCIS_MCP_KEY_LEASE: must be a duration such as 500ms or 30s, got "soon"`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			env := platform.FromMap(map[string]string{config.EnvServiceToken: token, config.EnvKeyLease: tc.value})
			config.Load(env)
			require.ErrorContains(t, env.Err(), tc.err)
		})
	}
	env := platform.FromMap(map[string]string{config.EnvServiceToken: token, config.EnvKeyLease: "5s"})
	require.Equal(t, 5*time.Second, config.Load(env).KeyLease)
	require.NoError(t, env.Err())
}

func TestInvalidValuesNameTheVariable(t *testing.T) {
	cases := map[string]map[string]string{
		config.EnvServiceToken:        {},
		config.EnvMaxTokens:           {config.EnvServiceToken: token, config.EnvMaxTokens: "lots"},
		config.EnvWarnThreshold:       {config.EnvServiceToken: token, config.EnvWarnThreshold: "1.5"},
		config.EnvTransport:           {config.EnvServiceToken: token, config.EnvTransport: "websocket"},
		config.EnvSearchAddr:          {config.EnvServiceToken: token, config.EnvSearchAddr: "nohostport"},
		config.EnvCursorSecret:        {config.EnvServiceToken: token, config.EnvTransport: "http"},
		config.EnvCategoryWeights:     {config.EnvServiceToken: token, config.EnvCategoryWeights: "security=2"},
		config.EnvDesktop:             {config.EnvServiceToken: token, config.EnvDesktop: "maybe"},
		config.EnvDefaultResponseMode: {config.EnvServiceToken: token, config.EnvDefaultResponseMode: "all"},
		config.EnvHTTPMaxBody:         {config.EnvServiceToken: token, config.EnvHTTPMaxBody: "1000000000"},
		config.EnvHTTPReadTimeout:     {config.EnvServiceToken: token, config.EnvHTTPReadTimeout: "0s"},
		config.EnvHTTPIdleTimeout:     {config.EnvServiceToken: token, config.EnvHTTPIdleTimeout: "forever"},
		config.EnvHTTPMaxConns:        {config.EnvServiceToken: token, config.EnvHTTPMaxConns: "0"},
		config.EnvAllowCacheTTL:       {config.EnvServiceToken: token, config.EnvAllowCacheTTL: "1h"},
		config.EnvAllowedOrigins:      {config.EnvServiceToken: token, config.EnvAllowedOrigins: "claude.ai"},
		config.EnvTrustedProxies:      {config.EnvServiceToken: token, config.EnvTrustedProxies: "10.0.0.0/8,ingress.internal"},
		config.EnvKeyLease:            {config.EnvServiceToken: token, config.EnvKeyLease: "1m"},
		// README's and MCP.md's templates, never filled in.
		config.EnvAPIKey: {config.EnvServiceToken: token, config.EnvAPIKey: "<contents of .data/demo-api-key>"},
	}
	for name, vars := range cases {
		t.Run(name, func(t *testing.T) {
			env := platform.FromMap(vars)
			config.Load(env)
			require.ErrorContains(t, env.Err(), name)
		})
	}
}

// TestBridgeURL: the bridge sends the user's API key to BMCIS_MCP_URL with
// every request, so the URL must be https, or http only on loopback.
func TestBridgeURL(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://kb.example.com/mcp", true},
		{"http://127.0.0.1:8090/mcp", true},
		{"http://localhost:8090/mcp", true},
		{"http://[::1]:8090/mcp", true},
		{"http://kb.example.com/mcp", false},
		{"http://192.168.1.20:8090/mcp", false},
		{"https://alice:secret@kb.example.com/mcp", false},
		{"kb.example.com/mcp", false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			env := platform.FromMap(map[string]string{config.EnvMCPURL: tc.url, config.EnvAPIKey: "bmcis_key"})
			c := config.Load(env)
			if tc.ok {
				require.NoError(t, env.Err())
				require.Equal(t, config.ModeBridge, c.Mode)
				return
			}
			require.ErrorContains(t, env.Err(), config.EnvMCPURL+": must be the endpoint's https URL")
			require.ErrorContains(t, env.Err(), "http only on loopback")
			require.ErrorContains(t, env.Err(), "no user name or password in it")
			require.NotContains(t, env.Err().Error(), "secret", "the URL's credentials are not echoed")
		})
	}
}
