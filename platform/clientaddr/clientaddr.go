// Package clientaddr names the client of an HTTP request for the edges (the
// MCP adapter's HTTP server and the gateway): the address the audit trail
// records, the refusal limit counts by and auth budgets failed checks by.
// That is the connection's address unless the connection comes from a
// trusted proxy (BMCIS_TRUSTED_PROXIES), whose X-Forwarded-For then says
// who the client is. One rule serves both edges.
package clientaddr

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/bmcis/knowledge/platform/config"
)

// EnvTrustedProxies lists the proxies whose X-Forwarded-For is believed:
// comma-separated CIDRs or single IPs; empty (the default) believes none.
const EnvTrustedProxies = "BMCIS_TRUSTED_PROXIES"

// MaxHops is how many X-Forwarded-For entries, from the right, are read at
// most: a chain of proxies is short, and a huge header must not cost more.
const MaxHops = 32

// headerForwardedFor is the only forwarding header read. X-Real-IP holds
// one address no chain of proxies can extend, and Forwarded (RFC 7239) is
// not parsed here: both are ignored, whoever sends them.
const headerForwardedFor = "X-Forwarded-For"

// Proxies are the trusted proxies' address ranges; the zero value trusts
// none.
type Proxies struct {
	prefixes []netip.Prefix
}

// Parse reads a list of CIDRs ("10.0.0.0/8", "2001:db8::/32") or single
// IPs; IPv4-mapped IPv6 entries are read as IPv4. The first bad entry is
// the error.
func Parse(entries []string) (Proxies, error) {
	var p Proxies
	for _, e := range entries {
		prefix, err := parseEntry(strings.TrimSpace(e))
		if err != nil {
			return Proxies{}, err
		}
		p.prefixes = append(p.prefixes, prefix)
	}
	return p, nil
}

func parseEntry(e string) (netip.Prefix, error) {
	if strings.Contains(e, "/") {
		prefix, err := netip.ParsePrefix(e)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP", e)
		}
		if a := prefix.Addr(); a.Is4In6() && prefix.Bits() >= 96 {
			prefix = netip.PrefixFrom(a.Unmap(), prefix.Bits()-96)
		}
		return prefix.Masked(), nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an IP", e)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Load reads EnvTrustedProxies; a bad entry is recorded in env, naming
// the variable.
func Load(env *config.Reader) Proxies {
	p, err := Parse(env.List(EnvTrustedProxies, nil))
	if err != nil {
		env.Failf(EnvTrustedProxies, "%v", err)
	}
	return p
}

// Len is the number of trusted ranges.
func (p Proxies) Len() int { return len(p.prefixes) }

func (p Proxies) trusts(a netip.Addr) bool {
	for _, prefix := range p.prefixes {
		if prefix.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the request's client address, without a port; "" when the
// connection has none. With no proxy trusted it is the connection's
// address as the server reports it, as before the setting existed. An
// untrusted connection is the client (normalised as the header's entries
// are). From a trusted one, X-Forwarded-For (all its lines, as one
// comma-separated list) is read from the right, skipping trusted
// addresses: the first untrusted one is the client, since only what
// trusted proxies appended is believed and everything left of it the
// client wrote itself. When every entry read is trusted, the leftmost of
// them is; an entry that is not an IP ends the walk (no trusted proxy
// writes one); with no trusted entry read, the connection is.
func (p Proxies) Client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	if len(p.prefixes) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	peer = peer.WithZone("").Unmap()
	client := peer.String()
	if !p.trusts(peer) {
		return client
	}
	lines := r.Header.Values(headerForwardedFor)
	hops := 0
	for i := len(lines) - 1; i >= 0 && hops < MaxHops; i-- {
		rest := lines[i]
		for hops < MaxHops {
			entry := rest
			comma := strings.LastIndexByte(rest, ',')
			if comma >= 0 {
				entry, rest = rest[comma+1:], rest[:comma]
			}
			hops++
			a, ok := parseHop(entry)
			if !ok {
				return client
			}
			if !p.trusts(a) {
				return a.String()
			}
			client = a.String()
			if comma < 0 {
				break
			}
		}
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an IP, with or without a port
// ("203.0.113.7:5150", "[2001:db8::1]:443", "[2001:db8::1]"); IPv4-mapped
// IPv6 reads as IPv4, a zone is dropped.
func parseHop(entry string) (netip.Addr, bool) {
	entry = strings.TrimSpace(entry)
	a, err := netip.ParseAddr(entry)
	if err != nil {
		ap, perr := netip.ParseAddrPort(entry)
		switch {
		case perr == nil:
			a = ap.Addr()
		case len(entry) > 2 && entry[0] == '[' && entry[len(entry)-1] == ']':
			if a, err = netip.ParseAddr(entry[1 : len(entry)-1]); err != nil {
				return netip.Addr{}, false
			}
		default:
			return netip.Addr{}, false
		}
	}
	return a.WithZone("").Unmap(), true
}

type clientKey struct{}

// Handler resolves each request's client once (Client) and keeps it in
// the request's context for Of. With no trusted proxy it adds nothing:
// Of reads the connection then, as before the setting existed.
func (p Proxies) Handler(next http.Handler) http.Handler {
	if len(p.prefixes) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), clientKey{}, p.Client(r))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Of is the client address Handler resolved for r, or, without Handler,
// the connection's address (no port; "" when it has none).
func Of(r *http.Request) string {
	if a, ok := r.Context().Value(clientKey{}).(string); ok {
		return a
	}
	return Proxies{}.Client(r)
}
