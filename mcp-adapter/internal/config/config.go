// Package config reads the adapter's settings from the environment, with
// every problem reported at once (platform/config) so the binary can exit
// with status 2 naming each bad variable.
package config

import (
	"crypto/rand"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bmcis/knowledge/platform/auditlog"
	"github.com/bmcis/knowledge/platform/clientaddr"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/connlimit"
	"github.com/bmcis/knowledge/platform/oauthscope"
	"github.com/bmcis/knowledge/platform/origin"
	"github.com/bmcis/knowledge/platform/weburl"

	"github.com/bmcis/knowledge/mcp-adapter/internal/allowcache"
	"github.com/bmcis/knowledge/mcp-adapter/internal/projection"
	"github.com/bmcis/knowledge/mcp-adapter/internal/render"
	"github.com/bmcis/knowledge/mcp-adapter/internal/signals"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Modes: direct talks gRPC to the services (operators, tests, and the
// HTTP server itself); bridge forwards stdio to a remote MCP endpoint
// (Claude Desktop), selected by setting BMCIS_MCP_URL.
const (
	ModeDirect = "direct"
	ModeBridge = "bridge"
)

// Config is every setting of the adapter.
type Config struct {
	// Mode is ModeBridge when MCPURL is set, else ModeDirect.
	Mode string
	// MCPURL is the remote streamable-HTTP endpoint of bridge mode.
	MCPURL string
	// MCPTimeout bounds each request to MCPURL.
	MCPTimeout time.Duration
	// Transport is stdio (Claude Desktop launches the binary) or http
	// (streamable HTTP).
	Transport string
	// HTTPAddr is the listen address in http mode.
	HTTPAddr string
	// HTTPMaxBodyBytes caps an /mcp request body in http mode.
	HTTPMaxBodyBytes int
	// HTTPReadTimeout bounds reading a whole request, HTTPIdleTimeout a
	// keep-alive connection's wait for the next one (http mode).
	HTTPReadTimeout time.Duration
	HTTPIdleTimeout time.Duration
	// HTTPConns bounds the connections held in http mode, in total and
	// per client, and the wait for a request's header.
	HTTPConns connlimit.Limits
	// AllowedOrigins are the browser origins allowed in http mode besides
	// the listener's own loopback origins; "*" allows all.
	AllowedOrigins []string
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client in http mode (BMCIS_TRUSTED_PROXIES, platform/clientaddr);
	// none by default.
	TrustedProxies clientaddr.Proxies
	// LogLevel is debug, info, warn or error; logs go to stderr.
	LogLevel string

	SearchAddr      string
	VendorGraphAddr string
	AuthAddr        string
	// ServiceToken authenticates the adapter to the backends.
	ServiceToken string
	// Audit are the audit trail's settings (BMCIS_AUDIT*, docs/AUDIT.md).
	Audit auditlog.Settings
	// MetricsAddr serves the adapter's Prometheus metrics (per-tool calls
	// and latency, the audit counters) at /metrics (BMCIS_MCP_METRICS_ADDR;
	// empty: off).
	MetricsAddr string

	// APIKey is the caller's key on stdio; empty means every call answers
	// AUTH_REQUIRED.
	APIKey string
	// CursorSecret signs pagination cursors. Random per process when unset
	// on stdio; required on http, where replicas must share it.
	CursorSecret          []byte
	CursorSecretGenerated bool

	SearchTimeout      time.Duration
	VendorGraphTimeout time.Duration
	AuthTimeout        time.Duration
	// AllowCacheTTL is how long a key auth allowed may start its next
	// calls' backend work while they are checked; 0 waits for every check.
	AllowCacheTTL time.Duration
	// KeyLease is how long a busy key's calls may spend units auth prepaid
	// (a lease) instead of waiting for a check, and so how long a revoked
	// key's calls may still pass here (BMCIS_MCP_KEY_LEASE, at most
	// allowcache.MaxLease; 0: no leases, every call is checked). Needs the
	// allow cache (AllowCacheTTL > 0).
	KeyLease time.Duration
	// AnswerCacheTTL is how long a finished answer is kept to answer the
	// same call again without asking search while the index has not
	// changed (indexwatch): a bound on memory and recency, not freshness
	// (0: none kept);
	// AnswerCacheBytes bounds what the kept answers hold (tools.NewAnswerCache).
	AnswerCacheTTL   time.Duration
	AnswerCacheBytes int

	DefaultResponseMode projection.Mode
	// DefaultFormat is the content format of answers that name none.
	DefaultFormat render.Format
	Thresholds    warnings.Thresholds
	Desktop       bool
	Signals       signals.Config
	// OAuth makes the HTTP endpoint an OAuth 2.1 resource server when
	// OAuth.Issuer is set (http transport only).
	OAuth OAuthConfig
	// ValidateOutput makes the server check every structured answer
	// against the tool's output schema (costly; for tests and debugging).
	ValidateOutput bool
}

// OAuthConfig is the resource-server side of OAuth (internal/oauth).
type OAuthConfig struct {
	// Issuer is the authorization server's issuer URL; empty: OAuth off.
	Issuer string
	// Resource is this endpoint's public URL: the audience tokens carry.
	Resource string
	// JWKSURL overrides the key set URL found in the issuer's metadata.
	JWKSURL string
	// Scopes are advertised to clients (default kb:read).
	Scopes []string
	// KeyRefreshInterval is the least time between two fetches of the
	// issuer's key set (default 5 s): tokens naming unknown key ids cannot
	// make every request a fetch.
	KeyRefreshInterval time.Duration
	// AcceptUntypedTokens accepts access tokens typed "JWT" or not at all,
	// for identity providers that do not set RFC 9068's typ at+jwt.
	AcceptUntypedTokens bool
	// GroupsClaim names the token claim holding the caller's groups
	// (default "groups"); the auth service maps them to access groups.
	GroupsClaim string
}

// Environment variable names.
const (
	EnvTransport       = "BMCIS_MCP_TRANSPORT"
	EnvMCPURL          = "BMCIS_MCP_URL"
	EnvMCPTimeout      = "BMCIS_MCP_TIMEOUT"
	EnvHTTPAddr        = "BMCIS_MCP_HTTP_ADDR"
	EnvHTTPMaxBody     = "BMCIS_MCP_HTTP_MAX_BODY_BYTES"
	EnvHTTPReadTimeout = "BMCIS_MCP_HTTP_READ_TIMEOUT"
	EnvHTTPIdleTimeout = "BMCIS_MCP_HTTP_IDLE_TIMEOUT"
	// EnvHTTPConnsPrefix prefixes platform/connlimit's variables:
	// BMCIS_MCP_HTTP_MAX_CONNS, _MAX_CONNS_PER_CLIENT, _READ_HEADER_TIMEOUT.
	EnvHTTPConnsPrefix     = "BMCIS_MCP_HTTP_"
	EnvHTTPMaxConns        = EnvHTTPConnsPrefix + "MAX_CONNS"
	EnvAllowedOrigins      = "BMCIS_MCP_ALLOWED_ORIGINS"
	EnvTrustedProxies      = clientaddr.EnvTrustedProxies
	EnvLogLevel            = "BMCIS_LOG_LEVEL"
	EnvSearchAddr          = "BMCIS_SEARCH_ADDR"
	EnvVendorGraphAddr     = "BMCIS_VENDORGRAPH_ADDR"
	EnvAuthAddr            = "BMCIS_AUTH_ADDR"
	EnvServiceToken        = "BMCIS_SERVICE_TOKEN"
	EnvAPIKey              = "BMCIS_API_KEY"
	EnvCursorSecret        = "BMCIS_CURSOR_SECRET"
	EnvSearchTimeout       = "BMCIS_SEARCH_TIMEOUT"
	EnvVendorGraphTimeout  = "BMCIS_VENDORGRAPH_TIMEOUT"
	EnvAuthTimeout         = "BMCIS_AUTH_TIMEOUT"
	EnvAllowCacheTTL       = "BMCIS_AUTH_ALLOW_CACHE_TTL"
	EnvKeyLease            = "BMCIS_MCP_KEY_LEASE"
	EnvAnswerCacheTTL      = "BMCIS_MCP_ANSWER_CACHE_TTL"
	EnvAnswerCacheBytes    = "BMCIS_MCP_ANSWER_CACHE_BYTES"
	EnvDefaultResponseMode = "DEFAULT_RESPONSE_MODE"
	EnvDefaultFormat       = "BMCIS_DEFAULT_FORMAT"
	EnvMaxTokens           = "MAX_TOKENS_PER_RESPONSE"
	EnvWarnThreshold       = "TOKEN_WARNING_THRESHOLD"
	EnvLowQuality          = "LOW_QUALITY_THRESHOLD"
	EnvCacheMissSlow       = "CACHE_MISS_SLOW_THRESHOLD"
	EnvDesktop             = "ENABLE_DESKTOP_ENHANCEMENTS"
	EnvConfidence          = "INCLUDE_CONFIDENCE_SCORES"
	EnvCategoryWeights     = "BMCIS_CATEGORY_WEIGHTS"
	EnvDefaultWeight       = "BMCIS_DEFAULT_CATEGORY_WEIGHT"
	EnvRecencyHalfLife     = "BMCIS_RECENCY_HALF_LIFE"
	EnvValidateOutput      = "BMCIS_MCP_VALIDATE_OUTPUT"
	EnvOAuthIssuer         = "BMCIS_OAUTH_ISSUER"
	EnvOAuthResource       = "BMCIS_OAUTH_RESOURCE"
	EnvOAuthJWKSURL        = "BMCIS_OAUTH_JWKS_URL"
	EnvOAuthScopes         = "BMCIS_OAUTH_SCOPES"
	EnvOAuthKeyRefresh     = "BMCIS_OAUTH_JWKS_MIN_INTERVAL"
	EnvOAuthUntypedTokens  = "BMCIS_OAUTH_ACCEPT_UNTYPED_TOKENS"
	EnvOAuthGroupsClaim    = "BMCIS_OAUTH_GROUPS_CLAIM"
)

// DefaultCategoryWeights rate the demo corpus's categories; override them
// with BMCIS_CATEGORY_WEIGHTS.
var DefaultCategoryWeights = map[string]float64{
	"security":          0.9,
	"authentication":    0.9,
	"cloud-providers":   0.85,
	"data-platforms":    0.85,
	"vendor-management": 0.85,
	"documentation":     0.8,
}

// Load reads the configuration; env.Err() then holds every problem.
func Load(env *config.Reader) Config {
	mcpURL := strings.TrimSpace(env.String(EnvMCPURL, ""))
	bridge := mcpURL != ""
	c := Config{
		Mode:             ModeDirect,
		MCPURL:           mcpURL,
		MCPTimeout:       env.Duration(EnvMCPTimeout, 30*time.Second, time.Second, 10*time.Minute),
		Transport:        env.Enum(EnvTransport, TransportStdio, TransportStdio, TransportHTTP),
		HTTPAddr:         env.Addr(EnvHTTPAddr, "127.0.0.1:8090"),
		HTTPMaxBodyBytes: env.Int(EnvHTTPMaxBody, 1<<20, 4<<10, 64<<20),
		HTTPReadTimeout:  env.Duration(EnvHTTPReadTimeout, 30*time.Second, time.Second, 10*time.Minute),
		HTTPIdleTimeout:  env.Duration(EnvHTTPIdleTimeout, 120*time.Second, time.Second, time.Hour),
		HTTPConns:        connlimit.Load(env, EnvHTTPConnsPrefix),
		AllowedOrigins:   env.List(EnvAllowedOrigins, nil),
		TrustedProxies:   clientaddr.Load(env),
		LogLevel:         env.Enum(EnvLogLevel, "info", "debug", "info", "warn", "error"),
		SearchAddr:       env.Addr(EnvSearchAddr, "127.0.0.1:50051"),
		VendorGraphAddr:  env.Addr(EnvVendorGraphAddr, "127.0.0.1:50052"),
		AuthAddr:         env.Addr(EnvAuthAddr, "127.0.0.1:50053"),
		// The bridge holds no service credential: it reaches the product
		// as a remote client does, with the user's key only.
		ServiceToken: env.Secret(EnvServiceToken, !bridge, 16),
		Audit:        auditlog.LoadSettings(env),
		MetricsAddr:  env.String("BMCIS_MCP_METRICS_ADDR", ""),
		// Unset, every call answers AUTH_REQUIRED with the fix; a template
		// never filled in stops the adapter, naming the variable.
		APIKey:             env.Credential(EnvAPIKey),
		SearchTimeout:      env.Duration(EnvSearchTimeout, 5*time.Second, 100*time.Millisecond, 2*time.Minute),
		VendorGraphTimeout: env.Duration(EnvVendorGraphTimeout, 5*time.Second, 100*time.Millisecond, 2*time.Minute),
		AuthTimeout:        env.Duration(EnvAuthTimeout, 2*time.Second, 50*time.Millisecond, time.Minute),
		AllowCacheTTL:      env.Duration(EnvAllowCacheTTL, 5*time.Second, 0, 30*time.Second),
		KeyLease:           env.Duration(EnvKeyLease, time.Second, 0, allowcache.MaxLease),
		// At most 10 min: a bound on memory and on how old a replay may be;
		// freshness follows search's WatchIndex (indexwatch, docs/MCP.md).
		AnswerCacheTTL:   env.Duration(EnvAnswerCacheTTL, time.Minute, 0, 10*time.Minute),
		AnswerCacheBytes: env.Int(EnvAnswerCacheBytes, 32<<20, 1<<20, 4<<30),
		Thresholds: warnings.Thresholds{
			MaxTokens:     env.Int(EnvMaxTokens, warnings.Defaults.MaxTokens, 1000, 1_000_000),
			WarnRatio:     env.Float(EnvWarnThreshold, warnings.Defaults.WarnRatio, 0.1, 1),
			LowQuality:    env.Float(EnvLowQuality, warnings.Defaults.LowQuality, 0, 1),
			CacheMissSlow: env.Duration(EnvCacheMissSlow, warnings.Defaults.CacheMissSlow, 0, time.Minute),
		},
		Desktop:        env.Bool(EnvDesktop, true),
		ValidateOutput: env.Bool(EnvValidateOutput, false),
	}
	if bridge {
		c.Mode = ModeBridge
		// The user's API key travels with every request: never in clear
		// text over a network.
		if !weburl.Secure(mcpURL) {
			env.Failf(EnvMCPURL, "must be the endpoint's https URL, such as https://kb.example.com/mcp, with no user name or password in it (http only on loopback: the API key must not cross a network unencrypted)")
		}
		if c.Transport != TransportStdio {
			env.Failf(EnvTransport, "must be stdio when %s is set (bridge mode)", EnvMCPURL)
		}
	}
	c.OAuth = loadOAuth(env, c.Transport)
	if err := origin.Validate(c.AllowedOrigins); err != nil {
		env.Failf(EnvAllowedOrigins, "%v", err)
	}
	mode := env.Enum(EnvDefaultResponseMode, string(projection.Metadata), projection.Names()...)
	c.DefaultResponseMode = projection.Mode(mode)
	c.DefaultFormat = render.Format(env.Enum(EnvDefaultFormat, string(render.DefaultFormat), render.Names()...))

	c.Signals = signals.Config{
		CategoryWeights:   categoryWeights(env),
		DefaultWeight:     env.Float(EnvDefaultWeight, 0.7, 0, 1),
		HalfLife:          env.Duration(EnvRecencyHalfLife, 180*24*time.Hour, time.Hour, 100*365*24*time.Hour),
		IncludeConfidence: env.Bool(EnvConfidence, true),
	}

	secret := env.Secret(EnvCursorSecret, c.Transport == TransportHTTP, 16)
	if secret != "" {
		c.CursorSecret = []byte(secret)
	} else {
		c.CursorSecret = make([]byte, 32)
		_, _ = rand.Read(c.CursorSecret)
		c.CursorSecretGenerated = true
	}
	return c
}

// categoryWeights parses "category=weight,category=weight".
func categoryWeights(env *config.Reader) map[string]float64 {
	entries := env.List(EnvCategoryWeights, nil)
	if entries == nil {
		out := make(map[string]float64, len(DefaultCategoryWeights))
		for k, v := range DefaultCategoryWeights {
			out[k] = v
		}
		return out
	}
	out := make(map[string]float64, len(entries))
	for _, e := range entries {
		name, value, ok := strings.Cut(e, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		w, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !ok || name == "" || err != nil || w < 0 || w > 1 {
			env.Failf(EnvCategoryWeights, "entries must look like category=0.8 with a weight in 0..1, got %q", e)
			continue
		}
		out[name] = w
	}
	return out
}

// loadOAuth reads the OAuth resource-server settings: all or nothing, on
// the http transport only.
func loadOAuth(env *config.Reader, transport string) OAuthConfig {
	o := OAuthConfig{
		Issuer:              strings.TrimSpace(env.String(EnvOAuthIssuer, "")),
		Resource:            strings.TrimSpace(env.String(EnvOAuthResource, "")),
		JWKSURL:             strings.TrimSpace(env.String(EnvOAuthJWKSURL, "")),
		Scopes:              env.List(EnvOAuthScopes, []string{oauthscope.Read}),
		KeyRefreshInterval:  env.Duration(EnvOAuthKeyRefresh, 5*time.Second, 100*time.Millisecond, 10*time.Minute),
		AcceptUntypedTokens: env.Bool(EnvOAuthUntypedTokens, false),
		GroupsClaim:         strings.TrimSpace(env.String(EnvOAuthGroupsClaim, "groups")),
	}
	if o.Issuer == "" {
		for _, name := range []string{EnvOAuthResource, EnvOAuthJWKSURL} {
			if strings.TrimSpace(env.String(name, "")) != "" {
				env.Failf(name, "is set but %s is not", EnvOAuthIssuer)
			}
		}
		return o
	}
	if transport != TransportHTTP {
		env.Failf(EnvOAuthIssuer, "needs %s=http (OAuth protects the HTTP endpoint)", EnvTransport)
	}
	if !weburl.Secure(o.Issuer) {
		env.Failf(EnvOAuthIssuer, "must be the issuer's https URL (http only on loopback), exactly as in its tokens")
	}
	if o.Resource == "" {
		env.Failf(EnvOAuthResource, "is required with %s: this endpoint's public URL, such as https://kb.example.com/mcp", EnvOAuthIssuer)
	} else if u, err := url.Parse(o.Resource); err != nil || !weburl.Secure(o.Resource) || u.Fragment != "" || u.RawQuery != "" {
		env.Failf(EnvOAuthResource, "must be this endpoint's https URL without query or fragment (http only on loopback)")
	}
	if o.JWKSURL != "" && !weburl.Secure(o.JWKSURL) {
		env.Failf(EnvOAuthJWKSURL, "must be an https URL (http only on loopback)")
	}
	return o
}
