package lrucache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPutAfterInvalidateIsDropped(t *testing.T) {
	c := New[string, int](10, time.Minute)
	c.Put("a", 1, c.Epoch())
	v, ok := c.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)

	// A value computed from data read before an invalidation must not land.
	stale := c.Epoch()
	c.Invalidate()
	_, ok = c.Get("a")
	require.False(t, ok)
	c.Put("b", 2, stale)
	_, ok = c.Get("b")
	require.False(t, ok)
	c.Put("b", 3, c.Epoch())
	v, ok = c.Get("b")
	require.True(t, ok)
	require.Equal(t, 3, v)
}

func TestNotLiveServesNothing(t *testing.T) {
	c := New[string, int](10, time.Minute)
	c.Put("a", 1, c.Epoch())
	c.SetLive(false)
	require.False(t, c.Live())
	_, ok := c.Get("a")
	require.False(t, ok)
	c.Put("b", 2, c.Epoch())
	c.SetLive(true)
	require.Zero(t, c.Len(), "nothing stored while not live, and going live starts empty")
}

func TestBoundsTTLAndDisabled(t *testing.T) {
	c := New[int, int](2, 50*time.Millisecond)
	for i := 0; i < 3; i++ {
		c.Put(i, i, c.Epoch())
	}
	require.Equal(t, 2, c.Len())
	_, ok := c.Get(0)
	require.False(t, ok, "least recently used entry evicted")
	require.Eventually(t, func() bool { _, ok := c.Get(2); return !ok }, 2*time.Second, 10*time.Millisecond, "entries expire")

	off := New[int, int](0, time.Minute)
	off.Put(1, 1, off.Epoch())
	_, ok = off.Get(1)
	require.False(t, ok, "size 0 disables the cache")
	require.False(t, off.Enabled())
	require.False(t, off.Live())
}
