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
// with AUTH_DEGRADED, and health says so; within 2 s of the database
// accepting connections again, uncached searches, vendor lookups (and the
// vendor cache) and health are back, each measured on its own.
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
	e.pg.Start()
	// The fault clears when PostgreSQL accepts connections again (Start
	// returns then): recovery is measured from here, not from the
	// postmaster's launch, and each check waits on its own, all at once, so
	// one slow recovery does not eat into another's bound.
	up := time.Now()
	back := waitAllOK(t, up, 10*time.Second, map[string]func() bool{
		"vendor": func() bool {
			return a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Umbrella Corporation"}).ok()
		},
		"search": func() bool {
			return a.call(e.key, "semantic_search", map[string]any{"query": fmt.Sprintf("after the outage %d", time.Now().UnixNano())}).ok()
		},
		"readyz": func() bool {
			resp, err := http.Get(a.base + "/readyz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		},
		// The vendor cache is live again: a repeated lookup is a hit.
		"vendor cache": func() bool {
			a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Stark Industries"})
			r := a.call(e.key, "find_vendor_info", map[string]any{"vendor_name": "Stark Industries"})
			ec, _ := r.Envelope["execution_context"].(map[string]any)
			hit, _ := ec["cache_hit"].(bool)
			return hit
		},
	})
	time.Sleep(500 * time.Millisecond)
	results := l.finish()
	t.Logf("recovery after PostgreSQL accepted connections: vendor %s, uncached search %s, readyz %s, vendor cache %s",
		back["vendor"], back["search"], back["readyz"], back["vendor cache"])

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
	for name, d := range back {
		require.LessOrEqual(t, d, recoveryBound, "%s back %s after the database", name, d)
	}
}
