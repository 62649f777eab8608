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
	v := &Verifier{store: store, ttl: c.CacheTTL, clock: c.Clock, cache: cache,
		lookup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_auth_key_lookups_total",
			Help: "Key record lookups, by source (cache or database).",
		}, []string{"source"})}
	if c.Registerer != nil {
		if err := c.Registerer.Register(v.lookup); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Forget drops a key id from the cache.
func (v *Verifier) Forget(id string) { v.cache.Remove(id) }

// Verify checks a presented key. The returned key (for Valid, ExpiredKey and
// RevokedKey) must not be modified. An error means the store could not be
// asked; it never contains the presented key.
func (v *Verifier) Verify(ctx context.Context, presented string) (Outcome, *Key, error) {
	id, secret, ok := Parse(presented)
	if !ok {
		return Invalid, nil, nil
	}
	k, err := v.record(ctx, id)
	if err != nil {
		return Invalid, nil, err
	}
	if k == nil {
		// Hash and compare anyway, so an unknown id costs what a wrong
		// secret costs and timing does not reveal which ids exist.
		secretMatches(secret, unknownHash[:])
		return Invalid, nil, nil
	}
	if !secretMatches(secret, k.Hash) {
		return Invalid, nil, nil
	}
	switch k.StatusAt(v.clock()) {
	case Revoked:
		return RevokedKey, k, nil
	case Expired:
		return ExpiredKey, k, nil
	}
	return Valid, k, nil
}

// unknownHash stands in for the hash of a key id that does not exist.
var unknownHash = HashSecret("no such key")

// record returns the key with id (nil when there is none), from the cache
// when fresh; concurrent misses for one id share a single query.
func (v *Verifier) record(ctx context.Context, id string) (*Key, error) {
	if v.ttl > 0 {
		if c, ok := v.cache.Get(id); ok && v.clock().Sub(c.fetched) < v.ttl {
			v.lookup.WithLabelValues("cache").Inc()
			return c.key, nil
		}
	}
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
		if v.ttl > 0 {
			v.cache.Add(id, cached{key: k, fetched: fetched})
		}
		return k, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, pg.CallError(ctx, r.Err)
		}
		k, _ := r.Val.(*Key)
		return k, nil
	}
}
