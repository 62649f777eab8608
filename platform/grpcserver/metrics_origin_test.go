package grpcserver

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The metrics listener answers tools (Prometheus, curl) and refuses pages
// from other origins, like every other HTTP listener of the product.
func TestMetricsListenerChecksOrigin(t *testing.T) {
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ml.Addr().String()
	require.NoError(t, ml.Close())
	srv := New(Settings{Name: "origin-test", LogLevel: "error", MetricsAddr: addr, ShutdownTimeout: time.Second},
		WithLogOutput(&syncBuffer{}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, lis); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

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
	require.Eventually(t, func() bool { return get("") == http.StatusOK }, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusOK, get("http://"+addr))
	require.Equal(t, http.StatusForbidden, get("https://evil.example"))
}
