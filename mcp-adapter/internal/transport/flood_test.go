package transport_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	platform "github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/connlimit/floodtest"
	"github.com/bmcis/knowledge/platform/origin"

	"github.com/bmcis/knowledge/mcp-adapter/internal/config"
	"github.com/bmcis/knowledge/mcp-adapter/internal/testfake"
	"github.com/bmcis/knowledge/mcp-adapter/internal/tools"
	"github.com/bmcis/knowledge/mcp-adapter/internal/transport"
	"github.com/bmcis/knowledge/mcp-adapter/internal/warnings"
)

// The review's flood (issue 29): 600 idle keep-alive connections and 50
// half-sent requests held against the HTTP server as the binary runs it, on
// its default limits. The flood comes from other loopback addresses than
// the new caller, as it would from other clients: a new MCP call is
// answered within 1 s, and the half-sent requests are cut within 20 s.
func TestConnectionFloodLeavesRoomForANewCaller(t *testing.T) {
	env := testfake.Start(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := tools.New(tools.Options{Clients: env.Clients, Key: tools.APIKeyFromContext, KeyHint: transport.HTTPKeyHint, Thresholds: warnings.Defaults, Logger: logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	h := transport.CheckOrigin(origin.New(addr), transport.HTTPHandler(m, env.Clients, logger, 0, nil))
	cfg := config.Load(platform.FromMap(map[string]string{config.EnvServiceToken: "service-token-0123456789abcdef0123456789", config.EnvTransport: "http",
		config.EnvCursorSecret: "cursor-secret-0123456789abcdef0123456789"}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- transport.Serve(ctx, ln, h, transport.ServerLimits{Read: cfg.HTTPReadTimeout, Idle: cfg.HTTPIdleTimeout, Conns: cfg.HTTPConns}, logger)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	floodtest.Idle(t, addr, floodtest.Addrs(2, 5), 600, "/healthz")
	sent := time.Now()
	half := floodtest.HalfSent(t, addr, floodtest.Addrs(20, 2), 50)

	call, cancelCall := context.WithTimeout(context.Background(), time.Second)
	defer cancelCall()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tools.ToolGetChunks + `","arguments":{"chunk_ids":[1001]}}}`
	req, err := http.NewRequestWithContext(call, http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-API-Key", testfake.KeyGood)
	resp, err := floodtest.Client("127.0.0.1").Do(req)
	require.NoError(t, err, "a new MCP call is answered within 1 s")
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	require.Contains(t, string(answer), `"status":"success"`)

	floodtest.WaitCut(t, half, sent.Add(20*time.Second))
}
