package auditlog

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Defaults of the refusal limit (Config.RefusalsPerAddress and the rest).
const (
	DefaultRefusalsPerAddress = 20
	DefaultRefusalWindow      = time.Minute
	DefaultRefusalAddresses   = 10_000
)

// IsRefusal reports whether e is a request refused before any credential
// was verified (a bad key or token, none at all): no principal and not
// ok. Only such entries are limited per address; over stdio (no address)
// there is one local client, and it is not limited.
func IsRefusal(e Entry) bool {
	return e.Principal == "" && e.Outcome != OK && e.ClientAddress != ""
}

// SuppressedSummary is the text of the entry that stands for n refusals
// from addr the limit kept out of the trail (its Target).
func SuppressedSummary(n int64, addr string) string {
	return strconv.FormatInt(n, 10) + " further refusals from " + addr + " suppressed"
}

// refusalWindow is one address's window: it starts at the address's
// first refusal and lasts Config.RefusalWindow; its first
// Config.RefusalsPerAddress refusals are recorded, the rest counted.
type refusalWindow struct {
	start      time.Time
	recorded   int
	suppressed int64
	last       Entry // of the last refusal suppressed, the summary's client (summaryFields)
	// kinds counts the suppressed refusals by tool and outcome, the first
	// maxRefusalKinds kinds seen (a flood must not grow it); otherKinds
	// counts the rest.
	kinds      map[refusalKind]int64
	otherKinds int64
}

// refusalKind is what a summary tells apart among suppressed refusals.
type refusalKind struct{ tool, outcome string }

// maxRefusalKinds bounds the kinds a window counts one by one.
const maxRefusalKinds = 8

// count adds the suppressed refusal e to w.
func (w *refusalWindow) count(e Entry) {
	w.suppressed++
	w.last = summaryFields(e)
	k := refusalKind{w.last.Tool, w.last.Outcome}
	if _, ok := w.kinds[k]; !ok && len(w.kinds) >= maxRefusalKinds {
		w.otherKinds++
		return
	}
	if w.kinds == nil {
		w.kinds = map[refusalKind]int64{}
	}
	w.kinds[k]++
}

// reset forgets w's suppressed refusals once summarised.
func (w *refusalWindow) reset() {
	w.suppressed, w.kinds, w.otherKinds = 0, nil, 0
}

// refusalLimiter bounds the refusal entries recorded per client address,
// so a flood of bad credentials cannot fill the buffer and push real
// entries out. The table of addresses is an LRU of bounded size: an
// address pushed out leaves its summary first.
type refusalLimiter struct {
	perWindow int
	window    time.Duration

	mu          sync.Mutex
	addrs       *simplelru.LRU[string, *refusalWindow]
	suppressing map[string]*refusalWindow // the windows with refusals to summarise
	evicted     []Entry                   // summaries of windows the LRU pushed out, for the caller to record
	// closed: Close has taken every summary; a later refusal is let
	// through, to be dropped and counted as any entry after Close, since
	// no summary would ever stand for it.
	closed bool
}

func newRefusalLimiter(perWindow int, window time.Duration, addresses int) *refusalLimiter {
	l := &refusalLimiter{perWindow: perWindow, window: window, suppressing: map[string]*refusalWindow{}}
	// NewLRU fails only for a size under 1, which New never passes.
	l.addrs, _ = simplelru.NewLRU(addresses, func(addr string, w *refusalWindow) {
		if w.suppressed > 0 {
			l.evicted = append(l.evicted, summaryOf(addr, w, time.Now()))
			delete(l.suppressing, addr)
		}
	})
	return l
}

// allow reports whether the refusal e (IsRefusal) is recorded, and
// returns the summaries due: its address's last window when it ended with
// refusals suppressed, and any the LRU pushed out.
func (l *refusalLimiter) allow(e Entry, now time.Time) (bool, []Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return true, nil
	}
	var due []Entry
	addr := e.ClientAddress
	w, ok := l.addrs.Get(addr)
	if !ok || !now.Before(w.start.Add(l.window)) {
		if ok && w.suppressed > 0 {
			due = append(due, summaryOf(addr, w, now))
			delete(l.suppressing, addr)
		}
		w = &refusalWindow{start: now}
		l.addrs.Add(addr, w)
	}
	due = append(due, l.evicted...)
	l.evicted = l.evicted[:0]
	if w.recorded < l.perWindow {
		w.recorded++
		return true, due
	}
	w.count(e)
	l.suppressing[addr] = w
	return false, due
}

// due returns the summaries of the windows that ended by now (all of
// them when all is set, at Close, after which nothing is limited), each
// once.
func (l *refusalLimiter) due(now time.Time, all bool) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = l.closed || all
	var due []Entry
	for addr, w := range l.suppressing {
		if all || !now.Before(w.start.Add(l.window)) {
			due = append(due, summaryOf(addr, w, now))
			w.reset()
			delete(l.suppressing, addr)
		}
	}
	return due
}

// summaryFields is what a window keeps of a suppressed refusal: the
// fields its summary repeats, as the trail cuts them, copied. The window
// outlives its summary (the table forgets an address only when pushed
// out), so it must not hold a long path, query or client name, nor the
// request's memory behind them.
func summaryFields(e Entry) Entry {
	return Entry{ClientName: strings.Clone(label(e.ClientName)), Tool: strings.Clone(label(e.Tool)), Outcome: strings.Clone(label(e.Outcome))}
}

// summaryOf is the one entry standing for w's suppressed refusals: shaped
// as the refusals were (tool, outcome, address, client; no principal), its
// target saying how many. Refusals of several tools or outcomes take the
// most frequent kind's, and the target counts each kind, most first: the
// entry must not read as if all had been one tool's.
func summaryOf(addr string, w *refusalWindow, now time.Time) Entry {
	kinds := make([]refusalKind, 0, len(w.kinds))
	for k := range w.kinds {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b refusalKind) int {
		return cmp.Or(cmp.Compare(w.kinds[b], w.kinds[a]), cmp.Compare(a.tool, b.tool), cmp.Compare(a.outcome, b.outcome))
	})
	e := Entry{Time: now, ClientAddress: addr, ClientName: w.last.ClientName, Target: SuppressedSummary(w.suppressed, addr)}
	if len(kinds) == 0 { // not reached: a suppressed refusal is counted in its kind first
		e.Tool, e.Outcome = w.last.Tool, w.last.Outcome
		return e
	}
	e.Tool, e.Outcome = kinds[0].tool, kinds[0].outcome
	if len(kinds) == 1 && w.otherKinds == 0 {
		return e
	}
	parts := make([]string, 0, len(kinds)+1)
	for _, k := range kinds {
		parts = append(parts, strconv.FormatInt(w.kinds[k], 10)+" "+k.tool+" "+k.outcome)
	}
	if w.otherKinds > 0 {
		parts = append(parts, strconv.FormatInt(w.otherKinds, 10)+" of other kinds")
	}
	e.Target += ": " + strings.Join(parts, ", ")
	return e
}
