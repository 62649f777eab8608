// Package allowcache remembers, for a few seconds, that auth allowed a key
// for an operation, so that the next call of that key may start its backend
// work while auth.Check runs instead of after it.
//
// It never replaces the check: every call is still checked (and counted by
// the rate limiter), a denial still cancels the work and nothing from it is
// returned. What the cache changes is only whether work may start before
// the check answers. A key is remembered with the smallest number of units
// auth said it had left, and each early start spends one, so a key close
// to its limit waits for the check again: an unknown, revoked or
// exhausted key starts no backend work (only concurrent calls already in
// flight when a key runs out may have started some, and their results are
// discarded). A denial forgets the key at once. Entries are keyed by a
// SHA-256 of key and operation; the key itself is never held.
package allowcache

import (
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultTTL is how long an allow is remembered.
const DefaultTTL = 5 * time.Second

// DefaultMaxEntries bounds the memory of one replica.
const DefaultMaxEntries = 10_000

// Cache is safe for concurrent use. A nil *Cache remembers nothing.
type Cache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]entry
}

type entry struct {
	until  time.Time
	budget int64 // early starts left
}

// New returns a cache remembering allows for ttl, at most max entries; nil
// (remember nothing) when ttl <= 0.
func New(ttl time.Duration, max int) *Cache {
	if ttl <= 0 {
		return nil
	}
	if max <= 0 {
		max = DefaultMaxEntries
	}
	return &Cache{ttl: ttl, max: max, now: time.Now, entries: map[[sha256.Size]byte]entry{}}
}

func id(key, op string) [sha256.Size]byte {
	return sha256.Sum256([]byte(op + "\x00" + key))
}

// Take reports whether the call may start its work before the check
// answers, spending one unit of the remembered budget.
func (c *Cache) Take(key, op string) bool {
	if c == nil {
		return false
	}
	k := id(key, op)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || e.budget <= 0 || !c.now().Before(e.until) {
		return false
	}
	e.budget--
	c.entries[k] = e
	return true
}

// Allowed remembers that the check allowed the key, with remaining units
// left in its tightest rate-limit tier; remaining <= 0 forgets it.
func (c *Cache) Allowed(key, op string, remaining int64) {
	if c == nil {
		return
	}
	k := id(key, op)
	c.mu.Lock()
	defer c.mu.Unlock()
	if remaining <= 0 {
		delete(c.entries, k)
		return
	}
	now := c.now()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		for ek, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, ek)
			}
		}
		if len(c.entries) >= c.max {
			return // full of live entries: this key just waits for its checks
		}
	}
	c.entries[k] = entry{until: now.Add(c.ttl), budget: remaining}
}

// Forget drops the key: the check denied it, or could not tell.
func (c *Cache) Forget(key, op string) {
	if c == nil {
		return
	}
	k := id(key, op)
	c.mu.Lock()
	delete(c.entries, k)
	c.mu.Unlock()
}

// Len is the number of entries (for tests).
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
