// Package allowcache is what the adapter remembers, for a few seconds, of
// auth's recent answers for a key and an operation: that auth allowed the
// key, with which scope (the key's categories and tools, the caller's
// access set), and any lease auth granted it. It decides, for the key's
// next call, one of three things:
//
//   - Leased (Spend): auth prepaid units for the key (a lease, asked for
//     only while the key is busy here) and some are left and not expired:
//     the call proceeds without auth.Check, in the remembered scope and as
//     the remembered principal, and spends one. Units not spent when the
//     lease ends, another lease replaces it, its entry is dropped or the
//     process stops are given back to auth (ReleaseLease, citing the
//     lease's id: auth refunds only what it granted, once), in the
//     background and in bounded time; a lost release only costs the key
//     those units until its tiers refill. A
//     revoked key is refused once its lease ends: within BMCIS_MCP_KEY_LEASE
//     (at most 5 s) on this adapter.
//   - Early (Take): the call is still checked, but its backend work may
//     start while auth.Check runs, inside the remembered scope. A denial
//     cancels the work and nothing from it is returned, and so does an
//     allow with another scope than the one the work started with (the
//     caller then waits for work under the new scope). A key is remembered
//     with the smallest number of units auth said it had left, and each
//     early start spends one, so a key close to its limit waits for the
//     check again: an unknown, revoked or exhausted key starts no backend
//     work (only concurrent calls already in flight when a key runs out may
//     have started some, and their results are discarded).
//   - Otherwise the call waits for its check.
//
// A denial, or an allow with another scope, forgets the key and its lease.
// Entries are keyed by a SHA-256 of key and operation; the key itself is
// never held (only its key id, which is not secret, for a lease's calls).
package allowcache

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmcis/knowledge/platform/ratelimit"
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

	// Leases (WithLeases); lease == 0: none are asked for.
	lease    time.Duration
	release  ReleaseFunc
	releases chan Release
	done     chan struct{}
	stop     chan struct{}
	closing  sync.Once
	closed   atomic.Bool

	mu      sync.Mutex
	entries map[[sha256.Size]byte]entry
	leased  map[[sha256.Size]byte]struct{} // entries holding lease units

	started, kept, discarded atomic.Int64
	onLease, released, lost  atomic.Int64
}

type entry struct {
	until  time.Time
	budget int64 // early starts left
	scope  Scope

	// The lease: units prepaid by auth, spendable before leaseUntil.
	keyID      string
	leaseID    string // auth's record of it (Grant.ID)
	tool       string
	units      int64
	leaseUntil time.Time
	lastUsed   time.Time // the last call that spent a unit; zero: none

	// Calls of the key seen here, in the current and the previous lease
	// window: whether it is busy enough to ask for a lease.
	window    time.Time
	cur, prev int64
	// asked: when a check was last told to ask for a lease, so that
	// concurrent calls of a key whose lease ran out ask once, not each.
	asked time.Time
}

// Stats counts early starts: how many began (Take), and of those settled,
// how many answered the call (the check allowed the same scope) and how
// many were thrown away (a denial, an error, another scope); and leases:
// calls that spent a leased unit instead of a check (Leased), units auth
// refunded (Released) and units whose release failed, was dropped or
// refunded nothing (Lost).
type Stats struct {
	Started, Kept, Discarded int64
	Leased, Released, Lost   int64
}

// Release is a lease's unspent units, to be given back to auth.
type Release struct {
	KeyID    string
	LeaseID  string // Grant.ID: auth refunds only a lease it recorded
	Tool     string
	Units    int64
	LastUsed time.Time // zero: no unit was spent
}

// ReleaseFunc gives units back to auth (AuthService.ReleaseLease) and
// returns how many auth refunded (fewer than r.Units: a lease auth no
// longer holds a record of, its record having ended).
type ReleaseFunc func(ctx context.Context, r Release) (int64, error)

// MaxLease bounds BMCIS_MCP_KEY_LEASE: how long a revoked key's calls may
// still pass on this adapter.
const MaxLease = 5 * time.Second

// releaseTimeout bounds one ReleaseLease call, and closeTimeout all those
// still queued when the process stops.
const (
	releaseTimeout = 2 * time.Second
	closeTimeout   = 3 * time.Second
	releaseQueue   = 4096
)

// New returns a cache remembering allows for ttl, at most max entries; nil
// (remember nothing) when ttl <= 0.
func New(ttl time.Duration, max int) *Cache {
	if ttl <= 0 {
		return nil
	}
	if max <= 0 {
		max = DefaultMaxEntries
	}
	return &Cache{ttl: ttl, max: max, now: time.Now, entries: map[[sha256.Size]byte]entry{},
		leased: map[[sha256.Size]byte]struct{}{}}
}

// WithLeases makes the cache ask auth for leases for busy keys, spendable
// for at most lease (BMCIS_MCP_KEY_LEASE; 0: none), and give unspent units
// back with release, from a goroutine that Close ends. It returns c.
func (c *Cache) WithLeases(lease time.Duration, release ReleaseFunc) *Cache {
	if c == nil || lease <= 0 || release == nil {
		return c
	}
	c.lease, c.release = min(lease, MaxLease), release
	c.releases = make(chan Release, releaseQueue)
	c.done, c.stop = make(chan struct{}), make(chan struct{})
	go c.run()
	return c
}

// run sends releases as they come, and every half lease moves the units of
// expired leases to the queue.
func (c *Cache) run() {
	defer close(c.done)
	tick := time.NewTicker(max(c.lease/2, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case r := <-c.releases:
			c.send(context.Background(), r, releaseTimeout)
		case <-tick.C:
			c.expire()
		case <-c.stop:
			// Close queued every lease and closed the queue: drain it.
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			for {
				select {
				case r := <-c.releases:
					c.send(ctx, r, releaseTimeout)
				default:
					return
				}
			}
		}
	}
}

func (c *Cache) send(ctx context.Context, r Release, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if ctx.Err() != nil {
		c.lost.Add(r.Units)
		return
	}
	refunded, err := c.release(ctx, r)
	if err != nil {
		refunded = 0
	}
	refunded = min(max(refunded, 0), r.Units)
	c.released.Add(refunded)
	c.lost.Add(r.Units - refunded)
}

// expire queues the units of every lease that has ended.
func (c *Cache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(false)
}

// expireLocked queues the units of every lease that has ended (all of them
// when the process stops); the caller holds mu.
func (c *Cache) expireLocked(all bool) {
	now := c.now()
	for k := range c.leased {
		e := c.entries[k]
		if all || !now.Before(e.leaseUntil) {
			c.endLease(k, &e)
			c.entries[k] = e
		}
	}
}

// endLease queues e's unspent units for release and clears its lease; the
// caller holds mu and stores e back (or drops it). Once Close has queued
// the last releases nobody reads the queue: units are then counted Lost.
func (c *Cache) endLease(k [sha256.Size]byte, e *entry) {
	delete(c.leased, k)
	if e.units > 0 {
		c.queueRelease(Release{KeyID: e.keyID, LeaseID: e.leaseID, Tool: e.tool, Units: e.units, LastUsed: e.lastUsed})
	}
	e.units, e.leaseID, e.leaseUntil, e.lastUsed = 0, "", time.Time{}, time.Time{}
}

// queueRelease queues r, or counts its units Lost when the queue is full or
// closed: they return to the key as its tiers refill. The caller holds mu.
func (c *Cache) queueRelease(r Release) {
	if c.closed.Load() {
		c.lost.Add(r.Units)
		return
	}
	select {
	case c.releases <- r:
	default:
		c.lost.Add(r.Units)
	}
}

// Close gives back the units of every lease, waiting at most a few seconds
// for auth; the cache grants no lease afterwards, and units of a lease a
// check still in flight brings back are counted Lost.
func (c *Cache) Close() {
	if c == nil || c.stop == nil {
		return
	}
	c.closing.Do(func() {
		// Under mu, so no release is queued after these: run drains them all.
		c.mu.Lock()
		c.expireLocked(true)
		c.closed.Store(true)
		c.mu.Unlock()
		close(c.stop)
		<-c.done
	})
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

// Remembered returns the scope a check allowed the key with a moment ago,
// for any of ops, and whether there is one: what a tools/list shows the key
// without asking auth. It spends nothing and changes nothing. A key's scope
// is its own, not its operation's, so any op's allow tells it.
func (c *Cache) Remembered(key string, ops []string) (Scope, bool) {
	if c == nil {
		return Scope{}, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range ops {
		e, ok := c.entries[id(key, op)]
		if ok && (now.Before(e.until) || (e.units > 0 && now.Before(e.leaseUntil))) {
			return e.scope.clone(), true
		}
	}
	return Scope{}, false
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
	return Stats{Started: c.started.Load(), Kept: c.kept.Load(), Discarded: c.discarded.Load(),
		Leased: c.onLease.Load(), Released: c.released.Load(), Lost: c.lost.Load()}
}

// Grant is a lease auth granted with an allow (CheckResponse.lease): Units
// prepaid beyond the call, spendable for Valid, by the key KeyID; ID names
// auth's record of it, which a release cites.
type Grant struct {
	KeyID string
	ID    string
	Units int64
	Valid time.Duration
}

// Allowed remembers that the check allowed the key with scope, with
// remaining units left in its tightest rate-limit tier; remaining <= 0, or
// a scope larger than MaxScopeBytes, forgets it.
func (c *Cache) Allowed(key, op string, remaining int64, scope Scope) {
	c.AllowedWith(key, op, remaining, scope, Grant{})
}

// AllowedWith is Allowed with the lease the check granted, if any: it
// replaces a lease still held for the key, whose units are given back
// (each release cites one lease of auth's). A lease held under another
// scope is given back too, and so is a grant whose scope is over
// MaxScopeBytes. A lease keeps the key remembered even with no units left
// for early starts. A grant that cannot be kept (the cache is
// closed, or it lacks an id) counts its units Lost.
func (c *Cache) AllowedWith(key, op string, remaining int64, scope Scope, g Grant) {
	if c == nil {
		return
	}
	k := id(key, op)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease <= 0 || c.closed.Load() || g.Units <= 0 || g.Valid <= 0 || g.KeyID == "" || g.ID == "" {
		if g.Units > 0 { // charged by auth, neither spent nor given back
			c.lost.Add(g.Units)
		}
		g = Grant{}
	}
	if (remaining <= 0 && g.Units == 0) || scope.bytes() > MaxScopeBytes {
		c.drop(k)
		if g.Units > 0 { // not kept (the scope is too large): give them back
			c.endLease(k, &entry{keyID: g.KeyID, leaseID: g.ID, tool: op, units: g.Units})
		}
		return
	}
	now := c.now()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.max {
		for ek, e := range c.entries {
			if !now.Before(e.until) && !now.Before(e.leaseUntil) {
				c.drop(ek)
			}
		}
		if len(c.entries) >= c.max {
			if g.Units > 0 { // nowhere to keep them: give them back
				c.endLease(k, &entry{keyID: g.KeyID, leaseID: g.ID, tool: op, units: g.Units})
			}
			return // full of live entries: this key just waits for its checks
		}
	}
	old, had := c.entries[k]
	if had && old.scope.Equal(scope) {
		scope = old.scope // the steady state: nothing new to keep
	} else {
		scope = scope.clone() // exact-size copies, not the check answer's slices
		if had && old.units > 0 {
			c.endLease(k, &old) // allowed with another scope: that lease is forgotten
		}
	}
	e := entry{until: now.Add(c.ttl), budget: max(remaining, 0), scope: scope,
		keyID: old.keyID, leaseID: old.leaseID, tool: op, units: old.units, leaseUntil: old.leaseUntil, lastUsed: old.lastUsed,
		window: old.window, cur: old.cur, prev: old.prev} // asked: cleared, this is the answer
	if !had {
		e.window, e.cur = now, 1 // the call just checked
	}
	if g.Units > 0 {
		if e.units > 0 {
			c.endLease(k, &e) // one lease at a time: each release names one
		}
		e.keyID, e.leaseID = g.KeyID, g.ID
		e.units = g.Units
		e.leaseUntil = now.Add(min(g.Valid, c.lease))
		c.leased[k] = struct{}{}
	}
	c.entries[k] = e
}

// drop removes entry k, giving back its lease; the caller holds mu.
func (c *Cache) drop(k [sha256.Size]byte) {
	if e, ok := c.entries[k]; ok {
		if e.units > 0 {
			c.endLease(k, &e)
		}
		delete(c.leased, k)
		delete(c.entries, k)
	}
}

// Forget drops the key and gives back its lease: the check denied it, or
// could not tell.
func (c *Cache) Forget(key, op string) {
	if c == nil {
		return
	}
	k := id(key, op)
	c.mu.Lock()
	c.drop(k)
	c.mu.Unlock()
}

// Leased is what a call that spent a leased unit proceeds with: the scope
// and key id of the check that granted the lease.
type Leased struct {
	Scope Scope
	KeyID string
}

// Spend counts a call of the key and, when a lease for it holds units and
// has not ended, spends one: the call may proceed without a check (ok).
// Otherwise it returns how many units the call's check should ask auth to
// prepay: twice the calls the key made here in about the last lease
// window, at most ratelimit.MaxLeaseUnits, and none unless it made at least two, so
// a sporadic caller never prepays.
func (c *Cache) Spend(key, op string) (l Leased, ok bool, ask int32) {
	if c == nil || c.lease <= 0 {
		return Leased{}, false, 0
	}
	k := id(key, op)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, had := c.entries[k]
	if !had {
		return Leased{}, false, 0
	}
	if age := now.Sub(e.window); age >= c.lease {
		e.prev = 0
		if age < 2*c.lease {
			e.prev = e.cur
		}
		e.window, e.cur = now, 0
	}
	recent := e.prev + e.cur
	e.cur++
	if e.units > 0 && now.Before(e.leaseUntil) {
		e.units--
		e.lastUsed = now
		c.entries[k] = e
		c.onLease.Add(1)
		return Leased{Scope: e.scope, KeyID: e.keyID}, true, 0
	}
	if e.units > 0 { // ended: give the rest back now, not at the next sweep
		c.endLease(k, &e)
	}
	if recent < 2 || c.closed.Load() || now.Sub(e.asked) < c.lease {
		c.entries[k] = e
		return Leased{}, false, 0
	}
	e.asked = now // cleared by the check's answer (AllowedWith, Forget)
	c.entries[k] = e
	return Leased{}, false, int32(min(2*recent, ratelimit.MaxLeaseUnits))
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
