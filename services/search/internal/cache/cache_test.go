package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEpochInvalidation(t *testing.T) {
	c := New[int](10, time.Minute)
	e := c.Epoch()
	c.Put("a", e, 1)
	v, ok := c.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)

	// A value computed before an invalidation is never stored after it.
	stale := c.Epoch()
	c.Invalidate()
	c.Put("b", stale, 2)
	_, ok = c.Get("b")
	require.False(t, ok)
	_, ok = c.Get("a")
	require.False(t, ok)
	c.Put("a", c.Epoch(), 3)
	v, ok = c.Get("a")
	require.True(t, ok)
	require.Equal(t, 3, v)
}

func TestTTLAndSize(t *testing.T) {
	c := New[int](2, 50*time.Millisecond)
	c.Put("a", c.Epoch(), 1)
	c.Put("b", c.Epoch(), 2)
	c.Put("c", c.Epoch(), 3)
	_, ok := c.Get("a")
	require.False(t, ok, "least recently used evicted")
	require.Equal(t, 2, c.Len())
	time.Sleep(80 * time.Millisecond)
	_, ok = c.Get("c")
	require.False(t, ok, "expired")

	off := New[int](0, time.Minute)
	off.Put("a", off.Epoch(), 1)
	_, ok = off.Get("a")
	require.False(t, ok, "size 0 disables the cache")
}

func TestNormalizeQuery(t *testing.T) {
	for in, want := range map[string]string{
		"  Security   Reviews\t": "security reviews",
		"ＳＥＣＵＲＩＴＹ":               "security",
		"café":                   "café",
		"cafe\u0301":             "café",
		"multi\nline\r\n query ": "multi line query",
	} {
		require.Equal(t, want, NormalizeQuery(in), "%q", in)
	}
}
