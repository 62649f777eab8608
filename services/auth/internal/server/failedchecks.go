package server

import (
	"net/netip"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// failedChecks budgets, per client address, the checks that failed (a
// malformed, unknown or wrong key) in a fixed window. Past the budget a
// key id this replica does not hold in memory is refused without a
// database lookup, so a client making up keys costs no more than its
// budget of lookups per window. Kept in memory, per replica: N replicas
// allow N budgets, which still bounds the lookups a client can cause.
type failedChecks struct {
	limit  int64 // 0: no budget
	window time.Duration
	clock  func() time.Time

	mu      sync.Mutex
	clients *lru.Cache[netip.Prefix, *failWindow]
}

type failWindow struct {
	start time.Time
	n     int64
}

// maxTrackedClients bounds the memory: the least recently failing clients
// are forgotten first (a forgotten client starts a fresh budget).
const maxTrackedClients = 100_000

func newFailedChecks(limit int, window time.Duration, clock func() time.Time) *failedChecks {
	c, _ := lru.New[netip.Prefix, *failWindow](maxTrackedClients) // size > 0: no error
	return &failedChecks{limit: int64(limit), window: window, clock: clock, clients: c}
}

// clientOf is the address a client is budgeted by: its IPv4 address, or
// the /64 of its IPv6 address (one host commonly holds a whole /64). A
// port is ignored; an unparsable address is no client.
func clientOf(addr string) (netip.Prefix, bool) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		ap, perr := netip.ParseAddrPort(addr)
		if perr != nil {
			return netip.Prefix{}, false
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	return p, err == nil
}

// exhausted reports whether client spent its budget in the current window,
// and how long until the window ends.
func (f *failedChecks) exhausted(client netip.Prefix) (bool, time.Duration) {
	if f.limit <= 0 {
		return false, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.clients.Get(client)
	if !ok {
		return false, 0
	}
	left := w.start.Add(f.window).Sub(f.clock())
	if left <= 0 {
		return false, 0
	}
	return w.n >= f.limit, left
}

// failed counts one failed check of client.
func (f *failedChecks) failed(client netip.Prefix) {
	if f.limit <= 0 {
		return
	}
	now := f.clock()
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.clients.Get(client)
	if !ok || !now.Before(w.start.Add(f.window)) {
		f.clients.Add(client, &failWindow{start: now, n: 1})
		return
	}
	w.n++
}
