// Package backends names the servers behind the gateway (the three gRPC
// services and the MCP adapter) and says how to talk about one that cannot
// be reached without giving its address away: /api/health is public.
package backends

import "strings"

// Server names, used in routes, health entries, stats and configuration.
const (
	Search      = "search"
	VendorGraph = "vendorgraph"
	Auth        = "auth"
	MCPAdapter  = "mcp-adapter"
)

// GRPCServices maps each gRPC backend to its full service name, as the
// services' metrics and the health protocol label it.
var GRPCServices = map[string]string{
	Search:      "bmcis.search.v1.SearchService",
	VendorGraph: "bmcis.vendorgraph.v1.VendorGraphService",
	Auth:        "bmcis.auth.v1.AuthService",
}

// UnreachableReason turns a dial or transport error into a short reason
// without addresses.
func UnreachableReason(msg string) string {
	for _, r := range []string{"connection refused", "no such host", "i/o timeout", "connection reset", "network is unreachable", "EOF"} {
		if strings.Contains(msg, r) {
			return "not reachable: " + r
		}
	}
	return "not reachable"
}
