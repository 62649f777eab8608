package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// The adapter binary over stdio, driven by the official MCP TypeScript SDK
// client (node/e2e.mjs, @modelcontextprotocol/sdk pinned in
// node/package-lock.json), which validates every structuredContent against
// the tool's outputSchema.
func TestNodeSDKClientOverStdio(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the MCP TypeScript SDK end-to-end test needs Node.js 18 or later and npm (Debian: apt-get install nodejs npm)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the MCP TypeScript SDK end-to-end test needs it to install @modelcontextprotocol/sdk (Debian: apt-get install npm)")
	}
	s := demo(t)
	k := key(t)
	bin := stacktest.Binary(t, "mcp-adapter")

	// A clean install of the locked dependencies, outside the source tree.
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "e2e.mjs"} {
		b, err := os.ReadFile(filepath.Join("node", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir = dir
	out, err := install.CombinedOutput()
	require.NoError(t, err, "npm ci:\n%s", out)

	run := exec.CommandContext(ctx, node, "e2e.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "ADAPTER_BIN="+bin, "BMCIS_API_KEY="+k)
	for k, v := range s.ClientEnv() {
		run.Env = append(run.Env, k+"="+v)
	}
	out, err = run.CombinedOutput()
	t.Logf("node e2e.mjs:\n%s", out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Regexp(t, `^\d+ passed, 0 failed$`, lines[len(lines)-1])
}
