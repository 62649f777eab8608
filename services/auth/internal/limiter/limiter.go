// Package limiter enforces per-key rate limits in three tiers (minute, hour,
// day) with the Generic Cell Rate Algorithm. A call is allowed only when every
// tier allows it, and then consumes one unit from each tier, atomically: a
// tier is never charged for a call another tier refused.
//
// Two backends share the same arithmetic: Memory, for a single replica, and
// Redis, where one Lua script using Redis server time makes any number of
// replicas share exact counts. Guard wraps a backend with the configured
// behaviour for when that backend is unreachable.
package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrBusy means the backend could not be asked in time because this process
// had no free connection to it: local overload, not an unreachable backend,
// so Guard passes it on instead of applying the failure mode.
var ErrBusy = errors.New("rate limiter busy")

// Tier names one rate-limit window.
type Tier int

// The tiers, in the order used everywhere (arrays, script arguments).
const (
	Minute Tier = iota
	Hour
	Day
	numTiers
)

// String returns the tier's name as used in replies and logs.
func (t Tier) String() string {
	switch t {
	case Minute:
		return "minute"
	case Hour:
		return "hour"
	case Day:
		return "day"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// Window returns the tier's window length.
func (t Tier) Window() time.Duration {
	switch t {
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	default:
		return 24 * time.Hour
	}
}

// MaxLimit bounds a tier's limit so the limiter's integer arithmetic (window
// in microseconds times limit) cannot overflow int64.
const MaxLimit = 100_000_000

// Limits holds one number per tier.
type Limits struct {
	Minute, Hour, Day int64
}

// Get returns tier t's value.
func (l Limits) Get(t Tier) int64 {
	switch t {
	case Minute:
		return l.Minute
	case Hour:
		return l.Hour
	default:
		return l.Day
	}
}

// Validate reports a limit outside 1..MaxLimit.
func (l Limits) Validate() error {
	for t := Minute; t < numTiers; t++ {
		if v := l.Get(t); v < 1 || v > MaxLimit {
			return fmt.Errorf("%s limit must be between 1 and %d, got %d", t, MaxLimit, v)
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
	// Exhausted lists the tiers that refused (empty when allowed).
	Exhausted []Tier
	// Reset is, when refused, how long until every exhausted tier has a unit
	// again; when allowed, how long until the minute tier is full again.
	Reset time.Duration
	// Degraded is set by Guard when the backend was unreachable and the
	// decision follows the configured failure mode instead of real counts.
	// Remaining is then unknown (zero).
	Degraded bool
}

// Limiter decides whether the holder of key may make one more call.
type Limiter interface {
	Allow(ctx context.Context, key string, limits Limits) (Decision, error)
}

// Clock returns the current time; tests pass a controllable one.
type Clock func() time.Time
