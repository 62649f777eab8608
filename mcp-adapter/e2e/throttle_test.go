package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// The adapter's HTTP transport sends auth the address of each caller's
// connection, so made-up keys from one client are throttled once its budget
// of failed checks is spent (a retryable RATE_LIMIT whose details say
// AUTH_THROTTLED), while a key auth holds in memory keeps working. The
// budget is a second auth process's, so the shared stack's is untouched.
func TestMadeUpKeysAreThrottledOverHTTP(t *testing.T) {
	s := demo(t)
	auth := s.StartService(t, stacktest.Auth, map[string]string{"BMCIS_AUTH_FAILED_CHECKS_PER_CLIENT": "3"})
	a := adapterHTTP(t, s, map[string]string{config.EnvAuthAddr: auth.Addr()})
	args := map[string]any{"query": "incident severity levels"}

	good := httpClient(t, a, map[string]string{"X-API-Key": key(t)})
	require.Equal(t, "success", status(callTool(t, good, "semantic_search", args)))

	// Well-formed (a malformed key costs no lookup and is never throttled),
	// and each id new.
	madeUp := func(i int) string {
		return fmt.Sprintf("bmcis_madeupkeyzzzzzz%c_%s", 'a'+i, strings.Repeat("a", 52))
	}
	for i := range 3 {
		c := httpClient(t, a, map[string]string{"X-API-Key": madeUp(i)})
		require.Equal(t, "AUTH_INVALID", code(callTool(t, c, "semantic_search", args)))
	}
	env := callTool(t, httpClient(t, a, map[string]string{"X-API-Key": madeUp(3)}), "semantic_search", args)
	require.Equal(t, "RATE_LIMIT", code(env))
	e := env["error"].(map[string]any)
	require.Equal(t, "AUTH_THROTTLED", e["details"].(map[string]any)["reason"])
	require.Equal(t, true, e["retryable"])

	require.Equal(t, "success", status(callTool(t, good, "semantic_search", args)), "a key auth holds in memory still works")
}
