package limiter

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Memory is the in-process backend: exact for one replica, shared by none.
type Memory struct {
	clock  Clock
	seed   maphash.Seed
	shards [64]memShard
}

// memShard splits the key space so concurrent checks for different keys
// rarely wait on the same mutex.
type memShard struct {
	mu        sync.Mutex
	cells     map[string][]cell
	leases    map[string]leaseRecord // by lease id, in the shard of its key
	lastSweep int64
}

// leaseRecord is what a granted lease may give back, and until when
// (microseconds).
type leaseRecord struct {
	key     string
	units   int64
	until   int64
	granted Limits // the key's limits at grant time: what each unit was charged
}

// sweepEvery is how often a shard drops keys whose tiers are all full again;
// a full key is indistinguishable from an absent one, so memory stays bounded
// by the keys active within the last day.
const sweepEvery = time.Minute

// NewMemory returns an in-memory limiter reading time from clock (time.Now
// when nil).
func NewMemory(clock Clock) *Memory {
	if clock == nil {
		clock = time.Now
	}
	m := &Memory{clock: clock, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].cells = make(map[string][]cell)
		m.shards[i].leases = make(map[string]leaseRecord)
	}
	return m
}

// Allow implements Limiter.
func (m *Memory) Allow(ctx context.Context, key string, limits Limits) (Decision, error) {
	return m.AllowExtra(ctx, key, limits, Lease{})
}

// AllowExtra implements Leaser.
func (m *Memory) AllowExtra(_ context.Context, key string, limits Limits, lease Lease) (Decision, error) {
	if err := limits.Validate(); err != nil {
		return Decision{}, err
	}
	if lease.Units > 0 && lease.ID == "" {
		return Decision{}, errNoLeaseID
	}
	now := m.clock().UnixMicro()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.lastSweep > sweepEvery.Microseconds() {
		sh.sweep(now)
	}
	d, next := evaluate(sh.cells[key], now, limits, lease.Units)
	if d.Allowed {
		sh.cells[key] = next
		if d.Extra > 0 {
			sh.leases[lease.ID] = leaseRecord{
				key: key, units: d.Extra, until: now + lease.keepMillis()*1000,
				granted: append(Limits(nil), limits...),
			}
		}
	}
	return d, nil
}

// Refund implements Leaser.
func (m *Memory) Refund(_ context.Context, key string, limits Limits, id string, units int64) (int64, error) {
	if err := limits.Validate(); err != nil {
		return 0, err
	}
	now := m.clock().UnixMicro()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rec, ok := sh.leases[id]
	if !ok || rec.key != key { // another key's lease stays redeemable by it
		return 0, nil
	}
	delete(sh.leases, id)
	if rec.until <= now {
		return 0, nil
	}
	cells, ok := sh.cells[key]
	if !ok { // full already: nothing to give back
		return 0, nil
	}
	next, back := refund(cells, now, rec.granted, limits, min(max(units, 0), rec.units))
	sh.cells[key] = next
	return back, nil
}

func (m *Memory) shard(key string) *memShard {
	return &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
}

// sweep drops full keys and expired lease records.
func (sh *memShard) sweep(now int64) {
	sh.lastSweep = now
	for id, rec := range sh.leases {
		if rec.until <= now {
			delete(sh.leases, id)
		}
	}
	for k, st := range sh.cells {
		full := true
		for _, c := range st {
			if c.tat > now {
				full = false
				break
			}
		}
		if full {
			delete(sh.cells, k)
		}
	}
}

// Len returns the number of keys held; for tests.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.cells)
		sh.mu.Unlock()
	}
	return n
}

// Leases returns the number of lease records held; for tests.
func (m *Memory) Leases() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.leases)
		sh.mu.Unlock()
	}
	return n
}
