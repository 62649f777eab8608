package dashboard

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/limits"
)

// TestDashboardInputsCarryTheLimits holds the dashboard's static inputs to
// the contract's limits (platform/limits): the browser stops the typing
// where the services would refuse the request.
func TestDashboardInputsCarryTheLimits(t *testing.T) {
	page, err := webFS.ReadFile("web/index.html")
	require.NoError(t, err)
	for id, l := range map[string]limits.Limit{"q": limits.SearchQuery, "vendor-name": limits.VendorName} {
		m := regexp.MustCompile(`<input id="` + id + `"[^>]*\smaxlength="(\d+)"`).FindSubmatch(page)
		require.NotNil(t, m, "no maxlength on input #%s", id)
		require.Equal(t, strconv.Itoa(l.Max), string(m[1]), "input #%s", id)
	}
}
