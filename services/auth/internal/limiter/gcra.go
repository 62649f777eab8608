package limiter

import (
	"time"

	"github.com/bmcis/knowledge/platform/ratelimit"
)

// GCRA keeps, per tier, a theoretical arrival time (TAT): the instant at which
// the tier would be completely refilled. With emission interval T = window /
// limit, a call at `now` conforms when max(TAT, now) + T <= now + window; it
// then moves TAT to max(TAT, now) + T. A fresh key may therefore spend its
// whole limit at once, then regains one unit every T: there is no window edge
// at which twice the limit becomes available, as with fixed windows.
//
// T is rarely a whole number of microseconds (60 s / 7 is not), so a TAT is
// kept as an exact fraction: tat + frac/limit microseconds. All arithmetic is
// integer, which is what lets the Lua script (doubles, exact below 2^53) and
// this Go code agree bit for bit.

// cell is one tier's state.
type cell struct {
	tat  int64 // microseconds since the Unix epoch
	frac int64 // extra tat fraction, in units of 1/limit microsecond
}

// windowMicros returns tier i's window in microseconds.
func windowMicros(i int) int64 { return ratelimit.Tiers[i].Window.Microseconds() }

// advance returns c moved by k emission intervals of a tier with window w
// and limit l: k × w/l microseconds, kept exact as tat + frac/l.
func advance(c cell, k, w, l int64) cell {
	kw := k * w // at most (1+MaxLeaseUnits) × a day in µs: far below 2^53
	nc := cell{tat: c.tat + kw/l, frac: c.frac + kw%l}
	if nc.frac >= l {
		nc.frac -= l
		nc.tat++
	}
	return nc
}

// conforms reports whether a tier whose TAT is at c may be charged up to
// next: the new TAT is not past now + window.
func conforms(next cell, now, w int64) bool {
	return next.tat < now+w || (next.tat == now+w && next.frac == 0)
}

// evaluate applies one call at now (microseconds) to the cells, charging
// 1 + up to extra units: as many as every tier can give, so no tier is ever
// charged past its limit. It returns the decision and, when allowed, the
// cells to store; when refused (not even one unit in some tier) the cells
// are returned unchanged, so no tier is charged.
func evaluate(cells []cell, now int64, limits Limits, extra int64) (Decision, []cell) {
	n := len(limits)
	var (
		from     = make([]cell, n)
		next     = make([]cell, n)
		remAfter = make([]int64, n)
		allowed  = true
		wait     int64
		d        Decision
	)
	for t := range n {
		w, l := windowMicros(t), limits[t]
		var c cell
		if t < len(cells) { // a tier added since the state was stored starts full
			c = cells[t]
		}
		if c.frac >= l { // the limit was lowered since this was stored
			c.frac = l - 1
		}
		if c.tat < now {
			c = cell{tat: now}
		}
		from[t] = c
		nc := advance(c, 1, w, l)
		if conforms(nc, now, w) {
			next[t] = nc
			continue
		}
		allowed = false
		d.Exhausted = append(d.Exhausted, t)
		remAfter[t] = -1
		// The call would conform once now + window reaches the new TAT.
		wt := nc.tat - w - now
		if nc.frac > 0 {
			wt++
		}
		wait = max(wait, wt)
	}
	if allowed {
		// The most units every tier can give, from 1 + extra down: each
		// tier only lowers it, and one unit always fits (checked above).
		k := 1 + min(max(extra, 0), ratelimit.MaxLeaseUnits)
		for t := range n {
			for k > 1 && !conforms(advance(from[t], k, windowMicros(t), limits[t]), now, windowMicros(t)) {
				k--
			}
		}
		for t := range n {
			w, l := windowMicros(t), limits[t]
			next[t] = advance(from[t], k, w, l)
			// Units left = (now + window - TAT) / T, scaled by limit to stay exact.
			remAfter[t] = ((now+w-next[t].tat)*l - next[t].frac) / w
		}
		d.Allowed = true
		d.Extra = k - 1
		d.Remaining = remAfter
		full := next[0].tat - now
		if next[0].frac > 0 {
			full++
		}
		d.Reset = time.Duration(full) * time.Microsecond
		return d, next
	}
	// Nothing was consumed: a conforming tier still has the unit this call
	// would have taken.
	rem := make(Limits, n)
	for t := range rem {
		if remAfter[t] >= 0 {
			w, l := windowMicros(t), limits[t]
			rem[t] = ((now+w-next[t].tat)*l-next[t].frac)/w + 1
		}
	}
	d.Remaining = rem
	d.Reset = time.Duration(wait) * time.Microsecond
	return d, cells
}

// refund gives units back to every tier at now and returns the cells to
// store and the units given back. Each unit is worth what the lease charged
// for it: window / granted[t], the tier's limit when the lease was granted,
// not its limit now, so changing a key's limits during a lease cannot make
// a refund give back more (or less) time than was charged. Each TAT moves back by
// units such intervals, but never before now: a refund can refill a tier,
// never create units past its limit. A tier with no granted limit (added
// since the grant) was not charged by the lease and gets nothing.
//
// The units given back are the most any one tier took back, in whole units:
// a tier already full (or a key with no state, which is full) takes back
// none, a tier that refilled meanwhile only what makes it full again, so a
// key full everywhere reports 0 though the lease's record is consumed.
func refund(cells []cell, now int64, granted, limits Limits, units int64) ([]cell, int64) {
	units = min(max(units, 0), ratelimit.MaxLeaseUnits)
	n := min(len(cells), len(limits))
	out := make([]cell, n)
	var back int64
	for t := range n {
		c := cells[t]
		if t >= len(granted) {
			out[t] = c
			continue
		}
		w, l, gl := windowMicros(t), limits[t], granted[t]
		if c.frac >= l {
			c.frac = l - 1
		}
		uw := units * w
		nc := cell{tat: c.tat - uw/gl, frac: c.frac}
		// frac counts 1/l µs: the sub-µs rest of an interval of another
		// limit is not given back (less than 1 µs, never more than charged).
		if gl == l {
			nc.frac -= uw % gl
		}
		if nc.frac < 0 {
			nc.frac += l
			nc.tat--
		}
		took := units
		if nc.tat < now {
			// Only the time between now and the TAT comes back: whole units
			// of it. (c.tat - now) × gl < uw + gl here, far below 2^53.
			took = 0
			if c.tat > now {
				took = min(units, (c.tat-now)*gl/w)
			}
			nc = cell{tat: now}
		}
		back = max(back, took)
		out[t] = nc
	}
	return out, back
}
