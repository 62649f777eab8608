package memo

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetPutAndBound(t *testing.T) {
	m := New[int](4)
	_, ok := m.Get("a")
	require.False(t, ok)
	m.Put("a", 1)
	v, ok := m.Get("a")
	require.True(t, ok)
	require.Equal(t, 1, v)
	v, ok = m.GetBytes([]byte("a"))
	require.True(t, ok)
	require.Equal(t, 1, v)

	for i := 0; i < 10_000; i++ {
		m.Put(strconv.Itoa(i), i)
	}
	held := 0
	for i := range m.shards {
		require.LessOrEqual(t, len(m.shards[i].m), 4, "a full shard is emptied before it grows past the bound")
		held += len(m.shards[i].m)
	}
	require.Positive(t, held)
}

func TestPrints(t *testing.T) {
	m := NewPrints[int](100)
	require.Len(t, m.slots, 128, "rounded up to a power of two")
	_, ok := m.Get(m.Of("a"))
	require.False(t, ok)
	m.Put(m.Of("a"), 1)
	v, ok := m.Get(m.OfBytes([]byte("a")))
	require.True(t, ok)
	require.Equal(t, 1, v)
	_, ok = m.Get(m.Of("b"))
	require.False(t, ok, "another string, another print")
	for i := 0; i < 10_000; i++ {
		m.Put(m.Of(strconv.Itoa(i)), i)
	}
	found := 0
	for i := 0; i < 10_000; i++ {
		if v, ok := m.Get(m.Of(strconv.Itoa(i))); ok {
			require.Equal(t, i, v, "a value found is the one stored for that string")
			found++
		}
	}
	require.Positive(t, found)
	require.LessOrEqual(t, found, 128, "bounded by its slots")
}
