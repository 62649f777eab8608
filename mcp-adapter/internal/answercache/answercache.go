// Package answercache keeps the MCP adapter's finished tool answers, so
// that a call repeated while the search index has not changed is answered
// without asking the search service and without building the answer again
// (issue 32).
//
// What is cached: a tool's finished success answer as the caller got it,
// less what differs per call (request id, timestamp, timings, and warnings
// about the call's own check or backend time, whose answers are not kept):
// the tools hold, per entry, the rendered answer (respond.Frozen) and what
// its audit entry names. Errors, partial answers and answers near the
// token limit are not kept.
//
// The key: a SHA-256 (KeyBuilder) over the tool, the index's epoch at the
// call (below), the call's canonical arguments (after defaults and
// validation, so that equivalent calls share an entry), the caller (its
// credential, only ever hashed: the services' caches are partitioned by
// caller too, platform/cacheowner, and a hit must tell a caller only about
// its own calls) and what the caller may read: its key's category scope
// and its access set. Two callers, or one caller whose scope changed,
// never share an entry.
//
// The bound: entries are evicted least recently used first once their
// sizes (as the tools estimate them) pass the byte bound; an entry larger
// than the bound is not kept; and an entry is dropped after the TTL
// (default 60 s, at most 10 min), a bound on memory and recency, not on
// freshness.
//
// Freshness: the tools key every entry by the epoch of internal/indexwatch,
// which follows search's WatchIndex stream: the epoch moves as soon as the
// replica the adapter watches applies a change that can alter an answer
// (a document written or deleted, its access list changed, stored vectors
// or the live model changed), so entries of the epoch before are never
// found again (they age out of the LRU). While the watcher cannot tell (no
// stream, or one silent for 3 s) the cache is neither read nor written.
// Permission changes of the caller itself (its groups or scopes) take
// effect at once: they change the key.
package answercache

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"
	"sync/atomic"
	"time"
)

// Key names an answer: KeyBuilder's SHA-256.
type Key [sha256.Size]byte

// KeyBuilder hashes the parts of a Key. Every part is written with its
// length (a list with its count), so that no two different sequences of
// parts hash the same bytes.
type KeyBuilder struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

// NewKey starts the key of a call to tool.
func NewKey(tool string) *KeyBuilder {
	k := &KeyBuilder{h: sha256.New()}
	return k.String(tool)
}

// String adds s.
func (k *KeyBuilder) String(s string) *KeyBuilder {
	k.Int(int64(len(s)))
	k.h.Write([]byte(s))
	return k
}

// Int adds n.
func (k *KeyBuilder) Int(n int64) *KeyBuilder {
	k.h.Write(k.buf[:binary.PutVarint(k.buf[:], n)])
	return k
}

// Bool adds b.
func (k *KeyBuilder) Bool(b bool) *KeyBuilder {
	if b {
		return k.Int(1)
	}
	return k.Int(0)
}

// Strings adds a list, told apart from a nil list: for a scope, nil may
// mean "unscoped" where an empty list would mean "nothing".
func (k *KeyBuilder) Strings(list []string) *KeyBuilder {
	if list == nil {
		return k.Int(-1)
	}
	k.Int(int64(len(list)))
	for _, s := range list {
		k.String(s)
	}
	return k
}

// Int64s adds a list of integers.
func (k *KeyBuilder) Int64s(list []int64) *KeyBuilder {
	k.Int(int64(len(list)))
	for _, n := range list {
		k.Int(n)
	}
	return k
}

// Sum returns the key.
func (k *KeyBuilder) Sum() Key {
	var out Key
	k.h.Sum(out[:0])
	return out
}

// Stats counts what the cache did since it was made.
type Stats struct {
	Hits, Misses, Stores, Evictions int64
	// NotStored counts answers not kept, by reason (NotKept).
	NotStored [notKeptReasons]int64
	// Bytes and Entries are what it holds now.
	Bytes   int64
	Entries int
}

// Cache is a byte-bounded LRU of answers with a TTL; safe for concurrent
// use. A nil *Cache keeps nothing (the cache off).
type Cache[V any] struct {
	ttl      time.Duration
	maxBytes int64
	now      func() time.Time

	mu      sync.Mutex
	order   *list.List // front: most recently used
	entries map[Key]*list.Element
	bytes   int64

	hits, misses, stores, evictions atomic.Int64
	notStored                       [notKeptReasons]atomic.Int64
}

// NotKept is why a finished answer was not kept, for the answers the
// cache would otherwise have taken: a small fixed set, a metric's label
// (Reasons).
type NotKept int

const (
	// OtherVersion: search computed the answer at another index version
	// than the watched one (a replica behind, or with other settings).
	OtherVersion NotKept = iota
	// NoVersion: search did not say at which version (an older release).
	NoVersion
	notKeptReasons
)

// Reasons names each NotKept, in order: a metric's label values.
var Reasons = [notKeptReasons]string{"other_version", "no_version"}

// NotStored counts an answer not kept for reason r.
func (c *Cache[V]) NotStored(r NotKept) {
	if c == nil || r < 0 || r >= notKeptReasons {
		return
	}
	c.notStored[r].Add(1)
}

type entry[V any] struct {
	key     Key
	value   V
	size    int64
	expires time.Time
}

// New returns a cache keeping answers for ttl within maxBytes, on the clock
// now (time.Now when nil); nil (off) when ttl or maxBytes is not positive.
func New[V any](ttl time.Duration, maxBytes int64, now func() time.Time) *Cache[V] {
	if ttl <= 0 || maxBytes <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{ttl: ttl, maxBytes: maxBytes, now: now, order: list.New(), entries: map[Key]*list.Element{}}
}

// Get returns the answer under k, if one was put less than the TTL ago.
func (c *Cache[V]) Get(k Key) (V, bool) {
	var zero V
	if c == nil {
		return zero, false
	}
	now := c.now()
	c.mu.Lock()
	el, ok := c.entries[k]
	if ok {
		e := el.Value.(*entry[V])
		if now.Before(e.expires) {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			c.hits.Add(1)
			return e.value, true
		}
		c.remove(el)
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return zero, false
}

// Put keeps v, whose size in bytes is size, under k for the TTL, evicting
// the least recently used answers past the byte bound. An answer larger
// than the bound is not kept.
func (c *Cache[V]) Put(k Key, v V, size int) {
	if c == nil || int64(size) > c.maxBytes {
		return
	}
	e := &entry[V]{key: k, value: v, size: int64(size), expires: c.now().Add(c.ttl)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[k]; ok {
		c.remove(old)
	}
	c.entries[k] = c.order.PushFront(e)
	c.bytes += e.size
	c.stores.Add(1)
	for c.bytes > c.maxBytes {
		c.remove(c.order.Back())
		c.evictions.Add(1)
	}
}

// remove drops el; c.mu held.
func (c *Cache[V]) remove(el *list.Element) {
	e := el.Value.(*entry[V])
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// TTL is how long an answer is kept (0 when the cache is off).
func (c *Cache[V]) TTL() time.Duration {
	if c == nil {
		return 0
	}
	return c.ttl
}

// Stats returns the counts so far.
func (c *Cache[V]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	b, n := c.bytes, len(c.entries)
	c.mu.Unlock()
	st := Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Stores: c.stores.Load(), Evictions: c.evictions.Load(), Bytes: b, Entries: n}
	for r := range st.NotStored {
		st.NotStored[r] = c.notStored[r].Load()
	}
	return st
}
