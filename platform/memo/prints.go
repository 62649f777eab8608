package memo

import (
	"hash/maphash"
	"sync"
)

// Prints maps strings to values of type V by a 128-bit fingerprint of the
// string (two independently seeded maphash sums) and holds no key: for
// values cheap to hold but dear to compute from long strings, where copying
// each new string into a table would cost more than a lookup saves. A
// wrong value needs two different strings whose sums agree under both
// seeds, which are random per process: about 2^-128 for a pair. Bounded:
// a new entry takes the slot of whatever held it. Safe for concurrent use.
type Prints[V any] struct {
	seeds [2]maphash.Seed
	mask  uint64
	slots []printSlot[V]
	locks [64]sync.Mutex
}

type printSlot[V any] struct {
	print Print
	v     V
	ok    bool
}

// Print is a string's fingerprint under one table's seeds.
type Print struct{ a, b uint64 }

// NewPrints returns a table of at least slots entries (a power of two).
func NewPrints[V any](slots int) *Prints[V] {
	n := 1
	for n < slots {
		n <<= 1
	}
	return &Prints[V]{
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		mask:  uint64(n - 1),
		slots: make([]printSlot[V], n),
	}
}

// Of is the fingerprint of s.
func (t *Prints[V]) Of(s string) Print {
	return Print{maphash.String(t.seeds[0], s), maphash.String(t.seeds[1], s)}
}

// OfBytes is the fingerprint of b, Of(string(b)).
func (t *Prints[V]) OfBytes(b []byte) Print {
	return Print{maphash.Bytes(t.seeds[0], b), maphash.Bytes(t.seeds[1], b)}
}

// Get returns the value stored for p.
func (t *Prints[V]) Get(p Print) (V, bool) {
	i := p.a & t.mask
	mu := &t.locks[i%uint64(len(t.locks))]
	mu.Lock()
	s := t.slots[i]
	mu.Unlock()
	if !s.ok || s.print != p {
		var zero V
		return zero, false
	}
	return s.v, true
}

// Put stores v for p.
func (t *Prints[V]) Put(p Print, v V) {
	i := p.a & t.mask
	mu := &t.locks[i%uint64(len(t.locks))]
	mu.Lock()
	t.slots[i] = printSlot[V]{print: p, v: v, ok: true}
	mu.Unlock()
}
