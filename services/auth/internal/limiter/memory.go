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
	lastSweep int64
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
	}
	return m
}

// Allow implements Limiter.
func (m *Memory) Allow(ctx context.Context, key string, limits Limits) (Decision, error) {
	return m.AllowExtra(ctx, key, limits, 0)
}

// AllowExtra implements Leaser.
func (m *Memory) AllowExtra(_ context.Context, key string, limits Limits, extra int64) (Decision, error) {
	if err := limits.Validate(); err != nil {
		return Decision{}, err
	}
	now := m.clock().UnixMicro()
	sh := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now-sh.lastSweep > sweepEvery.Microseconds() {
		sh.sweep(now)
	}
	d, next := evaluate(sh.cells[key], now, limits, extra)
	if d.Allowed {
		sh.cells[key] = next
	}
	return d, nil
}

// Refund implements Leaser.
func (m *Memory) Refund(_ context.Context, key string, limits Limits, units int64) error {
	if err := limits.Validate(); err != nil {
		return err
	}
	now := m.clock().UnixMicro()
	sh := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cells, ok := sh.cells[key]; ok {
		sh.cells[key] = refund(cells, now, limits, units)
	}
	return nil
}

func (sh *memShard) sweep(now int64) {
	sh.lastSweep = now
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
