// Package oauthpolicy decides what a caller authenticated by an OAuth
// access token may do. The MCP adapter verified the token (signature via
// the issuer's keys, issuer, audience, expiry); this package, inside the
// auth service, accepts only the issuers the operator trusts, maps the
// subject to a rate-limit identity and the granted scopes
// (platform/oauthscope) to a category scope. What it returns then goes
// through the same tool-scope and rate-limit checks as an API key.
package oauthpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/oauthscope"

	"github.com/bmcis/knowledge/services/auth/internal/keys"
)

// IDPrefix starts the rate-limit identity of an OAuth subject; it cannot
// collide with a key id (key ids are hex).
const IDPrefix = "oauth_"

// Refusals: messages fit for the end user.
const (
	MsgUntrustedIssuer = "Access tokens from this issuer are not accepted by this deployment."
	MsgNoSubject       = "The access token names no subject."
	MsgNoScope         = "The access token grants no scope of this server: ask for " + oauthscope.Read + " (or " + oauthscope.CategoryPrefix + "<category>)."
)

// Policy holds the trusted issuers and how token groups become access
// groups.
type Policy struct {
	issuers []string
	// groupMap maps a token's group (as its claim spells it) to an access
	// group; nil: a token group that is a valid group name is taken as is.
	groupMap map[string]string
}

// WithGroupMap returns p mapping token groups through m (claim value to
// access group, both already validated): only mapped groups count. An
// empty m keeps the identity mapping.
func (p Policy) WithGroupMap(m map[string]string) Policy {
	if len(m) > 0 {
		p.groupMap = m
	}
	return p
}

// Groups maps a token's groups claim to access groups (sorted, distinct):
// through the configured map when there is one (unmapped groups are
// dropped), else every value that is a valid group name, lowercased.
// Values of neither kind are ignored: an identity provider's group
// naming conventions must not refuse its users.
func (p Policy) Groups(claim []string) []string {
	var out []string
	for _, v := range claim {
		if p.groupMap != nil {
			if g, ok := p.groupMap[strings.TrimSpace(v)]; ok {
				out = append(out, g)
			}
			continue
		}
		if g, err := access.ParseGroup(v); err == nil {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > access.MaxEntries {
		out = out[:access.MaxEntries]
	}
	return out
}

// New trusts exactly these issuers (compared as exact strings, as the
// token's iss is); none means OAuth callers are all refused.
func New(issuers []string) Policy {
	out := make([]string, 0, len(issuers))
	for _, i := range issuers {
		if i = strings.TrimSpace(i); i != "" {
			out = append(out, i)
		}
	}
	return Policy{issuers: out}
}

// Key turns a verified subject into the key-shaped record the rest of
// Check works with, or a refusal message. The record has no limits of
// its own (the service defaults apply) and no tool scope (every tool is
// read-only).
func (p Policy) Key(sub *authv1.OAuthSubject) (*keys.Key, string) {
	if !slices.Contains(p.issuers, sub.GetIssuer()) {
		return nil, MsgUntrustedIssuer
	}
	subject := strings.TrimSpace(sub.GetSubject())
	if subject == "" {
		return nil, MsgNoSubject
	}
	grant := oauthscope.Parse(sub.GetScopes())
	if !grant.Any {
		return nil, MsgNoScope
	}
	return &keys.Key{
		ID:     ID(sub.GetIssuer(), subject),
		Name:   clip(subject),
		Owner:  clip(sub.GetIssuer()),
		Scopes: keys.Scopes{Categories: grant.Categories},
		User:   subject,
		Groups: p.Groups(sub.GetGroups()),
	}, ""
}

// ID is the rate-limit identity of a subject of an issuer: the same
// subject keeps its quota across tokens, clients and adapter replicas,
// and subjects of different issuers never share one.
func ID(issuer, subject string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	return IDPrefix + hex.EncodeToString(sum[:12])
}

// IsOAuth reports whether a key id is an OAuth identity (no stored key).
func IsOAuth(id string) bool { return strings.HasPrefix(id, IDPrefix) }

func clip(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
}
