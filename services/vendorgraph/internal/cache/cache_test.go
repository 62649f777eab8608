package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPutAfterInvalidateIsDropped(t *testing.T) {
	c := New[string, int](10, time.Minute)
	epoch := c.Epoch()
	c.Put("a", 1, epoch)
	v, ok := c.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)

	// A reply computed from data read before an invalidation must not land.
	stale := c.Epoch()
	c.Invalidate()
	_, ok = c.Get("a")
	require.False(t, ok)
	c.Put("b", 2, stale)
	_, ok = c.Get("b")
	require.False(t, ok)
	c.Put("b", 2, c.Epoch())
	_, ok = c.Get("b")
	require.True(t, ok)
}

func TestNotLiveServesNothing(t *testing.T) {
	c := New[string, int](10, time.Minute)
	c.Put("a", 1, c.Epoch())
	c.setLive(false)
	_, ok := c.Get("a")
	require.False(t, ok)
	c.Put("b", 2, c.Epoch())
	c.setLive(true)
	require.Zero(t, c.Len(), "nothing stored while not live, and going live starts empty")
}

func TestLRUBoundAndDisabled(t *testing.T) {
	c := New[int, int](3, time.Minute)
	for i := 0; i < 5; i++ {
		c.Put(i, i, c.Epoch())
	}
	require.Equal(t, 3, c.Len())
	_, ok := c.Get(0)
	require.False(t, ok, "least recently used entry evicted")

	off := New[int, int](0, time.Minute)
	off.Put(1, 1, off.Epoch())
	_, ok = off.Get(1)
	require.False(t, ok)
	require.False(t, off.Enabled())
}
