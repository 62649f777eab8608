// Package dbhealth watches whether PostgreSQL answers, with hysteresis, so
// that a service can report a database outage in its health without
// flapping on one slow ping.
//
// It reports through a callback (platform/grpcserver publishes it as the
// gRPC health of HealthService); it never stops the service: a service
// whose database is away still serves what needs no database (cached
// searches, chunks, stale key records), so liveness and readiness stay
// SERVING and only this separate state turns NOT_SERVING.
package dbhealth

import (
	"context"
	"time"
)

// HealthService is the gRPC health service name under which the services
// publish their database's state (platform/grpcserver), and which clients
// (the MCP adapter's /readyz) ask.
const HealthService = "bmcis.database"

// Pinger is what is watched; *pgxpool.Pool is one.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Options tune the watch.
type Options struct {
	// Interval between pings.
	Interval time.Duration
	// Timeout of one ping: a hung database counts as down.
	Timeout time.Duration
	// DownAfter consecutive failed pings turn the state down.
	DownAfter int
	// UpAfter consecutive good pings turn it up again.
	UpAfter int
}

// DefaultOptions: down after about 2 s of failed pings, up after two good
// ones 0.5 s apart, so the state is back within about a second of the
// database.
func DefaultOptions() Options {
	return Options{Interval: 500 * time.Millisecond, Timeout: time.Second, DownAfter: 3, UpAfter: 2}
}

// Tracker turns ping outcomes into an up/down state with hysteresis. It
// starts up: a service starts only after it has reached its database.
type Tracker struct {
	opts   Options
	down   bool
	streak int // consecutive outcomes that disagree with the state
}

// NewTracker returns a tracker in the up state.
func NewTracker(o Options) *Tracker {
	o.DownAfter, o.UpAfter = max(1, o.DownAfter), max(1, o.UpAfter)
	return &Tracker{opts: o}
}

// Observe records one ping outcome and returns the state after it and
// whether it changed.
func (t *Tracker) Observe(ok bool) (up, changed bool) {
	if ok != t.down { // the outcome agrees with the state
		t.streak = 0
		return !t.down, false
	}
	t.streak++
	need := t.opts.DownAfter
	if t.down {
		need = t.opts.UpAfter
	}
	if t.streak < need {
		return !t.down, false
	}
	t.down, t.streak = !t.down, 0
	return !t.down, true
}

// Watch pings p every o.Interval until ctx ends and calls report(up) on
// start (up) and on every change of state.
func Watch(ctx context.Context, p Pinger, o Options, report func(up bool)) {
	tr := NewTracker(o)
	report(true)
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, o.Timeout)
		err := p.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if up, changed := tr.Observe(err == nil); changed {
			report(up)
		}
	}
}
