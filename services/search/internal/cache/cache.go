// Package cache keeps ranked candidate lists per (normalized query,
// filters, mode), so later pages and repeated queries cost no database
// work. Entries expire after a TTL and the least recently used go first.
//
// Invalidation is by epoch: every entry records the replica's epoch when
// its computation started, and the replica moves its epoch whenever
// anything a ranking depends on changes (a document written or deleted, new
// embeddings, another active model). An entry from an older epoch is a
// miss and is dropped. A search racing a change can therefore never store a
// list computed on data older than what the replica already serves.
package cache

import (
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/text/unicode/norm"
)

// Cache maps keys to values of type V, with epoch invalidation.
type Cache[V any] struct {
	lru   *expirable.LRU[string, entry[V]]
	epoch atomic.Uint64
}

type entry[V any] struct {
	epoch uint64
	value V
}

// New returns a cache of at most size entries kept for ttl. size <= 0
// disables caching (every Get misses).
func New[V any](size int, ttl time.Duration) *Cache[V] {
	c := &Cache[V]{}
	if size > 0 {
		c.lru = expirable.NewLRU[string, entry[V]](size, nil, ttl)
	}
	return c
}

// Epoch is the current epoch; pass it to Put for a value computed from now on.
func (c *Cache[V]) Epoch() uint64 { return c.epoch.Load() }

// Invalidate moves the epoch (every entry becomes stale) and frees the
// entries.
func (c *Cache[V]) Invalidate() {
	c.epoch.Add(1)
	if c.lru != nil {
		c.lru.Purge()
	}
}

// Get returns a fresh value for key.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c.lru == nil {
		return zero, false
	}
	e, ok := c.lru.Get(key)
	if !ok {
		return zero, false
	}
	if e.epoch != c.epoch.Load() {
		c.lru.Remove(key)
		return zero, false
	}
	return e.value, true
}

// Put stores a value computed in epoch; it is dropped if the epoch has
// moved since.
func (c *Cache[V]) Put(key string, epoch uint64, v V) {
	if c.lru == nil || epoch != c.epoch.Load() {
		return
	}
	c.lru.Add(key, entry[V]{epoch: epoch, value: v})
}

// Len is the number of entries held (stale ones included until touched).
func (c *Cache[V]) Len() int {
	if c.lru == nil {
		return 0
	}
	return c.lru.Len()
}

// NormalizeQuery is the query part of a cache key: Unicode NFKC, lower
// case, runs of white space folded to one space, trimmed. The service ranks
// the normalized text itself (for BM25 and every embedder), so queries that
// differ only in these ways share one cached list by construction.
func NormalizeQuery(q string) string {
	q = norm.NFKC.String(q)
	var b strings.Builder
	b.Grow(len(q))
	space := false
	for _, r := range q {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
