package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
	"github.com/bmcis/knowledge/services/auth/internal/server"
)

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		env := config.FromMap(nil)
		c := server.LoadConfig(env)
		require.NoError(t, env.Err())
		require.Equal(t, limiter.Limits{100, 1_000, 10_000}, c.Defaults)
		require.True(t, c.FailOpen)
		require.Empty(t, c.RedisURL)
		require.Equal(t, 30*time.Second, c.CacheTTL)
		require.Equal(t, 90*24*time.Hour, c.KeyLifetime)
		require.Equal(t, 2*time.Second, c.LeaseMax)
	})
	t.Run("overrides", func(t *testing.T) {
		env := config.FromMap(map[string]string{
			"BMCIS_RATE_LIMIT_MINUTE":     "10",
			"BMCIS_RATE_LIMIT_HOUR":       "20",
			"BMCIS_RATE_LIMIT_DAY":        "30",
			"REDIS_URL":                   "redis://:pw@127.0.0.1:6379/2",
			"RATE_LIMIT_ON_REDIS_FAILURE": "CLOSED",
			"BMCIS_AUTH_KEY_CACHE_TTL":    "5s",
			"BMCIS_KEY_LIFETIME":          "720h",
			"BMCIS_AUTH_LEASE_MAX":        "0",
		})
		c := server.LoadConfig(env)
		require.NoError(t, env.Err())
		require.Equal(t, limiter.Limits{10, 20, 30}, c.Defaults)
		require.False(t, c.FailOpen)
		require.Equal(t, 5*time.Second, c.CacheTTL)
		require.Equal(t, 30*24*time.Hour, c.KeyLifetime)
		require.Zero(t, c.LeaseMax, "0 grants no lease")
	})
	tests := []struct {
		name, variable, value string
	}{
		{"zero limit", "BMCIS_RATE_LIMIT_MINUTE", "0"},
		{"word limit", "BMCIS_RATE_LIMIT_HOUR", "lots"},
		{"huge limit", "BMCIS_RATE_LIMIT_DAY", "1000000000"},
		{"unknown failure mode", "RATE_LIMIT_ON_REDIS_FAILURE", "maybe"},
		{"cache longer than the revocation bound", "BMCIS_AUTH_KEY_CACHE_TTL", "31s"},
		{"key lifetime under a minute", "BMCIS_KEY_LIFETIME", "30s"},
		{"lease longer than 10s", "BMCIS_AUTH_LEASE_MAX", "11s"},
		{"negative lease", "BMCIS_AUTH_LEASE_MAX", "-1s"},
		{"bad redis url", "REDIS_URL", "http://user:hunter2hunter2@example"},
		// deploy/k8s/secret.example.yaml's: a published password
		{"placeholder redis password", "REDIS_URL", "rediss://:CHANGE_ME@redis.example.internal:6380/0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := config.FromMap(map[string]string{tc.variable: tc.value})
			server.LoadConfig(env)
			err := env.Err()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.variable)
			if tc.variable == "REDIS_URL" || tc.variable == "BMCIS_ADMIN_TOKEN" {
				require.NotContains(t, err.Error(), tc.value, "secrets are not echoed")
			}
		})
	}
}

func TestLoadConfigOAuthIssuers(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
		expect      []string
	}{
		{"unset: none", "", true, nil},
		{"https and loopback http", "https://idp.example.com/, http://127.0.0.1:9000", true, []string{"https://idp.example.com/", "http://127.0.0.1:9000"}},
		{"plain http elsewhere", "http://idp.example.com", false, nil},
		{"not a URL", "idp.example.com", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := config.FromMap(map[string]string{"BMCIS_AUTH_OAUTH_ISSUERS": tc.value})
			c := server.LoadConfig(env)
			if !tc.ok {
				require.ErrorContains(t, env.Err(), "BMCIS_AUTH_OAUTH_ISSUERS")
				return
			}
			require.NoError(t, env.Err())
			require.Equal(t, tc.expect, c.OAuthIssuers)
		})
	}
}
