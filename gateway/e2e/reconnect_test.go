package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// After a long outage of a backend, a client dialed with platform/grpcclient
// reaches it soon after its return: its backoff stops growing at 1 s (+20%
// jitter), and the bound here is over three times that. gRPC's default
// backoff (growing to 120 s) left callers failing for many seconds after the
// service was back: after 20 s down, its next attempt came about 6 s after
// the restart.
func TestReconnectAfterALongOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 20 s outage")
	}
	st := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	conn, err := grpcclient.Dial(st.Addr(stacktest.Search), serviceToken)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	c := searchv1.NewSearchServiceClient(conn)
	// The deadline is wide: a gone backend must fail the call by itself
	// (UNAVAILABLE), and a loaded machine can delay that by hundreds of
	// milliseconds, which a tight deadline turned into DeadlineExceeded.
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		return err
	}
	require.NoError(t, call())

	svc := st.Service(stacktest.Search)
	svc.Stop(t)
	outage := time.Now()
	for time.Since(outage) < 20*time.Second {
		err := call()
		require.Equal(t, codes.Unavailable, status.Code(err), "a gone backend is a typed, retryable error: %v", err)
		time.Sleep(250 * time.Millisecond)
	}
	svc.Start(t)
	back := time.Now()
	for call() != nil {
		require.Less(t, time.Since(back), 4*time.Second, "the client reconnects within 4 s of the backend's return")
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("reconnected %v after the service was back", time.Since(back).Round(10*time.Millisecond))
}
