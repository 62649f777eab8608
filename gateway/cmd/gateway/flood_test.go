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
	"github.com/bmcis/knowledge/platform/connlimit/floodtest"
	"github.com/bmcis/knowledge/platform/logging"
)

// The review's flood (issue 29) against the gateway as the binary serves
// it, on its default limits: 600 idle keep-alive connections and 50
// half-sent requests held from other loopback addresses than the new
// caller's. The new caller is answered within 1 s, and the half-sent
// requests are cut within 20 s. The backends are addresses nothing
// answers on: /healthz is the gateway's own.
func TestConnectionFloodLeavesRoomForANewCaller(t *testing.T) {
	env := config.FromMap(map[string]string{
		"BMCIS_SERVICE_TOKEN":           "service-token-0123456789abcdef0123456789",
		"BMCIS_GATEWAY_METRICS_ADDR":    "off",
		"BMCIS_MCP_HEALTH_URL":          "off",
		"BMCIS_SEARCH_ADDR":             "127.0.0.1:1",
		"BMCIS_VENDORGRAPH_ADDR":        "127.0.0.1:1",
		"BMCIS_AUTH_ADDR":               "127.0.0.1:1",
		"BMCIS_SEARCH_METRICS_URL":      "off",
		"BMCIS_VENDORGRAPH_METRICS_URL": "off",
		"BMCIS_AUTH_METRICS_URL":        "off",
	})
	cfg := settings.Load(env)
	require.NoError(t, env.Err())
	log := logging.New(io.Discard, "gateway", "error")
	g, err := gateway.New(cfg, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, g, cfg, ln, log) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done); g.Close() })

	floodtest.Idle(t, addr, floodtest.Addrs(2, 5), 600, "/healthz")
	sent := time.Now()
	half := floodtest.HalfSent(t, addr, floodtest.Addrs(20, 2), 50)

	call, cancelCall := context.WithTimeout(context.Background(), time.Second)
	defer cancelCall()
	req, err := http.NewRequestWithContext(call, http.MethodGet, "http://"+addr+"/healthz", nil)
	require.NoError(t, err)
	resp, err := floodtest.Client("127.0.0.1").Do(req)
	require.NoError(t, err, "a new caller is answered within 1 s")
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	floodtest.WaitCut(t, half, sent.Add(20*time.Second))
}
