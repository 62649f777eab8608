package limiter

import "time"

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

// windowMicros returns a tier's window in microseconds.
func windowMicros(t Tier) int64 { return t.Window().Microseconds() }

// evaluate applies one call at now (microseconds) to the cells. It returns the
// decision and, when allowed, the cells to store; when refused the cells are
// returned unchanged, so no tier is charged.
func evaluate(cells [numTiers]cell, now int64, limits Limits) (Decision, [numTiers]cell) {
	var (
		next     [numTiers]cell
		remAfter [numTiers]int64
		allowed  = true
		wait     int64
		d        Decision
	)
	for t := Minute; t < numTiers; t++ {
		w, l := windowMicros(t), limits.Get(t)
		c := cells[t]
		if c.frac >= l { // the limit was lowered since this was stored
			c.frac = l - 1
		}
		if c.tat < now {
			c = cell{tat: now}
		}
		n := cell{tat: c.tat + w/l, frac: c.frac + w%l}
		if n.frac >= l {
			n.frac -= l
			n.tat++
		}
		if n.tat < now+w || (n.tat == now+w && n.frac == 0) {
			next[t] = n
			// Units left = (now + window - TAT) / T, scaled by limit to stay exact.
			remAfter[t] = ((now+w-n.tat)*l - n.frac) / w
			continue
		}
		allowed = false
		d.Exhausted = append(d.Exhausted, t)
		remAfter[t] = -1
		// The call would conform once now + window reaches the new TAT.
		wt := n.tat - w - now
		if n.frac > 0 {
			wt++
		}
		wait = max(wait, wt)
	}
	if allowed {
		d.Allowed = true
		d.Remaining = Limits{Minute: remAfter[Minute], Hour: remAfter[Hour], Day: remAfter[Day]}
		full := next[Minute].tat - now
		if next[Minute].frac > 0 {
			full++
		}
		d.Reset = time.Duration(full) * time.Microsecond
		return d, next
	}
	// Nothing was consumed: a conforming tier still has the unit this call
	// would have taken.
	var rem [numTiers]int64
	for t := range rem {
		if remAfter[t] >= 0 {
			rem[t] = remAfter[t] + 1
		}
	}
	d.Remaining = Limits{Minute: rem[Minute], Hour: rem[Hour], Day: rem[Day]}
	d.Reset = time.Duration(wait) * time.Microsecond
	return d, cells
}
