package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nodeTools returns node and npm, or skips the test without them.
func nodeTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: this test needs Node.js 18 or later and npm (Debian: apt-get install nodejs npm)")
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (Debian: apt-get install npm)")
	}
	return node, npm
}

// nodeClientDir is a clean install of node/ (the MCP SDK client, as
// locked) outside the source tree, removed when the test ends.
func nodeClientDir(t *testing.T, npm string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "e2e.mjs"} {
		b, err := os.ReadFile(filepath.Join("node", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	install := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir = dir
	out, err := install.CombinedOutput()
	require.NoError(t, err, "npm ci:\n%s", out)
	return dir
}

// desktopEntry is one server of a Desktop configuration.
type desktopEntry struct {
	Command string
	Env     map[string]string
}

// desktopServer reads the bmcis-knowledge server of a Desktop-style
// {"mcpServers": {...}} configuration.
func desktopServer(t *testing.T, config []byte) desktopEntry {
	t.Helper()
	var parsed struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal(config, &parsed))
	srv, ok := parsed.MCPServers["bmcis-knowledge"]
	require.True(t, ok, "no bmcis-knowledge server in %s", config)
	return desktopEntry{Command: srv.Command, Env: srv.Env}
}

// runNodeE2E runs node/e2e.mjs (installed in dir) on a Desktop
// configuration, requires every check to pass, and returns its output.
func runNodeE2E(ctx context.Context, t *testing.T, node, dir string, config []byte) []byte {
	t.Helper()
	run := exec.CommandContext(ctx, node, "e2e.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "DESKTOP_CONFIG="+string(config))
	out, err := run.CombinedOutput()
	t.Logf("node e2e.mjs:\n%s", out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Regexp(t, `^\d+ passed, 0 failed$`, lines[len(lines)-1])
	return out
}
