package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guard applies the configured failure mode when a shared backend (Redis) is
// unreachable: fail open (allow) or closed (refuse), and mark the decision
// Degraded so callers can warn. A call whose backend request fails gets the
// failure-mode decision; after Threshold failures in a row the guard stops
// calling the backend for RetryInterval, so a dead Redis costs one timeout
// per interval instead of one per call, then lets one call probe it. The
// first success ends the degraded state, with no operator action.
//
// Each backend call ends before the caller's deadline (callBudget), so a
// backend that hangs fails the call while the caller still waits for the
// answer: the guard counts it and the failure mode answers, instead of every
// call ending in the caller's own timeout, uncounted.
type Guard struct {
	backend  Limiter
	failOpen bool
	timeout  time.Duration
	retry    time.Duration
	clock    Clock
	log      *slog.Logger

	threshold int

	mu        sync.Mutex
	failures  int // in a row
	degraded  bool
	nextProbe time.Time

	mDegraded  prometheus.Gauge
	mErrors    prometheus.Counter
	mDecisions *prometheus.CounterVec
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// FailOpen allows calls while the backend is unreachable; otherwise they
	// are refused.
	FailOpen bool
	// Timeout bounds each backend call (BMCIS_RATE_LIMIT_REDIS_TIMEOUT); the
	// caller's remaining deadline bounds it further (callBudget). Zero: only
	// the caller's deadline.
	Timeout time.Duration
	// RetryInterval is how long to wait before probing the backend again
	// once degraded (default 1 s).
	RetryInterval time.Duration
	// Threshold is how many failures in a row make the guard degraded
	// (default 3), so one lost packet does not bypass the backend for a
	// whole interval.
	Threshold int
	// Clock defaults to time.Now.
	Clock Clock
	// Log receives state changes (degraded, recovered).
	Log *slog.Logger
	// Registerer receives the guard's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// NewGuard wraps backend.
func NewGuard(backend Limiter, c GuardConfig) (*Guard, error) {
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Threshold <= 0 {
		c.Threshold = 3
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	g := &Guard{
		backend:   backend,
		failOpen:  c.FailOpen,
		timeout:   c.Timeout,
		retry:     c.RetryInterval,
		threshold: c.Threshold,
		clock:     c.Clock,
		log:       c.Log,
		mDegraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bmcis_auth_limiter_degraded",
			Help: "1 while the shared rate-limit backend (Redis) is unreachable and the configured failure mode applies.",
		}),
		mErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bmcis_auth_limiter_backend_errors_total",
			Help: "Rate-limit backend (Redis) calls that failed.",
		}),
		mDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bmcis_auth_limiter_degraded_decisions_total",
			Help: "Checks decided by the failure mode instead of the backend, by outcome.",
		}, []string{"outcome"}),
	}
	if c.Registerer != nil {
		for _, col := range []prometheus.Collector{g.mDegraded, g.mErrors, g.mDecisions} {
			if err := c.Registerer.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// Degraded reports whether the guard is currently bypassing the backend.
func (g *Guard) Degraded() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.degraded
}

// Allow implements Limiter. It returns an error only when ctx ended (the
// caller gave up), the backend said ErrBusy, or the call ran out of a budget
// below minBudget (ErrBusy): none says the backend is unreachable. A backend
// call that runs out of a longer budget, or fails before its budget ends,
// does say so.
func (g *Guard) Allow(ctx context.Context, key string, limits Limits) (Decision, error) {
	return g.AllowExtra(ctx, key, limits, Lease{})
}

// AllowExtra implements Leaser: Allow, prepaying up to lease.Units when the
// backend is a Leaser (none otherwise). A failure-mode decision prepays
// nothing.
func (g *Guard) AllowExtra(ctx context.Context, key string, limits Limits, lease Lease) (Decision, error) {
	if !g.shouldTry() {
		return g.fallback(), nil
	}
	callCtx, cancel, budget := g.callContext(ctx)
	defer cancel()
	var (
		d   Decision
		err error
	)
	if l, ok := g.backend.(Leaser); ok && lease.Units > 0 {
		d, err = l.AllowExtra(callCtx, key, limits, lease)
	} else {
		d, err = g.backend.Allow(callCtx, key, limits)
	}
	if err == nil {
		g.up()
		return d, nil
	}
	if errors.Is(err, ErrBusy) {
		return Decision{}, err
	}
	// Checked before the caller's own context: on a loaded machine the
	// caller's deadline often passes too before this line runs, and a short
	// budget's timeout is still busy then.
	if budget < g.minBudget() && budgetSpent(callCtx) {
		return Decision{}, fmt.Errorf("%w: backend call had only %s: %w", ErrBusy, budget, err)
	}
	// A caller that left before the budget ran out says nothing about the
	// backend. One whose budget ran out does, even when the caller's own
	// deadline has passed too by now (a loaded machine can run this line
	// late): the backend is counted down, and the answer is the failure
	// mode, not the backend's error.
	if ctx.Err() != nil && !budgetDeadlinePassed(callCtx) {
		return Decision{}, err
	}
	g.down(err)
	return g.fallback(), nil
}

// Refund implements Leaser. While degraded it refunds nothing: the units
// were charged to a backend that cannot be reached now, and a lost refund
// only costs the key those units until its tiers refill.
func (g *Guard) Refund(ctx context.Context, key string, limits Limits, id string, units int64) (int64, error) {
	l, ok := g.backend.(Leaser)
	if !ok || units <= 0 || g.Degraded() {
		return 0, nil
	}
	callCtx, cancel, _ := g.callContext(ctx)
	defer cancel()
	return l.Refund(callCtx, key, limits, id, units)
}

// budgetSpent reports whether the call's budget ran out: its context ended,
// or its deadline passed (the client's socket deadline is the same instant,
// and the read's timeout can come back before the context's timer fires).
func budgetSpent(ctx context.Context) bool {
	return ctx.Err() != nil || budgetDeadlinePassed(ctx)
}

// budgetDeadlinePassed reports whether the call's own deadline has passed,
// whatever ended its context.
func budgetDeadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// callerShare is the part of the caller's remaining time a backend call may
// take; the rest is left for answering with the failure mode.
const callerShare = 0.75

// maxMinBudget caps minBudget, so a long Redis timeout does not stop callers
// with ordinary deadlines from counting a Redis that hangs.
const maxMinBudget = 50 * time.Millisecond

// minBudget is the shortest backend call whose failure says something about
// the backend: a quarter of the configured timeout (the time a healthy
// backend may take), at most maxMinBudget. A call with less (its caller's
// deadline was that short) that runs out of it is ErrBusy, not counted, so
// callers with tight custom deadlines cannot trip the failure mode of a slow
// but healthy Redis. (One that fails sooner, say refused, still counts.)
func (g *Guard) minBudget() time.Duration {
	if g.timeout <= 0 {
		return maxMinBudget
	}
	return min(g.timeout/4, maxMinBudget)
}

// callContext bounds one backend call: by the configured timeout, cut to
// callerShare of the time left before ctx's deadline. It returns the budget
// (unbounded: math.MaxInt64).
func (g *Guard) callContext(ctx context.Context) (context.Context, context.CancelFunc, time.Duration) {
	budget := time.Duration(math.MaxInt64)
	if g.timeout > 0 {
		budget = g.timeout
	}
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Duration(float64(time.Until(deadline))*callerShare))
	}
	if budget == math.MaxInt64 {
		c, cancel := context.WithCancel(ctx)
		return c, cancel, budget
	}
	c, cancel := context.WithTimeout(ctx, budget)
	return c, cancel, budget
}

// shouldTry is true unless degraded and the next probe is not due yet; when
// due, exactly one caller is let through to probe.
func (g *Guard) shouldTry() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.degraded {
		return true
	}
	now := g.clock()
	if now.Before(g.nextProbe) {
		return false
	}
	g.nextProbe = now.Add(g.retry)
	return true
}

func (g *Guard) down(err error) {
	g.mErrors.Inc()
	g.mu.Lock()
	g.failures++
	was := g.degraded
	if g.failures >= g.threshold {
		g.degraded = true
		g.nextProbe = g.clock().Add(g.retry)
	}
	now := g.degraded
	g.mu.Unlock()
	if !now {
		g.log.Warn("rate limiter backend call failed; answered by the failure mode", "error", err.Error())
	}
	if now && !was {
		g.mDegraded.Set(1)
		mode := "closed: refusing calls"
		if g.failOpen {
			mode = "open: allowing calls without counting"
		}
		g.log.Error("rate limiter degraded: backend unreachable; failing "+mode,
			"error", err.Error(), "retry_every", g.retry.String())
	}
}

func (g *Guard) up() {
	g.mu.Lock()
	was := g.degraded
	g.degraded = false
	g.failures = 0
	g.mu.Unlock()
	if was {
		g.mDegraded.Set(0)
		g.log.Info("rate limiter recovered: backend reachable again")
	}
}

func (g *Guard) fallback() Decision {
	if g.failOpen {
		g.mDecisions.WithLabelValues("allowed").Inc()
		return Decision{Allowed: true, Degraded: true}
	}
	g.mDecisions.WithLabelValues("refused").Inc()
	return Decision{Degraded: true, Reset: g.retry}
}
