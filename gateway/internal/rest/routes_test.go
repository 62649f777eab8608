package rest

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
)

// Every annotated RPC in the OpenAPI document has exactly one route in the
// gateway's table, and the other way round.
func TestRouteTableMatchesOpenAPI(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	served, err := openAPIDocument() // generated, plus the gateway's own upload route
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(served, &doc))
	var fromDoc, fromTable []string
	for path, ops := range doc.Paths {
		for method := range ops {
			fromDoc = append(fromDoc, routeKey(strings.ToUpper(method), path))
		}
	}
	for _, r := range Routes {
		fromTable = append(fromTable, r.Key())
	}
	sort.Strings(fromDoc)
	sort.Strings(fromTable)
	require.Equal(t, fromDoc, fromTable)
}

// rateLimits is a minute/hour/day reply as the auth service sends it.
func rateLimits(minute, hour, day int64) *authv1.RateLimits {
	return &authv1.RateLimits{Tiers: []*authv1.TierLimit{
		{Tier: "minute", Value: minute}, {Tier: "hour", Value: hour}, {Tier: "day", Value: day}}}
}

// A route the gateway serves itself must be listed, with its access rule,
// in localRoutes (which /api/config shows).
func TestLocalRoutesMustBeListed(t *testing.T) {
	require.NotPanics(t, func() { checkListed("GET", "/api/stats", APIKey) })
	require.NotPanics(t, func() { checkListed("GET", "/{$}", Public) })
	require.NotPanics(t, func() { checkListed("GET", "/assets/", Public) })
	require.PanicsWithValue(t, "rest: GET /api/new-panel is mounted but not listed in localRoutes",
		func() { checkListed("GET", "/api/new-panel", Public) })
	require.PanicsWithValue(t, "rest: GET /api/stats is mounted as public but listed in localRoutes as api-key",
		func() { checkListed("GET", "/api/stats", Public) })
}
