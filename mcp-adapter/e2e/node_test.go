package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
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
	node, npm := nodeTools(t)
	s := demo(t)
	k := key(t)
	bin := stacktest.Binary(t, "mcp-adapter")
	dir := nodeClientDir(t, npm)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	runNode := func(t *testing.T, config []byte) { runNodeE2E(ctx, t, node, dir, config) }

	t.Run("bridge", func(t *testing.T) {
		// A key of its own: its audit entries are this run's alone.
		k := s.CreateKey(t, stacktest.Key{Name: "node-bridge", PerMinute: 10_000, PerHour: 100_000, PerDay: 1_000_000})
		base := adapterHTTP(t, s, map[string]string{"BMCIS_AUDIT_FLUSH_INTERVAL": "20ms"})
		data := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(data, "demo-api-key"), []byte(k+"\n"), 0o600))
		script := exec.CommandContext(ctx, filepath.Join("..", "..", "deploy", "local", "desktop-config.sh"), "print")
		script.Env = append(os.Environ(), "BMCIS_DATA_DIR="+data, "BMCIS_MCP_URL="+base+"/mcp", "BMCIS_MCP_ADAPTER_BIN="+bin)
		config, err := script.Output()
		require.NoError(t, err)
		srv := desktopServer(t, config)
		require.Equal(t, bin, srv.Command)
		require.Equal(t, map[string]string{"BMCIS_MCP_URL": base + "/mcp", "BMCIS_API_KEY": k}, srv.Env,
			"the Desktop holds the endpoint and its own key, nothing else")
		runNode(t, config)

		// The endpoint records the Desktop's own name (e2e.mjs's client),
		// through the bridge.
		conn, err := grpcclient.Dial(s.Addr(stacktest.Auth), stacktest.AdminToken)
		require.NoError(t, err)
		defer conn.Close()
		auth := authv1.NewAuthServiceClient(conn)
		var events []*authv1.AuditEvent
		require.Eventually(t, func() bool {
			resp, err := auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{Principal: stacktest.KeyID(k)})
			require.NoError(t, err)
			events = resp.GetEvents()
			// The last call of e2e.mjs: "Acme", resolved by elicitation.
			return len(events) > 0 && events[0].GetTool() == "find_vendor_info" && events[0].GetOutcome() == "ok"
		}, 20*time.Second, 20*time.Millisecond, "%v", events)
		for _, e := range events {
			require.Equal(t, "bmcis-e2e via bmcis-knowledge-bridge", e.GetClientName(), "%s %s", e.GetTool(), e.GetRequestId())
		}
	})

	t.Run("direct", func(t *testing.T) {
		env := map[string]string{"BMCIS_API_KEY": k, "BMCIS_LOG_LEVEL": "warn"}
		for name, v := range s.ClientEnv() {
			if name != "BMCIS_ADMIN_TOKEN" {
				env[name] = v
			}
		}
		env["BMCIS_SERVICE_TOKEN"] = stacktest.AdapterToken
		config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"bmcis-knowledge": map[string]any{"command": bin, "env": env},
		}})
		require.NoError(t, err)
		runNode(t, config)
	})
}
