package keys

import (
	"context"
	"errors"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/bmcis/knowledge/platform/pg"
)

// MaxCacheTTL bounds how long a verified key's record may be reused without
// asking the database, and so how late a revocation made on another replica
// (or directly in the database) can take effect.
const MaxCacheTTL = 30 * time.Second

// Outcome is the result of verifying a presented key.
type Outcome int

// Outcomes.
const (
	// Valid: well formed, known, secret matches, active.
	Valid Outcome = iota
	// Invalid: malformed, unknown id, or wrong secret (indistinguishable to
	// the caller on purpose).
	Invalid
	// ExpiredKey: genuine, but past expires_at.
	ExpiredKey
	// RevokedKey: genuine, but revoked.
	RevokedKey
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// CacheTTL is how long a key record is reused (0 disables the cache;
	// at most MaxCacheTTL).
	CacheTTL time.Duration
	// CacheSize bounds the number of cached key ids.
	CacheSize int
	// Clock defaults to time.Now; it drives expiry and cache age.
	Clock Clock
	// Registerer receives cache metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// StaleFor is how old a cached record may be and still answer while the
	// database is unreachable (0: never). A revocation made meanwhile takes
	// effect once the database answers again.
	StaleFor time.Duration
}

// cached is a key record (or its absence) as loaded at fetched.
type cached struct {
	key     *Key // nil: no such key id
	fetched time.Time
}

// Verifier checks presented keys against the store through a small cache of
// key records. The cache holds records (hash, status, limits), never
// verdicts: the secret is hashed and compared on every call, and expiry is
// judged against the clock on every call.
type Verifier struct {
	store  *Store
	ttl    time.Duration
	stale  time.Duration
	clock  Clock
	cache  *lru.Cache[string, cached]
	group  singleflight.Group
	lookup *prometheus.CounterVec
}

// NewVerifier returns a verifier over store.
func NewVerifier(store *Store, c VerifierConfig) (*Verifier, error) {
	if c.CacheTTL < 0 || c.CacheTTL > MaxCacheTTL {
		return nil, fmt.Errorf("key cache TTL must be between 0 and %s, got %s", MaxCacheTTL, c.CacheTTL)
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 10_000
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	cache, err := lru.New[string, cached](c.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	v := &Verifier{store: store, ttl: c.CacheTTL, stale: c.StaleFor, clock: c.Clock, cache: cache,
		lookup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_auth_key_lookups_total",
			Help: "Key record lookups, by source (cache, database, or stale: a cached record used while the database is unreachable).",
		}, []string{"source"})}
	if c.Registerer != nil {
		if err := c.Registerer.Register(v.lookup); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// NeedsLookup reports whether verifying presented would ask the database:
// its id is well formed and no fresh record (of a key, or of its absence)
// is cached.
func (v *Verifier) NeedsLookup(presented string) bool {
	id, _, ok := Parse(presented)
	if !ok {
		return false
	}
	c, cachedOK := v.cache.Peek(id)
	return v.ttl <= 0 || !cachedOK || v.clock().Sub(c.fetched) >= v.ttl
}

// Forget drops a key id from the cache.
func (v *Verifier) Forget(id string) { v.cache.Remove(id) }

// Verdict is the outcome of verifying a key.
type Verdict struct {
	Outcome Outcome
	// Key is the record, for Valid, ExpiredKey and RevokedKey; it must not
	// be modified.
	Key *Key
	// Stale: the database could not be asked and the verdict rests on a
	// record older than the cache TTL (at most StaleFor old).
	Stale bool
}

// Verify checks a presented key. An error means the store could not be
// asked and no record fresh enough to stand in was cached; it never contains
// the presented key.
func (v *Verifier) Verify(ctx context.Context, presented string) (Verdict, error) {
	id, secret, ok := Parse(presented)
	if !ok {
		return Verdict{Outcome: Invalid}, nil
	}
	k, stale, err := v.record(ctx, id)
	if err != nil {
		return Verdict{Outcome: Invalid}, err
	}
	if k == nil {
		// Hash and compare anyway, so an unknown id costs what a wrong
		// secret costs and timing does not reveal which ids exist.
		secretMatches(secret, unknownHash[:])
		return Verdict{Outcome: Invalid, Stale: stale}, nil
	}
	if !secretMatches(secret, k.Hash) {
		return Verdict{Outcome: Invalid, Stale: stale}, nil
	}
	switch k.StatusAt(v.clock()) {
	case Revoked:
		return Verdict{Outcome: RevokedKey, Key: k, Stale: stale}, nil
	case Expired:
		return Verdict{Outcome: ExpiredKey, Key: k, Stale: stale}, nil
	}
	return Verdict{Outcome: Valid, Key: k, Stale: stale}, nil
}

// Lookup returns the record of key id (nil when there is none), as Verify
// reads it (from the cache when fresh), without a secret to check: for
// what concerns a key already verified, such as giving back its lease.
func (v *Verifier) Lookup(ctx context.Context, id string) (*Key, error) {
	k, _, err := v.record(ctx, id)
	return k, err
}

// unknownHash stands in for the hash of a key id that does not exist.
var unknownHash = HashSecret("no such key")

// record returns the key with id (nil when there is none), from the cache
// when fresh; concurrent misses for one id share a single query. While the
// database is unreachable, a cached record up to StaleFor old answers
// instead (stale): a database outage must not lock every key out, including
// calls that need no database at all.
func (v *Verifier) record(ctx context.Context, id string) (*Key, bool, error) {
	c, cachedOK := v.cache.Get(id)
	if v.ttl > 0 && cachedOK && v.clock().Sub(c.fetched) < v.ttl {
		v.lookup.WithLabelValues("cache").Inc()
		return c.key, false, nil
	}
	k, err := v.query(ctx, id)
	if err == nil {
		return k, false, nil
	}
	dbDown := pg.IsUnavailable(err) || (ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded))
	if dbDown && cachedOK && v.stale > 0 && v.clock().Sub(c.fetched) < v.stale {
		v.lookup.WithLabelValues("stale").Inc()
		return c.key, true, nil
	}
	return nil, false, pg.CallError(ctx, err)
}

// query loads one record from the database (and caches it).
func (v *Verifier) query(ctx context.Context, id string) (*Key, error) {
	ch := v.group.DoChan(id, func() (any, error) {
		// Detached from the first caller's context: its cancellation must not
		// fail the other callers sharing this query.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pg.DefaultCallTimeout)
		defer cancel()
		fetched := v.clock()
		k, err := v.store.Get(qctx, id)
		if errors.Is(err, ErrNotFound) {
			k, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		v.lookup.WithLabelValues("database").Inc()
		if v.ttl > 0 || v.stale > 0 {
			v.cache.Add(id, cached{key: k, fetched: fetched})
		}
		return k, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		k, _ := r.Val.(*Key)
		return k, nil
	}
}
