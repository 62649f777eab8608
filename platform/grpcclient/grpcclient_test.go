package grpcclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A URL or nothing where HOST:PORT belongs is refused before dialing, with
// ErrBadAddress, instead of failing later as an unreachable service.
func TestDialRefusesAnAddressThatIsNotHostPort(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bad  bool
	}{
		{"127.0.0.1:50051", false},
		{"search.bmcis.svc:50051", false},
		{"dns:///search.bmcis.svc:50051", false},
		{"unix:///run/bmcis/search.sock", false},
		{"", true},
		{"   ", true},
		{"http://127.0.0.1:50051", true},
		{"https://kb.example.com/", true},
		{"HTTPS://kb.example.com:443", true},
	} {
		conn, err := Dial(tc.addr, "")
		if !tc.bad {
			require.NoError(t, err, tc.addr)
			require.NoError(t, conn.Close())
			continue
		}
		require.Error(t, err, tc.addr)
		require.True(t, errors.Is(err, ErrBadAddress), "%q: %v", tc.addr, err)
		require.Contains(t, err.Error(), "HOST:PORT")
	}
}

// An address that answers HTTP/1.x (the gateway's REST port, a metrics
// port) is told apart from an unreachable service: NotGRPC is true for the
// call's error, and false for a refused connection.
func TestNotGRPCRecognisesAnHTTP1Answer(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(web.Close)
	for _, tc := range []struct {
		addr    string
		notGRPC bool
	}{
		{web.Listener.Addr().String(), true},
		{"127.0.0.1:1", false}, // nothing listens: unavailable, not the wrong port
	} {
		conn, err := Dial(tc.addr, "")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		require.NoError(t, conn.Close())
		require.Error(t, err, tc.addr)
		require.Equal(t, tc.notGRPC, NotGRPC(err), "%s: %v", tc.addr, err)
		require.Equal(t, tc.notGRPC, NotGRPC(fmt.Errorf("wrapped: %w", err)), "%s: %v", tc.addr, err)
	}
	require.False(t, NotGRPC(nil))
}
