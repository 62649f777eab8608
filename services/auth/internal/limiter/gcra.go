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

// evaluate applies one call at now (microseconds) to the cells. It returns the
// decision and, when allowed, the cells to store; when refused the cells are
// returned unchanged, so no tier is charged.
func evaluate(cells []cell, now int64, limits Limits) (Decision, []cell) {
	n := len(limits)
	var (
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
		nc := cell{tat: c.tat + w/l, frac: c.frac + w%l}
		if nc.frac >= l {
			nc.frac -= l
			nc.tat++
		}
		if nc.tat < now+w || (nc.tat == now+w && nc.frac == 0) {
			next[t] = nc
			// Units left = (now + window - TAT) / T, scaled by limit to stay exact.
			remAfter[t] = ((now+w-nc.tat)*l - nc.frac) / w
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
		d.Allowed = true
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
			rem[t] = remAfter[t] + 1
		}
	}
	d.Remaining = rem
	d.Reset = time.Duration(wait) * time.Microsecond
	return d, cells
}
