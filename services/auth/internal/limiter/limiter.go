// Package limiter enforces per-key rate limits in every tier of
// platform/ratelimit (minute, hour, day) with the Generic Cell Rate Algorithm. A call is allowed only when every
// tier allows it, and then consumes one unit from each tier, atomically: a
// tier is never charged for a call another tier refused. A call may also
// prepay up to ratelimit.MaxLeaseUnits more units (Leaser), as many as every
// tier can give, so a lease never lets a key past its limits; the same
// atomic step records the lease under its id, and only a recorded lease's
// unspent units are refunded, once.
//
// Two backends share the same arithmetic: Memory, for a single replica, and
// Redis, where one Lua script using Redis server time makes any number of
// replicas share exact counts. Guard wraps a backend with the configured
// behaviour for when that backend is unreachable.
package limiter

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/bmcis/knowledge/platform/ratelimit"
)

// ErrBusy means the backend could not be asked in time because this process
// had no free connection to it, or the call's budget was too short to say
// anything (Guard's minBudget): local overload or a hurried caller, not an
// unreachable backend, so Guard passes it on instead of applying the failure
// mode.
var ErrBusy = errors.New("rate limiter busy")

// Tiers are the rate-limit tiers, from the one list in platform/ratelimit;
// Limits and every per-tier array here are indexed like it.
func Tiers() []ratelimit.Tier { return ratelimit.Tiers }

// MaxLimit bounds a tier's limit so the limiter's integer arithmetic (window
// in microseconds times limit) cannot overflow int64.
const MaxLimit = 100_000_000

// Limits holds one number per tier, indexed like Tiers().
type Limits []int64

// Defaults returns every tier's default limit.
func Defaults() Limits {
	l := make(Limits, len(ratelimit.Tiers))
	for i, t := range ratelimit.Tiers {
		l[i] = t.Default
	}
	return l
}

// Validate reports a missing tier or a limit outside 1..MaxLimit.
func (l Limits) Validate() error {
	if len(l) != len(ratelimit.Tiers) {
		return fmt.Errorf("limits: %d values for %d tiers", len(l), len(ratelimit.Tiers))
	}
	for i, t := range ratelimit.Tiers {
		if v := l[i]; v < 1 || v > MaxLimit {
			return fmt.Errorf("%s limit must be between 1 and %d, got %d", t.Name, MaxLimit, v)
		}
	}
	return nil
}

// Decision is a limiter's verdict on one call.
type Decision struct {
	// Allowed is true when every tier had a unit; one unit of each was taken.
	Allowed bool
	// Remaining is the units left in each tier after this call. A tier that
	// refused reports 0.
	Remaining Limits
	// Exhausted lists the tiers that refused, by index (empty when allowed).
	Exhausted []int
	// Reset is, when refused, how long until every exhausted tier has a unit
	// again; when allowed, how long until the first (shortest) tier is full
	// again.
	Reset time.Duration
	// Extra is how many units beyond this call were charged too (Leaser's
	// AllowExtra): a prepaid lease. Remaining already counts them.
	Extra int64
	// Degraded is set by Guard when the backend was unreachable and the
	// decision follows the configured failure mode instead of real counts.
	// Remaining is then unknown (zero).
	Degraded bool
}

// Limiter decides whether the holder of key may make one more call.
type Limiter interface {
	Allow(ctx context.Context, key string, limits Limits) (Decision, error)
}

// Leaser is a Limiter that can also charge units ahead of a key's calls
// (a lease) and take back the ones not spent, only against its own record
// of the lease.
type Leaser interface {
	Limiter
	// AllowExtra is Allow charging 1 + up to lease.Units more (at most
	// ratelimit.MaxLeaseUnits): as many as every tier can give, atomically;
	// Decision.Extra says how many beyond the call. Allowed only when one
	// unit fits. When Extra > 0 the same atomic step records the lease
	// (lease.ID: key and Extra) for lease.Keep.
	AllowExtra(ctx context.Context, key string, limits Limits, lease Lease) (Decision, error)
	// Refund gives back min(units, the recorded units) of the lease id to
	// every tier of key (never past full), each unit worth what it was
	// charged (the tier's limit when granted, not limits), and deletes the
	// record, atomically, returning the units given back as refund() counts
	// them (0 for a key full already): 0, and nothing changed, for a lease
	// already released, expired, unknown or recorded for another key.
	Refund(ctx context.Context, key string, limits Limits, id string, units int64) (int64, error)
}

// Lease is what AllowExtra is asked to prepay and how it records it.
type Lease struct {
	// ID names the record (NewLeaseID); required when Units > 0.
	ID string
	// Units asked beyond the call.
	Units int64
	// Keep is how long the record may be redeemed: the lease's validity
	// plus ReleaseSlack.
	Keep time.Duration
}

// keepMillis is Keep in whole milliseconds (Redis's PEXPIRE unit), at least
// one, so both backends hold a record equally long.
func (l Lease) keepMillis() int64 { return max(l.Keep.Milliseconds(), 1) }

// ReleaseSlack is how long after a lease ends its record is kept, for the
// release to arrive: the adapter gives unspent units back within a sweep
// (half its lease) and a call (2 s), or a few seconds at shutdown; a queue
// behind a slow auth may take longer, and then the units return to the key
// only as its tiers refill.
const ReleaseSlack = 30 * time.Second

// leaseIDBytes is a lease id's randomness: 128 bits, not guessable.
const leaseIDBytes = 16

// NewLeaseID returns a random lease id: 128 bits, base64url without padding.
func NewLeaseID() (string, error) {
	b := make([]byte, leaseIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lease id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidLeaseID reports whether s has the form NewLeaseID returns.
func ValidLeaseID(s string) bool {
	if len(s) != base64.RawURLEncoding.EncodedLen(leaseIDBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

// errNoLeaseID refuses an AllowExtra asked to prepay with nowhere to record it.
var errNoLeaseID = errors.New("limiter: a lease needs an id")

// Clock returns the current time; tests pass a controllable one.
type Clock func() time.Time
