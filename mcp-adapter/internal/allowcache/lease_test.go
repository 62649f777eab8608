package allowcache

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/ratelimit"
)

// releases collects what a cache gives back.
type releases struct {
	mu  sync.Mutex
	got []Release
}

// release refunds every unit, except of the lease id "ended" (auth's
// record of it is gone): none.
func (r *releases) release(_ context.Context, rel Release) (int64, error) {
	r.mu.Lock()
	r.got = append(r.got, rel)
	r.mu.Unlock()
	if rel.LeaseID == "ended" {
		return 0, nil
	}
	return rel.Units, nil
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
	require.Equal(t, int32(ratelimit.MaxLeaseUnits), ask)
}

func TestLeaseSpentThenReleased(t *testing.T) {
	c, rel, advance := leaseCache(t, time.Second)
	hr := NewScope(nil, []string{"everyone", "group:hr"}, nil)
	c.AllowedWith("k", "op", 0, hr, Grant{KeyID: "kid", ID: "lease-1", Units: 3, Valid: 2 * time.Second})
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
	require.Equal(t, Release{KeyID: "kid", LeaseID: "lease-1", Tool: "op", Units: 1, LastUsed: time.Unix(1000, 0)}, rel.got[0])
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
			c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", ID: "lease-1", Units: 5, Valid: time.Second})
			_, ok, _ := c.Spend("k", "op")
			require.True(t, ok)
			tc.end(c)
			_, ok, _ = c.Spend("k", "op")
			require.False(t, ok)
			require.Eventually(t, func() bool { return rel.units() == 4 }, 5*time.Second, 10*time.Millisecond)
		})
	}
}

// TestLeaseReplaced: a new grant for a key still holding units gives the
// old lease back under its own id, so each release cites one lease.
func TestLeaseReplaced(t *testing.T) {
	c, rel, _ := leaseCache(t, time.Second)
	c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", ID: "old", Units: 5, Valid: time.Second})
	_, ok, _ := c.Spend("k", "op")
	require.True(t, ok)
	c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", ID: "new", Units: 3, Valid: time.Second})
	require.Eventually(t, func() bool { return rel.units() == 4 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "old", rel.got[0].LeaseID)
	for range 3 {
		_, ok, _ = c.Spend("k", "op")
		require.True(t, ok)
	}
	_, ok, _ = c.Spend("k", "op")
	require.False(t, ok, "the new lease's units only")
}

// TestLeaseUnitsAccountedAfterClose: every granted unit ends Leased,
// Released or Lost, also those of a check answered after Close (a check in
// flight when the process stopped), of a grant without an id and of a
// release auth refunded nothing of.
func TestLeaseUnitsAccountedAfterClose(t *testing.T) {
	tests := []struct {
		name         string
		afterClose   func(c *Cache)
		released     int64
		lost         int64
		beforeClose  Grant
		spentOnLease int64
	}{
		{"a grant after Close", func(c *Cache) {
			c.AllowedWith("k2", "op", 10, everyone, Grant{KeyID: "kid2", ID: "late", Units: 7, Valid: time.Second})
		}, 4, 7, Grant{KeyID: "kid", ID: "early", Units: 5, Valid: time.Second}, 1},
		{"a denial after Close", func(c *Cache) { c.Forget("k", "op") }, 4, 0,
			Grant{KeyID: "kid", ID: "early", Units: 5, Valid: time.Second}, 1},
		{"a grant without an id", func(*Cache) {}, 0, 5, Grant{KeyID: "kid", Units: 5, Valid: time.Second}, 0},
		{"a release auth refunds nothing of", func(*Cache) {}, 0, 4,
			Grant{KeyID: "kid", ID: "ended", Units: 5, Valid: time.Second}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, rel, _ := leaseCache(t, time.Second)
			c.AllowedWith("k", "op", 10, everyone, tc.beforeClose)
			for range tc.spentOnLease {
				_, ok, _ := c.Spend("k", "op")
				require.True(t, ok)
			}
			c.Close()
			tc.afterClose(c)
			st := c.Stats()
			require.Equal(t, tc.spentOnLease, st.Leased)
			require.Equal(t, tc.released, st.Released)
			if tc.beforeClose.ID != "ended" {
				require.Equal(t, tc.released, rel.units(), "released by Close, within its bound")
			}
			require.Equal(t, tc.lost, st.Lost)
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
	c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", ID: "lease-1", Units: 5, Valid: time.Second})
	_, ok, _ := c.Spend("k", "op")
	require.False(t, ok, "a grant is ignored")
	c.Close()
	var nilCache *Cache
	require.Nil(t, nilCache.WithLeases(time.Second, (&releases{}).release))
	nilCache.Close()
}

// TestLeaseGivenBackWithATooLargeScope: a grant that comes with a scope
// over MaxScopeBytes is not kept (the key waits for its checks), and its
// units are given back like the previous lease's, not left charged
// uncounted.
func TestLeaseGivenBackWithATooLargeScope(t *testing.T) {
	c, rel, _ := leaseCache(t, time.Second)
	c.AllowedWith("k", "op", 10, everyone, Grant{KeyID: "kid", ID: "old", Units: 3, Valid: time.Second})
	_, ok, _ := c.Spend("k", "op")
	require.True(t, ok)
	big := []string{"everyone"}
	for i := range 40 {
		big = append(big, "group:"+strings.Repeat(string(rune('a'+i%26)), 50)+string(rune('a'+i/26)))
	}
	c.AllowedWith("k", "op", 10, NewScope(nil, big, nil), Grant{KeyID: "kid", ID: "new", Units: 5, Valid: time.Second})
	require.Zero(t, c.Len(), "the key waits for its checks")
	c.Close()
	st := c.Stats()
	require.Equal(t, int64(1), st.Leased)
	require.Equal(t, int64(2+5), st.Released, "the old lease's unspent units and the new one's")
	require.Zero(t, st.Lost)
	rel.mu.Lock()
	defer rel.mu.Unlock()
	ids := make([]string, 0, len(rel.got))
	for _, r := range rel.got {
		ids = append(ids, r.LeaseID)
	}
	require.ElementsMatch(t, []string{"old", "new"}, ids, "each release cites its lease")
}
