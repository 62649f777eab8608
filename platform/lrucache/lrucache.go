// Package lrucache is the one reply cache of the services: a bounded LRU
// whose entries expire after a TTL (golang-lru's expirable cache), with the
// invalidation rule both the search and the vendorgraph caches need.
//
// Invalidation is by epoch. A caller takes Epoch before it reads what the
// value is computed from, and Put stores the value only if no Invalidate
// happened since; Invalidate moves the epoch and drops every entry. Put and
// Invalidate are ordered by one lock, so a value computed from data older
// than an invalidation is never served after it.
//
// A cache can also be switched off (SetLive(false)) while its owner cannot
// be sure to hear about changes: it then neither serves nor stores.
package lrucache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// Cache maps keys to values. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	lru *expirable.LRU[K, V] // nil when disabled

	mu    sync.Mutex // orders Put against Invalidate and SetLive
	epoch atomic.Uint64
	live  atomic.Bool
}

// New returns a live cache of at most size entries, each kept at most ttl.
// A size of 0 or less disables it: every Get misses.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	c := &Cache[K, V]{}
	if size > 0 {
		c.lru = expirable.NewLRU[K, V](size, nil, ttl)
	}
	c.live.Store(true)
	return c
}

// Enabled reports whether the cache stores anything at all.
func (c *Cache[K, V]) Enabled() bool { return c.lru != nil }

// Live reports whether the cache serves entries now.
func (c *Cache[K, V]) Live() bool { return c.lru != nil && c.live.Load() }

// SetLive switches serving and storing on or off; either way the entries
// held are dropped, since changes may have gone unseen.
func (c *Cache[K, V]) SetLive(live bool) {
	c.mu.Lock()
	c.live.Store(live)
	c.mu.Unlock()
	c.Invalidate()
}

// Epoch returns the invalidation count, to pass to Put.
func (c *Cache[K, V]) Epoch() uint64 { return c.epoch.Load() }

// Get returns a fresh entry.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	if !c.Live() {
		var zero V
		return zero, false
	}
	return c.lru.Get(k)
}

// Put stores v unless the cache was invalidated since epoch was read.
func (c *Cache[K, V]) Put(k K, v V, epoch uint64) {
	if c.lru == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live.Load() || c.epoch.Load() != epoch {
		return
	}
	c.lru.Add(k, v)
}

// Invalidate moves the epoch and drops every entry.
func (c *Cache[K, V]) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch.Add(1)
	if c.lru != nil {
		c.lru.Purge()
	}
}

// Len returns the number of entries held (expired ones until swept).
func (c *Cache[K, V]) Len() int {
	if c.lru == nil {
		return 0
	}
	return c.lru.Len()
}
