// Package memo is a bounded memo table for hot, pure string functions: a
// word's stem, a text piece's token count. Inputs are Zipfian, so a bounded
// table answers almost every lookup; shards cut lock contention when many
// goroutines look up at once, and a full shard is simply emptied, which is
// cheaper than LRU bookkeeping and good enough for a Zipfian stream.
package memo

import (
	"strings"
	"sync"
)

const shards = 32

// Table maps strings to values of type V. It is safe for concurrent use.
type Table[V any] struct {
	perShard int
	shards   [shards]shard[V]
}

type shard[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

// New returns a table holding at most about perShard entries per shard
// (32 shards).
func New[V any](perShard int) *Table[V] {
	t := &Table[V]{perShard: perShard}
	for i := range t.shards {
		t.shards[i].m = make(map[string]V, 256)
	}
	return t
}

func shardOf[K string | []byte](k K) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return int(h % shards)
}

// Get returns the value stored for key.
func (t *Table[V]) Get(key string) (V, bool) {
	s := &t.shards[shardOf(key)]
	s.mu.RLock()
	v, ok := s.m[key]
	s.mu.RUnlock()
	return v, ok
}

// GetBytes is Get for a key held as bytes; it does not allocate.
func (t *Table[V]) GetBytes(key []byte) (V, bool) {
	s := &t.shards[shardOf(key)]
	s.mu.RLock()
	v, ok := s.m[string(key)]
	s.mu.RUnlock()
	return v, ok
}

// Put stores v for key. The key is copied, so a key cut from a large text
// does not keep that text alive.
func (t *Table[V]) Put(key string, v V) {
	s := &t.shards[shardOf(key)]
	s.mu.Lock()
	if len(s.m) >= t.perShard {
		s.m = make(map[string]V, 256)
	}
	s.m[strings.Clone(key)] = v
	s.mu.Unlock()
}
