package grpcserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The metrics listener answers tools (Prometheus, curl) and refuses pages
// from other origins, like every other HTTP listener of the product.
func TestMetricsListenerChecksOrigin(t *testing.T) {
	// The metrics listener takes its own port; its address is read back from
	// the server's "metrics listening" log line.
	logs := &syncBuffer{}
	srv := New(Settings{Name: "origin-test", LogLevel: "info", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: time.Second},
		WithLogOutput(logs))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var addr string
	require.Eventually(t, func() bool {
		for line := range strings.Lines(logs.String()) {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "metrics listening" {
				addr = l.Addr
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "no metrics listening line:\n%s", logs.String())

	get := func(origin string) int {
		req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		require.NoError(t, err)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(""))
	require.Equal(t, http.StatusOK, get("http://"+addr))
	require.Equal(t, http.StatusForbidden, get("https://evil.example"))
}
