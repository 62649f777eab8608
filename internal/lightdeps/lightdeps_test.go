// Package lightdeps keeps heavy dependencies out of the binaries that must
// stay light: the MCP adapter and the REST gateway talk to the services over
// gRPC and must never link a database driver or the migration machinery.
package lightdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// light lists binaries (by package directory, relative to the repository root).
var light = []string{
	"mcp-adapter/cmd/mcp-adapter",
	"gateway/cmd/gateway",
}

// forbidden lists import-path prefixes a light binary must not depend on.
var forbidden = []string{
	"github.com/jackc/",
	"github.com/pgvector/",
	"github.com/pressly/goose",
	"modernc.org/",
	"github.com/bmcis/knowledge/platform/pg",
	"github.com/bmcis/knowledge/platform/testdb",
	"github.com/bmcis/knowledge/migrations",
}

// forbiddenExact lists packages forbidden by exact path: database/sql itself
// means a driver is in play, while database/sql/driver is only interfaces
// (github.com/google/uuid implements them).
var forbiddenExact = []string{"database/sql"}

func TestLightBinariesStayLight(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	checked := 0
	for _, dir := range light {
		if _, err := os.Stat(filepath.Join(root, dir)); os.IsNotExist(err) {
			continue // not built yet
		}
		checked++
		t.Run(dir, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+dir)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "go list: %s", out)
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
			for _, d := range deps {
				for _, f := range forbidden {
					require.False(t, strings.HasPrefix(d, f), "%s depends on %s", dir, d)
				}
				require.NotContains(t, forbiddenExact, d, "%s depends on %s", dir, d)
			}
		})
	}
	require.Positive(t, checked, "no light binary found: has the layout changed?")
}

// TestNoBinaryLinksTheExperiments keeps the retrieval experiments
// (services/search/experiments) out of every shipped binary.
func TestNoBinaryLinksTheExperiments(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	checked := 0
	for _, dir := range []string{
		"services/search/cmd/search", "bmcisctl/cmd/bmcisctl", "services/vendorgraph/cmd/vendorgraph",
		"services/auth/cmd/auth", "mcp-adapter/cmd/mcp-adapter", "gateway/cmd/gateway",
	} {
		if _, err := os.Stat(filepath.Join(root, dir)); os.IsNotExist(err) {
			continue // moved by a later change; the binaries' list is the Makefile's
		}
		checked++
		t.Run(dir, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+dir)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "go list: %s", out)
			require.NotContains(t, string(out), "github.com/bmcis/knowledge/services/search/experiments")
		})
	}
	require.Positive(t, checked, "no binary found: has the layout changed?")
}

// bmcisctl is a module of its own that reaches the services only through
// their gRPC contracts: it builds from gen/ and platform/ (the root module)
// and never from a service's packages, so an operator's tool cannot reach
// around a service into its tables.
func TestOperatorCLIDependsOnlyOnContractsAndPlatform(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = filepath.Join(root, "bmcisctl")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/bmcis/knowledge/bmcisctl/cmd/bmcisctl")
	for _, d := range deps {
		if !strings.HasPrefix(d, "github.com/bmcis/knowledge") {
			continue
		}
		ok := d == "github.com/bmcis/knowledge" || strings.HasPrefix(d, "github.com/bmcis/knowledge/bmcisctl") ||
			strings.HasPrefix(d, "github.com/bmcis/knowledge/gen/") || strings.HasPrefix(d, "github.com/bmcis/knowledge/platform/") ||
			strings.HasPrefix(d, "github.com/bmcis/knowledge/migrations")
		require.True(t, ok, "bmcisctl depends on %s (only gen/ and the root module's platform/ and migrations/ are allowed)", d)
	}
}
