// Package ratelimit is the one list of rate-limit tiers. Everything that
// has one value per tier is generated from Tiers: the auth service's limiter,
// its BMCIS_RATE_LIMIT_<TIER> variables and key records, bmcisctl's
// --limit-<tier> flags and list column, the gateway's headers and the MCP
// adapter's `remaining`. The wire carries tiers by name
// (bmcis.auth.v1.TierLimit), so a caller built with an older list still
// shows every tier it is sent.
//
// Adding a tier (a "week", say) is one row here plus a migration adding its
// name to rate_limit_tiers; see services/auth/README.md.
package ratelimit

import (
	"strings"
	"time"
)

// Tier is one rate-limit window.
type Tier struct {
	// Name is the tier's name in replies, flags, variables and headers.
	Name string
	// Window is the span the limit counts over.
	Window time.Duration
	// Default is the limit of keys without their own.
	Default int64
}

// Tiers lists the tiers, shortest window first. The first is the one
// single-valued reports (X-RateLimit-*, the reset of an allowed call) use.
var Tiers = []Tier{
	{Name: "minute", Window: time.Minute, Default: 100},
	{Name: "hour", Window: time.Hour, Default: 1_000},
	{Name: "day", Window: 24 * time.Hour, Default: 10_000},
}

// Index returns the position of the tier named name in Tiers, or -1.
func Index(name string) int {
	for i, t := range Tiers {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// EnvName is the tier's default-limit variable: BMCIS_RATE_LIMIT_MINUTE.
func (t Tier) EnvName() string { return "BMCIS_RATE_LIMIT_" + strings.ToUpper(t.Name) }

// FlagName is the tier's per-key limit flag: limit-minute.
func (t Tier) FlagName() string { return "limit-" + t.Name }

// HeaderSuffix is a tier's part of a header name, from its name as sent on
// the wire: "minute" → "Minute".
func HeaderSuffix(name string) string {
	if name == "" {
		return ""
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// MaxLeaseUnits bounds the units one check may prepay beyond its call (a
// key lease, bmcis.auth.v1.Lease): auth's limiter caps a grant and a
// release at it, and the MCP adapter never asks for more.
const MaxLeaseUnits = 64
