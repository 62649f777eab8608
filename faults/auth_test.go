package faults_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
)

// TestTwoAuthReplicasHoldAnExactLimit: two auth replicas share one Redis;
// two adapters, one on each, spend one key's hourly quota concurrently.
// Exactly the limit is allowed, the rest is RATE_LIMIT.
func TestTwoAuthReplicasHoldAnExactLimit(t *testing.T) {
	e := newEnv(t, envOptions{Data: true, RedisMode: "closed", AuthReplicas: 2})
	const limit = 40
	key := e.stack.CreateKey(t, stacktest.Key{Name: "exact", PerMinute: 10_000, PerHour: limit, PerDay: 10_000})
	adapters := []*adapter{e.startAdapter(t, e.auths[0].Addr()), e.startAdapter(t, e.auths[1].Addr())}
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			a := adapters[w%2]
			for range 2 * limit / 8 {
				r := a.call(key, "get_chunks", map[string]any{"chunk_ids": []any{1}})
				mu.Lock()
				if r.Transport != nil {
					codes["transport: "+r.Transport.Error()]++
				} else {
					codes[r.Code]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("outcomes: %v", codes)
	require.Equal(t, map[string]int{"": limit, "RATE_LIMIT": limit}, codes)
}
