package faults_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readyz returns the adapter's /readyz status code and backends.
func (a *adapter) readyz(t *testing.T) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(a.base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct{ Backends map[string]string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body.Backends
}

// TestPostgresStoppedUnderLoad: PostgreSQL is shut down under a load of MCP
// calls through the real adapter, then started again. During the outage
// every failure is a typed, retryable DB_CONNECTION or SERVICE_UNAVAILABLE
// (never a transport error), calls that need no database still succeed
// with AUTH_DEGRADED, and health says so; within 2 s of the database coming
// back, uncached searches, vendor lookups (and the vendor cache) and health
// are back.
func TestPostgresStoppedUnderLoad(t *testing.T) {
	e := newEnv(t, envOptions{Data: true})
	a := e.startAdapter(t, "")
	cachedQuery := map[string]any{"query": "incident severity levels"}
	require.True(t, a.call(e.key, "semantic_search", cachedQuery).ok())
	require.True(t, a.call(e.key, "get_chunks", map[string]any{"chunk_ids": []any{1, 2}}).ok())
	code, _ := a.readyz(t)
	require.Equal(t, http.StatusOK, code)

	calls := []func(i int) result{
		func(int) result { return a.call(e.key, "semantic_search", cachedQuery) },
		func(i int) result {
			return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("backup retention policy %d", i)})
		},
		func(int) result { return a.call(e.key, "get_chunks", map[string]any{"chunk_ids": []any{1, 2}}) },
		func(i int) result {
			return a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": []string{"Initech", "Hooli", "Wayne Enterprises"}[i%3]})
		},
	}
	l := startLoad(4, 3000, func(i int) result { return calls[i%len(calls)](i) })
	time.Sleep(time.Second)
	down := time.Now()
	e.pg.Stop()
	// Health reports the outage (after its hysteresis) while every process
	// stays up.
	require.Eventually(t, func() bool {
		code, backends := a.readyz(t)
		return code == http.StatusServiceUnavailable && backends["search"] == "DATABASE_UNAVAILABLE"
	}, 5*time.Second, 100*time.Millisecond, "readyz never reported the database")
	time.Sleep(time.Until(down.Add(5 * time.Second)))
	up := time.Now()
	e.pg.Start()
	// Recovery: calls that need the database succeed within the bound.
	vendorBack := waitOK(t, 10*time.Second, func() result {
		return a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Umbrella Corporation"})
	})
	searchBack := time.Since(up)
	waitOK(t, 10*time.Second, func() result {
		return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("after the outage %d", time.Now().UnixNano())})
	})
	searchBack = time.Since(up)
	readyBack := time.Duration(0)
	require.Eventually(t, func() bool {
		code, _ := a.readyz(t)
		readyBack = time.Since(up)
		return code == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)
	// The vendor cache is live again: a repeated lookup is a hit.
	var cacheBack time.Duration
	require.Eventually(t, func() bool {
		a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Stark Industries"})
		r := a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Stark Industries"})
		cacheBack = time.Since(up)
		ec, _ := r.Envelope["execution_context"].(map[string]any)
		hit, _ := ec["cache_hit"].(bool)
		return hit
	}, 10*time.Second, 50*time.Millisecond, "the vendor cache never came back")
	time.Sleep(500 * time.Millisecond)
	results := l.finish()
	t.Logf("recovery after PostgreSQL started: vendor %s, uncached search %s, readyz %s, vendor cache %s",
		vendorBack, searchBack, readyBack, cacheBack)

	var during, okDuring, failed int
	codes := map[string]int{}
	var degraded bool
	for _, r := range results {
		require.NoError(t, r.r.Transport, "a client saw a transport failure")
		if r.start.After(down) && r.end.Before(up) {
			during++
			if r.r.ok() {
				okDuring++
			}
			degraded = degraded || slices.Contains(r.r.Warnings, "AUTH_DEGRADED")
		}
		if r.r.Code != "" {
			failed++
			codes[r.r.Code]++
			require.Contains(t, []string{"DB_CONNECTION", "SERVICE_UNAVAILABLE"}, r.r.Code, "%s", r.r)
			require.True(t, r.r.Retryable, "%s", r.r)
		}
	}
	t.Logf("%d calls, %d during the outage (%d succeeded), failures by code %v", len(results), during, okDuring, codes)
	require.Positive(t, failed, "the outage was not seen")
	require.Positive(t, okDuring, "calls that need no database must keep working")
	require.True(t, degraded, "stale key records are served with AUTH_DEGRADED")
	for name, d := range map[string]time.Duration{"vendor": vendorBack, "search": searchBack, "readyz": readyBack, "vendor cache": cacheBack} {
		require.LessOrEqual(t, d, recoveryBound, "%s back %s after the database", name, d)
	}
}
