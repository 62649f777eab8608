package allowcache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// releases collects what a cache gives back.
type releases struct {
	mu  sync.Mutex
	got []Release
}

func (r *releases) release(_ context.Context, rel Release) error {
	r.mu.Lock()
	r.got = append(r.got, rel)
	r.mu.Unlock()
	return nil
}

func (r *releases) units() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(0)
	for _, rel := range r.got {
		n += rel.Units
	}
	return n
}

// leaseCache is a cache with leases of lease and a clock the test moves.
func leaseCache(t *testing.T, lease time.Duration) (*Cache, *releases, func(time.Duration)) {
	t.Helper()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	rel := &releases{}
	c := New(5*time.Second, 10)
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c.WithLeases(lease, rel.release)
	t.Cleanup(c.Close)
	return c, rel, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

func TestLeaseAskedOnlyByBusyKeys(t *testing.T) {
	c, _, advance := leaseCache(t, time.Second)
	_, ok, ask := c.Spend("k", "op")
	require.False(t, ok)
	require.Zero(t, ask, "never seen: no lease")
	c.Allowed("k", "op", 100, everyone) // the first call, checked
	advance(100 * time.Millisecond)
	_, _, ask = c.Spend("k", "op")
	require.Zero(t, ask, "one call in the last window: sporadic")
	for want := int32(4); want <= 20; want += 2 {
		_, _, ask = c.Spend("k", "op")
		require.Equal(t, want, ask, "twice the calls in the last window")
		c.Allowed("k", "op", 100, everyone) // its check's answer: no lease granted
	}
	_, _, ask = c.Spend("k", "op")
	require.Equal(t, int32(22), ask)
	_, _, ask = c.Spend("k", "op")
	require.Zero(t, ask, "a concurrent call while that check runs does not ask too")
	advance(3 * time.Second)
	_, _, ask = c.Spend("k", "op")
	require.Zero(t, ask, "quiet for two windows: sporadic again")
	for range 100 {
		c.Allowed("k", "op", 100, everyone)
		_, _, ask = c.Spend("k", "op")
	}
	require.Equal(t, int32(MaxLeaseUnits), ask)
}

func TestLeaseSpentThenReleased(t *testing.T) {
	c, rel, advance := leaseCache(t, time.Second)
	hr := NewScope(nil, []string{"everyone", "group:hr"}, nil)
	c.AllowedWith("k", "op", 0, hr, Grant{KeyID: "kid", Units: 3, Valid: 2 * time.Second})
	_, ok := c.Take("k", "op")
	require.False(t, ok, "no units left for early starts: the lease alone keeps the key")
	for range 2 {
		l, ok, _ := c.Spend("k", "op")
		require.True(t, ok)
		require.Equal(t, Leased{Scope: hr, KeyID: "kid"}, l)
	}
	_, ok, _ = c.Spend("k", "other-op")
	require.False(t, ok, "a lease is for one operation")
	advance(time.Second) // the adapter's setting (1 s) bounds auth's 2 s
	_, ok, _ = c.Spend("k", "op")
	require.False(t, ok, "ended")
	require.Eventually(t, func() bool { return rel.units() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, Release{KeyID: "kid", Tool: "op", Units: 1, LastUsed: time.Unix(1000, 0)}, rel.got[0])
	require.Equal(t, int64(2), c.Stats().Leased)
	require.Eventually(t, func() bool { return c.Stats().Released == 1 }, 5*time.Second, 10*time.Millisecond)
}

func TestLeaseForgotten(t *testing.T) {
	tests := []struct {
		name string
		end  func(c *Cache)
	}{
		{"a denial", func(c *Cache) { c.Forget("k", "op") }},
		{"another scope", func(c *Cache) { c.Allowed("k", "op", 10, NewScope([]string{"hr"}, nil, nil)) }},
		{"the process stops", func(c *Cache) { c.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, rel, _ := leaseCache(t, time.Second)
			c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", Units: 5, Valid: time.Second})
			_, ok, _ := c.Spend("k", "op")
			require.True(t, ok)
			tc.end(c)
			_, ok, _ = c.Spend("k", "op")
			require.False(t, ok)
			require.Eventually(t, func() bool { return rel.units() == 4 }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

func TestLeasesOff(t *testing.T) {
	c := New(5*time.Second, 10) // no WithLeases: BMCIS_MCP_KEY_LEASE=0
	c.WithLeases(0, (&releases{}).release)
	for range 10 {
		_, ok, ask := c.Spend("k", "op")
		require.False(t, ok)
		require.Zero(t, ask)
	}
	c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", Units: 5, Valid: time.Second})
	_, ok, _ := c.Spend("k", "op")
	require.False(t, ok, "a grant is ignored")
	c.Close()
	var nilCache *Cache
	require.Nil(t, nilCache.WithLeases(time.Second, (&releases{}).release))
	nilCache.Close()
}
