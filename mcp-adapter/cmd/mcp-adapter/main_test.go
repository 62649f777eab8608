package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBadConfigurationExitsTwo(t *testing.T) {
	t.Setenv("BMCIS_SERVICE_TOKEN", "service-token-0123456789")
	t.Setenv("MAX_TOKENS_PER_RESPONSE", "-1")
	require.Equal(t, 2, run())
}

func TestMissingServiceTokenExitsTwo(t *testing.T) {
	t.Setenv("BMCIS_SERVICE_TOKEN", "")
	require.Equal(t, 2, run())
}

// The adapter must stay light: no database driver and none of the
// database-facing platform packages in its dependency graph.
func TestNoDatabaseDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Split(string(out), "\n") {
		for _, banned := range []string{"github.com/jackc/", "github.com/lib/pq", "github.com/pgvector/",
			"github.com/bmcis/knowledge/platform/pg", "github.com/bmcis/knowledge/platform/testdb",
			"github.com/bmcis/knowledge/migrations", "github.com/pressly/goose"} {
			require.False(t, strings.HasPrefix(dep, banned), "the adapter links %s", dep)
		}
	}
}
