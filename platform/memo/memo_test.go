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
