package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/ratelimit"
	"github.com/bmcis/knowledge/platform/weburl"
	"github.com/bmcis/knowledge/services/auth/internal/keys"
	"github.com/bmcis/knowledge/services/auth/internal/limiter"
)

// Config is the auth service's own configuration.
type Config struct {
	// Defaults are the limits of keys without their own, per tier
	// (BMCIS_RATE_LIMIT_<TIER>).
	Defaults limiter.Limits
	// RedisURL selects the shared Redis limiter (REDIS_URL); empty selects the
	// in-memory one.
	RedisURL string
	// RedisPrefix starts every Redis key the limiter writes.
	RedisPrefix string
	// RedisTimeout bounds each Redis call (BMCIS_RATE_LIMIT_REDIS_TIMEOUT).
	RedisTimeout time.Duration
	// RedisPoolWait is how long a check waits for a free Redis connection
	// before answering busy (UNAVAILABLE, retry shortly); 0 means 2 s. A
	// burst queues for a connection rather than tripping the failure mode.
	RedisPoolWait time.Duration
	// FailOpen is RATE_LIMIT_ON_REDIS_FAILURE=open.
	FailOpen bool
	// RedisRetry is how long to bypass Redis after a failure before probing it
	// again.
	RedisRetry time.Duration
	// CacheTTL and CacheSize bound the verified-key cache
	// (BMCIS_AUTH_KEY_CACHE_TTL, BMCIS_AUTH_KEY_CACHE_SIZE).
	CacheTTL  time.Duration
	CacheSize int
	// StaleKeyMaxAge is how old a cached key record may be and still answer
	// while the database is unreachable (BMCIS_AUTH_STALE_KEY_MAX_AGE; 0: never).
	StaleKeyMaxAge time.Duration
	// LastUsedFlush is how often last-use times are written
	// (BMCIS_AUTH_LAST_USED_FLUSH).
	LastUsedFlush time.Duration
	// KeyLifetime is the lifetime of a key created without one, and of a
	// rotated key whose predecessor had none (BMCIS_KEY_LIFETIME); zero
	// means such keys never expire.
	KeyLifetime time.Duration
	// OAuthIssuers are the OAuth authorization servers whose access-token
	// subjects Check accepts (BMCIS_AUTH_OAUTH_ISSUERS, comma-separated
	// issuer URLs exactly as in the tokens' iss); empty: none.
	OAuthIssuers []string
	// OAuthGroupMap maps the values of an access token's groups claim to
	// access groups (BMCIS_OAUTH_GROUP_MAP: "idp-group=group,..."); empty:
	// a claim value that is a valid group name is that group.
	OAuthGroupMap map[string]string
	// FailedChecksPerClient is the budget of failed checks per client
	// address and FailedChecksWindow (BMCIS_AUTH_FAILED_CHECKS_PER_CLIENT,
	// BMCIS_AUTH_FAILED_CHECKS_WINDOW; 0 turns the budget off, as behind a
	// proxy that hides the end users' addresses).
	FailedChecksPerClient int
	FailedChecksWindow    time.Duration
	// LeaseMax is the longest a lease (CheckResponse.lease) may be spent
	// for (BMCIS_AUTH_LEASE_MAX, default DefaultLeaseMax, at most
	// MaxLeaseMax; 0 grants none).
	LeaseMax time.Duration
	// AuditRetention is how long audit events are kept
	// (BMCIS_AUDIT_RETENTION; 0 keeps them forever, else at least a day,
	// which the database's pruning function enforces too).
	AuditRetention time.Duration

	// Clock, when set, replaces time.Now for key expiry, the key cache and the
	// in-memory limiter; for tests.
	Clock func() time.Time
	// RedisTestClock, when set, makes the Redis script use it instead of Redis
	// server time; for tests only.
	RedisTestClock func() time.Time
}

// DefaultLeaseMax and MaxLeaseMax bound how long an edge may spend a lease
// without asking: a revocation reaches such calls only when it ends.
const (
	DefaultLeaseMax = 2 * time.Second
	MaxLeaseMax     = 10 * time.Second
)

// DefaultKeyLifetime is the lifetime a key gets when nobody asks for one:
// a forgotten key stops working on its own.
const DefaultKeyLifetime = 90 * 24 * time.Hour

// ParseRetention reads BMCIS_AUDIT_RETENTION: days ("400d"), or a Go
// duration ("9600h"); 0 keeps events forever, anything else is at least a
// day (the database's pruning function refuses less).
func ParseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100*366 {
			return 0, fmt.Errorf("must be a number of days such as 400d, or a duration such as 9600h, got %q", v)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return 0, fmt.Errorf("must be a number of days such as 400d, or a duration such as 9600h, got %q", v)
		}
	}
	if d > 0 && d < 24*time.Hour {
		return 0, fmt.Errorf("must be 0 (keep forever) or at least a day, got %s", v)
	}
	return d, nil
}

// LoadConfig reads the configuration; problems are recorded in env.
func LoadConfig(env *config.Reader) Config {
	c := Config{
		Defaults:       make(limiter.Limits, len(ratelimit.Tiers)),
		RedisURL:       env.String("REDIS_URL", ""),
		RedisPrefix:    env.String("BMCIS_RATE_LIMIT_REDIS_PREFIX", "bmcis:rl:"),
		RedisTimeout:   env.Duration("BMCIS_RATE_LIMIT_REDIS_TIMEOUT", time.Second, 10*time.Millisecond, 10*time.Second),
		FailOpen:       env.Enum("RATE_LIMIT_ON_REDIS_FAILURE", "open", "open", "closed") == "open",
		RedisRetry:     time.Second,
		CacheTTL:       env.Duration("BMCIS_AUTH_KEY_CACHE_TTL", keys.MaxCacheTTL, 0, keys.MaxCacheTTL),
		StaleKeyMaxAge: env.Duration("BMCIS_AUTH_STALE_KEY_MAX_AGE", 10*time.Minute, 0, 24*time.Hour),
		CacheSize:      env.Int("BMCIS_AUTH_KEY_CACHE_SIZE", 10_000, 1, 10_000_000),
		LastUsedFlush:  env.Duration("BMCIS_AUTH_LAST_USED_FLUSH", 15*time.Second, 100*time.Millisecond, time.Hour),
		KeyLifetime:    env.Duration("BMCIS_KEY_LIFETIME", DefaultKeyLifetime, 0, maxLifetime),
		OAuthIssuers:   env.List("BMCIS_AUTH_OAUTH_ISSUERS", nil),
		LeaseMax:       env.Duration("BMCIS_AUTH_LEASE_MAX", DefaultLeaseMax, 0, MaxLeaseMax),

		FailedChecksPerClient: env.Int("BMCIS_AUTH_FAILED_CHECKS_PER_CLIENT", 100, 0, 1_000_000),
		FailedChecksWindow:    env.Duration("BMCIS_AUTH_FAILED_CHECKS_WINDOW", time.Minute, time.Second, 24*time.Hour),
	}
	if d, err := ParseRetention(env.String("BMCIS_AUDIT_RETENTION", "400d")); err != nil {
		env.Failf("BMCIS_AUDIT_RETENTION", "%s", err.Error())
	} else {
		c.AuditRetention = d
	}
	for _, iss := range c.OAuthIssuers {
		if !weburl.Secure(iss) {
			env.Failf("BMCIS_AUTH_OAUTH_ISSUERS", "issuers must be https URLs (http only on loopback), got %q", iss)
		}
	}
	for _, pair := range env.List("BMCIS_OAUTH_GROUP_MAP", nil) {
		from, to, ok := strings.Cut(pair, "=")
		from = strings.TrimSpace(from)
		g, err := access.ParseGroup(to)
		if !ok || from == "" || err != nil {
			env.Failf("BMCIS_OAUTH_GROUP_MAP", "want claim-value=group pairs separated by commas (a group is %s), got %q", access.GroupRule, pair)
			continue
		}
		if c.OAuthGroupMap == nil {
			c.OAuthGroupMap = map[string]string{}
		}
		c.OAuthGroupMap[from] = g
	}
	// One variable per tier: BMCIS_RATE_LIMIT_MINUTE, _HOUR, _DAY, ...
	for i, t := range ratelimit.Tiers {
		c.Defaults[i] = int64(env.Int(t.EnvName(), int(t.Default), 1, limiter.MaxLimit))
	}
	if c.KeyLifetime > 0 && c.KeyLifetime < minLifetime {
		env.Failf("BMCIS_KEY_LIFETIME", "must be 0 (no expiry) or at least %s", minLifetime)
	}
	if c.RedisURL != "" {
		if opts, err := redis.ParseURL(c.RedisURL); err != nil {
			// The URL may hold a password: never echo it.
			env.Failf("REDIS_URL", "not a valid redis:// or rediss:// URL")
		} else {
			env.URLPassword("REDIS_URL", opts.Password)
		}
	}
	return c
}
