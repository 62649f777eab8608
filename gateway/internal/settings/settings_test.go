package settings

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/platform/config"
)

func TestConfig(t *testing.T) {
	r := config.FromMap(map[string]string{})
	c := Load(r)
	require.NoError(t, r.Err())
	require.Equal(t, "127.0.0.1:8080", c.Addr)
	require.Empty(t, c.CORSOrigins)
	b, _ := c.Backend(backends.Auth)
	require.Equal(t, "127.0.0.1:50053", b.Addr)
	require.Equal(t, "http://127.0.0.1:9093/metrics", b.MetricsURL)
	require.Equal(t, "http://127.0.0.1:8090/healthz", c.MCPHealthURL)
	require.Empty(t, c.MCPMetricsURL)
	require.Zero(t, c.TrustedProxies.Len())

	r = config.FromMap(map[string]string{
		"BMCIS_GATEWAY_ADDR": "nope", "BMCIS_SEARCH_ADDR": "x", "BMCIS_GATEWAY_CORS_ORIGINS": "dash.example.com",
		"BMCIS_SERVICE_TOKEN": "short", "BMCIS_AUTH_METRICS_URL": "ftp://x", "BMCIS_GATEWAY_MAX_BODY_BYTES": "1",
		"BMCIS_TRUSTED_PROXIES": "10.0.0.0/8,ingress.internal",
	})
	Load(r)
	err := r.Err()
	require.Error(t, err)
	for _, v := range []string{"BMCIS_GATEWAY_ADDR", "BMCIS_SEARCH_ADDR", "BMCIS_GATEWAY_CORS_ORIGINS", "BMCIS_SERVICE_TOKEN", "BMCIS_AUTH_METRICS_URL", "BMCIS_GATEWAY_MAX_BODY_BYTES", "BMCIS_TRUSTED_PROXIES"} {
		require.Contains(t, err.Error(), v)
	}
	require.NotContains(t, err.Error(), "short")

	require.Equal(t, "postgres://[redacted]@db:5432/x?password=[redacted]", redactURL("postgres://u:secret@db:5432/x?password=secret"))
	require.Equal(t, "http://127.0.0.1:9091/metrics", redactURL("http://127.0.0.1:9091/metrics"))
}
