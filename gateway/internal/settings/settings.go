// Package settings is the gateway's configuration: every BMCIS_GATEWAY_*
// variable and the addresses of the servers behind it, read once at start-up
// (a bad value names its variable, never a secret's value), and the
// redacted view /api/config shows.
package settings

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/bmcis/knowledge/gateway/internal/backends"
	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/clientaddr"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/connlimit"
	"github.com/bmcis/knowledge/platform/origin"
)

// Off disables an optional URL or address setting.
const Off = "off"

// Config is everything the gateway reads from its environment.
type Config struct {
	// Addr is the HTTP listen address (BMCIS_GATEWAY_ADDR).
	Addr string
	// MetricsAddr serves the gateway's own /metrics (BMCIS_GATEWAY_METRICS_ADDR);
	// empty when off.
	MetricsAddr string
	// ServerID names this gateway in /api/health (BMCIS_GATEWAY_SERVER_ID).
	ServerID string
	// LogLevel is debug, info, warn or error (BMCIS_LOG_LEVEL).
	LogLevel string
	// ServiceToken is the internal token sent to every service (BMCIS_SERVICE_TOKEN).
	ServiceToken string
	// Audit are the audit trail's settings (BMCIS_AUDIT*, docs/AUDIT.md).
	Audit auditlog.Settings

	// Backends are the gRPC services, in display order: search, vendorgraph, auth.
	Backends []BackendConfig
	// MCPHealthURL is the MCP adapter's HTTP health endpoint (BMCIS_MCP_HEALTH_URL,
	// by default derived from BMCIS_MCP_HTTP_ADDR); empty when off.
	MCPHealthURL string
	// MCPMetricsURL is the adapter's Prometheus endpoint (BMCIS_MCP_METRICS_URL);
	// empty when off.
	MCPMetricsURL string

	// CORSOrigins are the browser origins allowed to call the gateway
	// (BMCIS_GATEWAY_CORS_ORIGINS); none by default.
	CORSOrigins []string
	// AllowedOrigins may call the gateway from a browser without CORS
	// headers (BMCIS_GATEWAY_ALLOWED_ORIGINS): an Origin neither here, in
	// CORSOrigins nor one of the listener's own loopback origins answers 403.
	AllowedOrigins []string
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (BMCIS_TRUSTED_PROXIES, platform/clientaddr); none by default.
	TrustedProxies clientaddr.Proxies
	// MaxBodyBytes caps a request body (BMCIS_GATEWAY_MAX_BODY_BYTES).
	MaxBodyBytes int64
	// MaxUploadBytes caps the body of the upload route, one file or a zip
	// (BMCIS_GATEWAY_MAX_UPLOAD_BYTES, default 64 MiB); a zip may expand to
	// four times it.
	MaxUploadBytes int64
	// RequestTimeout bounds one request's work, upstream calls included
	// (BMCIS_GATEWAY_REQUEST_TIMEOUT).
	RequestTimeout time.Duration
	// ReadTimeout bounds reading a whole request (BMCIS_GATEWAY_READ_TIMEOUT).
	ReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections (BMCIS_GATEWAY_IDLE_TIMEOUT).
	IdleTimeout time.Duration
	// Conns bound the connections held, in total and per client, and the
	// wait for a request's header (platform/connlimit:
	// BMCIS_GATEWAY_MAX_CONNS, _MAX_CONNS_PER_CLIENT, _READ_HEADER_TIMEOUT).
	Conns connlimit.Limits
	// ShutdownTimeout bounds the wait for requests in flight on SIGTERM
	// (BMCIS_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration

	// HealthInterval is how often each backend's health is checked
	// (BMCIS_GATEWAY_HEALTH_INTERVAL); HealthTimeout bounds one check
	// (BMCIS_GATEWAY_HEALTH_TIMEOUT).
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	// StatsInterval is how often the services' metrics are scraped
	// (BMCIS_GATEWAY_STATS_INTERVAL); StatsHistory is how many scrapes the
	// latency chart keeps (BMCIS_GATEWAY_STATS_HISTORY).
	StatsInterval time.Duration
	StatsHistory  int
}

// BackendConfig says where one gRPC service is.
type BackendConfig struct {
	// Name is search, vendorgraph or auth.
	Name string
	// Addr is its gRPC address, host:port.
	Addr string
	// MetricsURL is its Prometheus endpoint; empty when off.
	MetricsURL string
}

// Defaults for the local stack (`make run`).
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultMetricsAddr = "127.0.0.1:9094"
	DefaultMCPHTTPAddr = "127.0.0.1:8090"
)

var backendDefaults = []struct{ name, addrVar, addr, metricsVar, metrics string }{
	{backends.Search, "BMCIS_SEARCH_ADDR", "127.0.0.1:50051", "BMCIS_SEARCH_METRICS_URL", "http://127.0.0.1:9091/metrics"},
	{backends.VendorGraph, "BMCIS_VENDORGRAPH_ADDR", "127.0.0.1:50052", "BMCIS_VENDORGRAPH_METRICS_URL", "http://127.0.0.1:9092/metrics"},
	{backends.Auth, "BMCIS_AUTH_ADDR", "127.0.0.1:50053", "BMCIS_AUTH_METRICS_URL", "http://127.0.0.1:9093/metrics"},
}

// Load reads the configuration; every problem is recorded in env.
func Load(env *config.Reader) Config {
	c := Config{
		Addr:            env.Addr("BMCIS_GATEWAY_ADDR", DefaultAddr),
		MetricsAddr:     optionalAddr(env, "BMCIS_GATEWAY_METRICS_ADDR", DefaultMetricsAddr),
		ServerID:        env.String("BMCIS_GATEWAY_SERVER_ID", "bmcis-gateway"),
		LogLevel:        env.Enum("BMCIS_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		ServiceToken:    env.Secret("BMCIS_SERVICE_TOKEN", false, 16),
		Audit:           auditlog.LoadSettings(env),
		CORSOrigins:     env.List("BMCIS_GATEWAY_CORS_ORIGINS", nil),
		AllowedOrigins:  env.List("BMCIS_GATEWAY_ALLOWED_ORIGINS", nil),
		TrustedProxies:  clientaddr.Load(env),
		MaxBodyBytes:    int64(env.Int("BMCIS_GATEWAY_MAX_BODY_BYTES", 1<<20, 1<<10, 64<<20)),
		MaxUploadBytes:  int64(env.Int("BMCIS_GATEWAY_MAX_UPLOAD_BYTES", 64<<20, 1<<10, 1<<30)),
		RequestTimeout:  env.Duration("BMCIS_GATEWAY_REQUEST_TIMEOUT", 30*time.Second, 100*time.Millisecond, 10*time.Minute),
		ReadTimeout:     env.Duration("BMCIS_GATEWAY_READ_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute),
		IdleTimeout:     env.Duration("BMCIS_GATEWAY_IDLE_TIMEOUT", 2*time.Minute, time.Second, time.Hour),
		Conns:           connlimit.Load(env, "BMCIS_GATEWAY_"),
		ShutdownTimeout: env.Duration("BMCIS_SHUTDOWN_TIMEOUT", 20*time.Second, time.Second, 10*time.Minute),
		HealthInterval:  env.Duration("BMCIS_GATEWAY_HEALTH_INTERVAL", 5*time.Second, 50*time.Millisecond, 10*time.Minute),
		HealthTimeout:   env.Duration("BMCIS_GATEWAY_HEALTH_TIMEOUT", 2*time.Second, 50*time.Millisecond, time.Minute),
		StatsInterval:   env.Duration("BMCIS_GATEWAY_STATS_INTERVAL", 10*time.Second, 50*time.Millisecond, 10*time.Minute),
		StatsHistory:    env.Int("BMCIS_GATEWAY_STATS_HISTORY", 60, 2, 10000),
	}
	for _, d := range backendDefaults {
		c.Backends = append(c.Backends, BackendConfig{
			Name:       d.name,
			Addr:       env.Addr(d.addrVar, d.addr),
			MetricsURL: optionalURL(env, d.metricsVar, d.metrics),
		})
	}
	mcpAddr := env.Addr("BMCIS_MCP_HTTP_ADDR", DefaultMCPHTTPAddr)
	c.MCPHealthURL = optionalURL(env, "BMCIS_MCP_HEALTH_URL", "http://"+mcpAddr+"/healthz")
	c.MCPMetricsURL = optionalURL(env, "BMCIS_MCP_METRICS_URL", Off)
	if err := origin.Validate(c.CORSOrigins); err != nil {
		env.Failf("BMCIS_GATEWAY_CORS_ORIGINS", "%v", err)
	}
	if err := origin.Validate(c.AllowedOrigins); err != nil {
		env.Failf("BMCIS_GATEWAY_ALLOWED_ORIGINS", "%v", err)
	}
	if c.HealthTimeout > c.HealthInterval*4 {
		env.Failf("BMCIS_GATEWAY_HEALTH_TIMEOUT", "must be at most 4 times BMCIS_GATEWAY_HEALTH_INTERVAL")
	}
	return c
}

// optionalAddr reads a listen address that "off" disables.
func optionalAddr(env *config.Reader, name, def string) string {
	if strings.EqualFold(env.String(name, def), Off) {
		return ""
	}
	return env.Addr(name, def)
}

// optionalURL reads an http(s) URL that "off" disables.
func optionalURL(env *config.Reader, name, def string) string {
	v := env.String(name, def)
	if strings.EqualFold(v, Off) {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		env.Failf(name, "must be an http(s) URL or %q", Off)
		return ""
	}
	if _, _, err := net.SplitHostPort(u.Host); err != nil && !strings.Contains(err.Error(), "missing port") {
		env.Failf(name, "bad host in URL")
	}
	return v
}

// Backend returns the named backend's configuration.
func (c Config) Backend(name string) (BackendConfig, bool) {
	for _, b := range c.Backends {
		if b.Name == name {
			return b, true
		}
	}
	return BackendConfig{}, false
}

// redacted is what every secret reads as in /api/config.
const redacted = "[redacted]"

// redactSecret shows whether a secret is set, never its value.
func redactSecret(v string) any {
	if v == "" {
		return nil
	}
	return redacted
}

// redactURL hides a password (or a bare user token) in a URL and any query
// value, which could carry a credential.
func redactURL(v string) string {
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil {
		return redacted
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q.Set(k, redacted)
		}
		u.RawQuery = q.Encode()
	}
	s := u.String()
	// url.String escapes the brackets of the placeholder; keep it readable.
	return strings.NewReplacer("%5Bredacted%5D", redacted).Replace(s)
}

// Effective returns the configuration as /api/config shows it: every value
// that took effect, every secret redacted, and the REST edge's public and
// admin route lists.
func (c Config) Effective(publicRoutes, adminRoutes []string) map[string]any {
	servers := map[string]any{}
	for _, b := range c.Backends {
		servers[b.Name] = map[string]any{
			"transportType": "grpc",
			"address":       b.Addr,
			"metricsUrl":    nullIfEmpty(redactURL(b.MetricsURL)),
			"disabled":      false,
		}
	}
	servers[backends.MCPAdapter] = map[string]any{
		"transportType": "streamable-http",
		"healthUrl":     nullIfEmpty(redactURL(c.MCPHealthURL)),
		"metricsUrl":    nullIfEmpty(redactURL(c.MCPMetricsURL)),
		"disabled":      c.MCPHealthURL == "",
	}
	origins := c.CORSOrigins
	if origins == nil {
		origins = []string{}
	}
	return map[string]any{
		"gateway": map[string]any{
			"serverId":        c.ServerID,
			"addr":            c.Addr,
			"metricsAddr":     nullIfEmpty(c.MetricsAddr),
			"logLevel":        c.LogLevel,
			"serviceToken":    redactSecret(c.ServiceToken),
			"corsOrigins":     origins,
			"maxBodyBytes":    c.MaxBodyBytes,
			"maxUploadBytes":  c.MaxUploadBytes,
			"requestTimeout":  c.RequestTimeout.String(),
			"readTimeout":     c.ReadTimeout.String(),
			"idleTimeout":     c.IdleTimeout.String(),
			"shutdownTimeout": c.ShutdownTimeout.String(),
			"healthInterval":  c.HealthInterval.String(),
			"healthTimeout":   c.HealthTimeout.String(),
			"statsInterval":   c.StatsInterval.String(),
			"statsHistory":    c.StatsHistory,
		},
		"auth": map[string]any{
			"apiKeyHeaders":    []string{"X-API-Key", "Authorization: Bearer"},
			"adminTokenHeader": "X-Admin-Token",
			"publicRoutes":     publicRoutes,
			"adminRoutes":      adminRoutes,
		},
		"mcpServers": servers,
	}
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// String describes the configuration for the start-up log line, secrets redacted.
func (c Config) String() string {
	return fmt.Sprintf("addr=%s backends=%d cors=%d service_token=%v", c.Addr, len(c.Backends), len(c.CORSOrigins), c.ServiceToken != "")
}
