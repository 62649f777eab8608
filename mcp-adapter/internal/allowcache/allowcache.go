// Package allowcache remembers, for a few seconds, that auth allowed a key
// for an operation and with which scope (the key's categories and tools,
// the caller's access set), so that the next call of that key may start its
// backend work, inside that remembered scope, while auth.Check runs instead
// of after it.
//
// It never replaces the check: every call is still checked (and counted by
// the rate limiter), a denial still cancels the work and nothing from it is
// returned, and so does an allow with another scope than the one the work
// started with (the caller then waits for work under the new scope). What
// the cache changes is only whether work may start before the check
// answers. A key is remembered with the smallest number of units
// auth said it had left, and each early start spends one, so a key close
// to its limit waits for the check again: an unknown, revoked or
// exhausted key starts no backend work (only concurrent calls already in
// flight when a key runs out may have started some, and their results are
// discarded). A denial forgets the key at once. Entries are keyed by a
// SHA-256 of key and operation; the key itself is never held.
package allowcache

import (
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTTL is how long an allow is remembered.
const DefaultTTL = 5 * time.Second

// DefaultMaxEntries bounds the memory of one replica.
const DefaultMaxEntries = 10_000

// MaxScopeBytes bounds the memory of the scope one entry remembers: each
// name counts its bytes plus a string header (16 bytes). A key's own scope
// is bounded by auth (at most 50 categories of 100 characters, three
// tools), but an OAuth token's categories are not, and an access set may
// hold a user and up to access.MaxEntries groups: a scope larger than this
// is not remembered and its key waits for its checks. Stored scopes are
// copied to their exact size, so the entries hold at most about
// DefaultMaxEntries × 2 KiB; a user and a few groups take a few hundred bytes.
const MaxScopeBytes = 2048

// Scope is what auth allowed a key with: its category and tool scopes and
// the caller's access set, each sorted and without repeats (NewScope), so
// two scopes are equal when they hold the same names. It holds no secret.
type Scope struct {
	Categories []string
	Access     []string
	Tools      []string
}

// NewScope normalises the lists a check answered with. Lists already
// sorted and distinct (the access set always is) are used as they are, not
// copied: the caller must not change them afterwards.
func NewScope(categories, access, tools []string) Scope {
	return Scope{Categories: sortedSet(categories), Access: sortedSet(access), Tools: sortedSet(tools)}
}

func sortedSet(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			out := slices.Clone(names)
			slices.Sort(out)
			return slices.Compact(out)
		}
	}
	return names
}

// Equal reports whether both scopes hold exactly the same names.
func (s Scope) Equal(o Scope) bool {
	return slices.Equal(s.Categories, o.Categories) && slices.Equal(s.Access, o.Access) && slices.Equal(s.Tools, o.Tools)
}

func (s Scope) clone() Scope {
	return Scope{Categories: slices.Clip(slices.Clone(s.Categories)), Access: slices.Clip(slices.Clone(s.Access)),
		Tools: slices.Clip(slices.Clone(s.Tools))}
}

func (s Scope) bytes() int {
	n := 0
	for _, list := range [][]string{s.Categories, s.Access, s.Tools} {
		for _, name := range list {
			n += len(name) + 16
		}
	}
	return n
}

// Cache is safe for concurrent use. A nil *Cache remembers nothing.
type Cache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]entry

	started, kept, discarded atomic.Int64
}

type entry struct {
	until  time.Time
	budget int64 // early starts left
	scope  Scope
}

// Stats counts early starts: how many began (Take), and of those settled,
// how many answered the call (the check allowed the same scope) and how
// many were thrown away (a denial, an error, another scope).
type Stats struct {
	Started, Kept, Discarded int64
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
// answers, and the scope the work must run in (the one the key was last
// allowed with), spending one unit of the remembered budget.
func (c *Cache) Take(key, op string) (Scope, bool) {
	if c == nil {
		return Scope{}, false
	}
	k := id(key, op)
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || e.budget <= 0 || !c.now().Before(e.until) {
		return Scope{}, false
	}
	e.budget--
	c.entries[k] = e
	c.started.Add(1)
	return e.scope, true
}

// Settled records what became of an early start: kept when its result
// answered the call.
func (c *Cache) Settled(kept bool) {
	if c == nil {
		return
	}
	if kept {
		c.kept.Add(1)
	} else {
		c.discarded.Add(1)
	}
}

// Stats returns the counts of early starts so far.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return Stats{Started: c.started.Load(), Kept: c.kept.Load(), Discarded: c.discarded.Load()}
}

// Allowed remembers that the check allowed the key with scope, with
// remaining units left in its tightest rate-limit tier; remaining <= 0, or
// a scope larger than MaxScopeBytes, forgets it.
func (c *Cache) Allowed(key, op string, remaining int64, scope Scope) {
	if c == nil {
		return
	}
	k := id(key, op)
	c.mu.Lock()
	defer c.mu.Unlock()
	if remaining <= 0 || scope.bytes() > MaxScopeBytes {
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
	if old, ok := c.entries[k]; ok && old.scope.Equal(scope) {
		scope = old.scope // the steady state: nothing new to keep
	} else {
		scope = scope.clone() // exact-size copies, not the check answer's slices
	}
	c.entries[k] = entry{until: now.Add(c.ttl), budget: remaining, scope: scope}
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
