package e2e

import (
	"context"
	"encoding/json"
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
//
// bridge: exactly the Claude Desktop configuration that `make run` prints
// (deploy/local/desktop-config.sh: the binary, BMCIS_MCP_URL and the key,
// nothing else), against an adapter serving streamable HTTP over the real
// services. direct: the operators' mode, gRPC to the services.
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
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	install.Dir = dir
	out, err := install.CombinedOutput()
	require.NoError(t, err, "npm ci:\n%s", out)

	runNode := func(t *testing.T, config []byte) {
		run := exec.CommandContext(ctx, node, "e2e.mjs")
		run.Dir = dir
		run.Env = append(os.Environ(), "DESKTOP_CONFIG="+string(config))
		out, err := run.CombinedOutput()
		t.Logf("node e2e.mjs:\n%s", out)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Regexp(t, `^\d+ passed, 0 failed$`, lines[len(lines)-1])
	}

	t.Run("bridge", func(t *testing.T) {
		base := adapterHTTP(t, s, nil)
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "demo-api-key"), []byte(k+"\n"), 0o600))
		script := exec.CommandContext(ctx, filepath.Join("..", "..", "deploy", "local", "desktop-config.sh"), "print")
		script.Env = append(os.Environ(), "BMCIS_DATA_DIR="+data, "BMCIS_MCP_URL="+base+"/mcp", "BMCIS_MCP_ADAPTER_BIN="+bin)
		config, err := script.Output()
		require.NoError(t, err)
		var parsed struct {
			MCPServers map[string]struct {
				Command string            `json:"command"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		require.NoError(t, json.Unmarshal(config, &parsed))
		srv := parsed.MCPServers["bmcis-knowledge"]
		require.Equal(t, bin, srv.Command)
		require.Equal(t, map[string]string{"BMCIS_MCP_URL": base + "/mcp", "BMCIS_API_KEY": k}, srv.Env,
			"the Desktop holds the endpoint and its own key, nothing else")
		runNode(t, config)
	})

	t.Run("direct", func(t *testing.T) {
		env := map[string]string{"BMCIS_API_KEY": k, "BMCIS_LOG_LEVEL": "warn"}
		for name, v := range s.ClientEnv() {
			if name != "BMCIS_ADMIN_TOKEN" {
				env[name] = v
			}
		}
		config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"bmcis-knowledge": map[string]any{"command": bin, "env": env},
		}})
		require.NoError(t, err)
		runNode(t, config)
	})
}
