package faults_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// searchOutage is how long the search service stays down in
// TestSearchKilledLongOutage: long enough that an unbounded exponential
// reconnect backoff (gRPC's default grows to 120 s) would sleep well past
// the restart, short enough for CI.
const searchOutage = 20 * time.Second

// TestSearchKilledLongOutage: the search service is killed (-9) and stays
// down for searchOutage under a light load, then starts again on its
// address. During the outage searches fail with a retryable
// SERVICE_UNAVAILABLE, quickly, while the vendor tool keeps working; the
// adapter's first successful search comes within 2 s of the restart.
func TestSearchKilledLongOutage(t *testing.T) {
	e := newEnv(t, envOptions{Data: true})
	a := e.startAdapter(t, "")
	search := e.stack.Service(stacktest.Search)
	query := func(i int) result {
		return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("vendor contracts review %d", i)})
	}
	require.True(t, query(0).ok())
	l := startLoad(2, 1000, func(i int) result {
		if i%2 == 0 {
			return a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Initech"})
		}
		return query(i)
	})
	search.Kill(t)
	down := time.Now()
	time.Sleep(searchOutage)
	search.Start(t)
	up := time.Now()
	back := waitOK(t, 30*time.Second, func() result { return query(-1) })
	results := l.finish()

	var failed, vendorOK, slowest int
	for _, r := range results {
		require.NoError(t, r.r.Transport)
		if r.start.After(down) && r.end.Before(up) {
			if r.r.ok() {
				vendorOK++
			}
			if ms := int(r.end.Sub(r.start).Milliseconds()); ms > slowest {
				slowest = ms
			}
		}
		if r.r.Code != "" {
			failed++
			require.Equal(t, "SERVICE_UNAVAILABLE", r.r.Code, "%s", r.r)
			require.True(t, r.r.Retryable)
		}
	}
	t.Logf("%d calls, %d failed, %d vendor calls served during the outage, slowest call in the outage %d ms; first search %s after the restart",
		len(results), failed, vendorOK, slowest, back)
	require.Positive(t, failed)
	require.Positive(t, vendorOK, "a search outage must not take the vendor tool down")
	require.Less(t, slowest, 3000, "a call in the outage must fail fast")
	require.LessOrEqual(t, back, recoveryBound, "first search %s after search was back", back)
}

// TestSIGTERMDuringBurst: search gets SIGTERM during a burst of searches.
// It drains as in Kubernetes (health NOT_SERVING, serving on for the drain
// delay, then waiting for calls in flight): every call that started before
// the signal completes successfully, the process exits cleanly, and calls
// after it are refused with a retryable SERVICE_UNAVAILABLE.
func TestSIGTERMDuringBurst(t *testing.T) {
	e := newEnv(t, envOptions{Data: true, SearchEnv: map[string]string{"BMCIS_SHUTDOWN_DRAIN": "1s"}})
	a := e.startAdapter(t, "")
	search := e.stack.Service(stacktest.Search)
	l := startLoad(12, 4000, func(i int) result {
		return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("incident escalation %d", i), "response_mode": "full"})
	})
	time.Sleep(time.Second)
	signalled := time.Now()
	require.NoError(t, search.Signal(syscall.SIGTERM))
	require.True(t, search.Wait(15*time.Second), "search did not exit after SIGTERM")
	exited := time.Now()
	time.Sleep(500 * time.Millisecond)
	results := l.finish()
	require.True(t, search.LogContains(`"msg":"stopped"`), "search did not stop cleanly")
	require.False(t, search.LogContains("shutdown timeout"))

	var before, after int
	for _, r := range results {
		require.NoError(t, r.r.Transport)
		switch {
		case r.start.Before(signalled):
			before++
			require.True(t, r.r.ok(), "a call in flight at SIGTERM failed: %s", r.r)
		case r.start.After(exited):
			after++
			require.Equal(t, "SERVICE_UNAVAILABLE", r.r.Code, "%s", r.r)
			require.True(t, r.r.Retryable)
		}
	}
	t.Logf("%d calls: %d started before SIGTERM (all succeeded), %d after search exited (refused); drained in %s",
		len(results), before, after, exited.Sub(signalled))
	require.Positive(t, before)
	require.Positive(t, after)
}
