package allowcache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTake(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(5*time.Second, 3)
	c.now = func() time.Time { return now }

	require.False(t, c.Take("k1", "op"), "never allowed: wait for the check")
	c.Allowed("k1", "op", 2)
	require.False(t, c.Take("k1", "other-op"), "allowed for one operation only")
	require.True(t, c.Take("k1", "op"))
	require.True(t, c.Take("k1", "op"))
	require.False(t, c.Take("k1", "op"), "budget spent: the key may be about to run out")

	c.Allowed("k1", "op", 10)
	now = now.Add(5 * time.Second)
	require.False(t, c.Take("k1", "op"), "expired")

	c.Allowed("k1", "op", 10)
	c.Forget("k1", "op")
	require.False(t, c.Take("k1", "op"), "a denial forgets at once")

	c.Allowed("k1", "op", 0)
	require.False(t, c.Take("k1", "op"), "no units left: not remembered")
}

func TestBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(time.Second, 2)
	c.now = func() time.Time { return now }
	c.Allowed("a", "op", 5)
	c.Allowed("b", "op", 5)
	c.Allowed("c", "op", 5)
	require.Equal(t, 2, c.Len())
	require.False(t, c.Take("c", "op"), "full of live entries")
	now = now.Add(time.Second)
	c.Allowed("c", "op", 5)
	require.Equal(t, 1, c.Len(), "expired entries make room")
	require.True(t, c.Take("c", "op"))
}

func TestNilRemembersNothing(t *testing.T) {
	c := New(0, 0)
	require.Nil(t, c)
	c.Allowed("k", "op", 5)
	require.False(t, c.Take("k", "op"))
	c.Forget("k", "op")
	require.Equal(t, 0, c.Len())
}
