package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/gateway/internal/gateway"
	"github.com/bmcis/knowledge/gateway/internal/settings"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/logging"
)

// A bad configuration stops the binary with exit code 2 before it listens.
func TestBadConfigurationExitsTwo(t *testing.T) {
	t.Setenv("BMCIS_GATEWAY_ADDR", "not-an-address")
	t.Setenv("BMCIS_GATEWAY_CORS_ORIGINS", "*.example.com")
	if code := run(); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
}

// serve answers on the listener it is given and returns cleanly once its
// context ends. The services are not running: the gateway still serves its
// own routes.
func TestServeAnswersThenDrains(t *testing.T) {
	env := config.FromMap(map[string]string{
		"BMCIS_GATEWAY_METRICS_ADDR": "off", "BMCIS_MCP_HEALTH_URL": "off",
		"BMCIS_SEARCH_METRICS_URL": "off", "BMCIS_VENDORGRAPH_METRICS_URL": "off", "BMCIS_AUTH_METRICS_URL": "off",
		"BMCIS_SHUTDOWN_TIMEOUT": "5s",
	})
	cfg := settings.Load(env)
	require.NoError(t, env.Err())
	log := logging.New(io.Discard, "gateway", "error")
	g, err := gateway.New(cfg, log)
	require.NoError(t, err)
	defer g.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, g, cfg, lis, log) }()
	resp, err := http.Get("http://" + lis.Addr().String() + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok\n", string(body))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	require.Equal(t, "stopped", g.Health().State, "a draining gateway says so")
}
