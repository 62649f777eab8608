package grpcserver

import (
	"context"
	"encoding/json"
	"io"
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
	addr := startMetrics(t, Settings{Name: "origin-test", LogLevel: "info", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: time.Second})
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

// startMetrics serves a server with settings st and returns its metrics
// listener's address, read back from the "metrics listening" log line (it
// takes its own port).
func startMetrics(t *testing.T, st Settings) string {
	t.Helper()
	logs := &syncBuffer{}
	srv := New(st, WithLogOutput(logs))
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
	return addr
}

// Profiles are served only when BMCIS_PPROF turns them on.
func TestProfilesOnlyWhenTurnedOn(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr := startMetrics(t, Settings{Name: "pprof-test", LogLevel: "info", MetricsAddr: "127.0.0.1:0",
			ShutdownTimeout: time.Second, Profiling: on})
		resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = resp.Body.Close()
		if on {
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Contains(t, string(body), "goroutine profile:")
		} else {
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
		}
	}
}
