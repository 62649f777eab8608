package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/rest"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// The gateway sends auth the address of each REST caller, so made-up keys
// from one client are throttled once its budget of failed checks is spent
// (429 AUTH_THROTTLED, no database lookup), while a key auth holds in
// memory keeps working from there.
func TestMadeUpKeysAreThrottledAgainstServices(t *testing.T) {
	s := newStackWith(t, stacktest.Options{ServiceEnv: map[string]map[string]string{
		stacktest.Auth: {"BMCIS_AUTH_FAILED_CHECKS_PER_CLIENT": "3"},
	}}, nil)
	good := s.createKey(`{"name":"e2e-throttle"}`)
	require.True(t, passedAuth(s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, good)))

	// Well-formed (a malformed key costs no lookup and is never throttled),
	// and each id new.
	madeUp := func(i int) string {
		return fmt.Sprintf("bmcis_madeupkeyzzzzzz%c_%s", 'a'+i, strings.Repeat("a", 52))
	}
	for i := range 3 {
		r := s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, madeUp(i))
		require.Equal(t, http.StatusUnauthorized, r.status, "body: %s", r.body)
		require.Equal(t, "AUTH_INVALID", r.errBody(t).Code)
	}
	r := s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, madeUp(3))
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	require.Equal(t, "AUTH_THROTTLED", r.errBody(t).Code)
	require.NotEmpty(t, r.header.Get("Retry-After"))

	require.True(t, passedAuth(s.do("GET", "/v1/categories", "", rest.HeaderAPIKey, good)), "a key auth holds in memory still works")
}
