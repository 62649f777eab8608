package engine

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/store"
	"github.com/bmcis/knowledge/services/search/internal/vecmath"
)

// classVectors holds the stored vectors (chunks.embedding) of the access
// classes restricted callers read, so that their exact scan (readScope)
// runs in this process: one small database query for the queued vectors
// instead of an index-only scan of every readable row. Held vectors are
// used only while the database's vectors version (store.QueuedSearch) is
// still the one they were read at, and for at most classVectorsMaxAge;
// the replica drops them all whenever its documents, vectors or model
// change (Engine.Invalidate). Bounded by a byte budget, least recently
// used first out.
type classVectors struct {
	budget  int // float32s
	filling atomic.Bool

	mu      sync.Mutex
	epoch   uint64
	used    int
	tick    uint64
	entries map[store.Class]*classEntry
}

// classVectorsMaxAge bounds how long vectors are held: a writer that
// does not count its queue merges (the previous release, during a rolling
// upgrade) would otherwise leave them stale until the next change.
const classVectorsMaxAge = 30 * time.Second

// classEntry is one class's vectors, flat, with their inverse norms.
type classEntry struct {
	readAt     time.Time
	model, gen int64
	dims       int
	ids        []int64
	vecs       []float32
	invNorms   []float32
	lastUse    uint64
}

func newClassVectors(budgetBytes int) *classVectors {
	if budgetBytes <= 0 {
		return nil
	}
	return &classVectors{budget: budgetBytes / 4, entries: map[store.Class]*classEntry{}}
}

func (c *classVectors) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		n += len(e.ids)
	}
	return n
}

func (c *classVectors) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.entries = map[store.Class]*classEntry{}
	c.used = 0
}

// lookup returns the entries of every class when all are held for model,
// read at one generation; missing lists the classes not held.
func (c *classVectors) lookup(classes []store.Class, model int64) (held []*classEntry, gen int64, missing []store.Class, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	for _, cl := range classes {
		en := c.entries[cl]
		if en == nil || en.model != model || time.Since(en.readAt) > classVectorsMaxAge ||
			(len(held) > 0 && en.gen != held[0].gen) {
			// Read at another version than the others: all are read again.
			return nil, 0, classes, c.epoch
		}
		en.lastUse = c.tick
		held = append(held, en)
	}
	if len(held) > 0 {
		gen = held[0].gen
	}
	return held, gen, nil, c.epoch
}

// put keeps what a read found, unless the replica invalidated since epoch
// (the read may predate the change), evicting the least recently used.
func (c *classVectors) put(read store.ClassVectorsRead, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	for cl, rows := range read.Classes {
		en := &classEntry{readAt: read.At, model: read.Model, gen: read.Generation, ids: rows.IDs, lastUse: c.tick}
		if len(rows.Vectors) > 0 {
			en.dims = len(rows.Vectors[0])
		}
		size := len(rows.IDs) * (en.dims + 3)
		if size > c.budget {
			continue
		}
		en.vecs = make([]float32, 0, len(rows.IDs)*en.dims)
		en.invNorms = make([]float32, len(rows.IDs))
		for i, v := range rows.Vectors {
			en.vecs = append(en.vecs, v...)
			if n := vecmath.Dot(v, v); n > 0 {
				en.invNorms[i] = float32(1 / math.Sqrt(float64(n)))
			}
		}
		if old := c.entries[cl]; old != nil {
			delete(c.entries, cl)
			c.used -= len(old.ids) * (old.dims + 3)
		}
		for c.used+size > c.budget {
			var lru store.Class
			var oldest *classEntry
			for k, e := range c.entries {
				if oldest == nil || e.lastUse < oldest.lastUse {
					lru, oldest = k, e
				}
			}
			delete(c.entries, lru)
			c.used -= len(oldest.ids) * (oldest.dims + 3)
		}
		c.entries[cl] = en
		c.used += size
	}
}

// classSearch is the exact scan of vs's readable classes from held
// vectors plus the queued ones. ok is false when some class is not held
// (a read of the missing ones starts in the background) or the vectors
// generation moved since they were read: the caller then asks PostgreSQL.
func (e *Engine) classSearch(ctx context.Context, vs vectorSide, vec []float32, model int64) (hits []store.VectorHit, dbTime time.Duration, ok bool, err error) {
	held, gen, missing, epoch := e.classes.lookup(vs.scope.pairs, model)
	if len(missing) > 0 {
		// What could never be held is not read (an estimate: the scope's
		// readable chunks, each a vector, its id and its norm).
		if vs.scope.rows*(len(vec)+3) <= e.classes.budget && e.classes.filling.CompareAndSwap(false, true) {
			go func() {
				defer e.classes.filling.Store(false)
				fctx, cancel := context.WithTimeout(context.Background(), e.cfg.DBTimeout)
				defer cancel()
				if read, err := e.st.ClassVectors(fctx, missing); err == nil {
					e.classes.put(read, epoch)
				}
			}()
		}
		return nil, 0, false, nil
	}
	t0 := time.Now()
	queued, dbGen, err := e.st.QueuedSearch(ctx, store.VectorQuery{Vector: vec, K: vs.k, Categories: vs.scope.cats,
		Access: vs.scope.access, Model: model})
	dbTime = time.Since(t0)
	if err != nil || dbGen != gen {
		return nil, dbTime, false, err
	}
	var qn float64
	if n := vecmath.Dot(vec, vec); n > 0 {
		qn = 1 / math.Sqrt(float64(n))
	}
	top := make(hitHeap, 0, vs.k)
	for _, en := range held {
		for i, id := range en.ids {
			v := en.vecs[i*en.dims : (i+1)*en.dims : (i+1)*en.dims]
			cos := float64(vecmath.Dot(vec, v)) * qn * float64(en.invNorms[i])
			top.offer(store.VectorHit{ChunkID: id, Cosine: cos, Vector: v}, vs.k)
		}
	}
	return store.TopHits(append(top, queued...), vs.k), dbTime, true, nil
}

// hitHeap is a min-heap by (cosine, then higher chunk id) of at most k
// hits: the k best seen so far.
type hitHeap []store.VectorHit

func worse(a, b store.VectorHit) bool {
	if a.Cosine != b.Cosine {
		return a.Cosine < b.Cosine
	}
	return a.ChunkID > b.ChunkID
}

func (h *hitHeap) offer(x store.VectorHit, k int) {
	s := *h
	if len(s) < k {
		s = append(s, x)
		for i := len(s) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(s[i], s[p]) {
				break
			}
			s[i], s[p] = s[p], s[i]
			i = p
		}
		*h = s
		return
	}
	if k == 0 || !worse(s[0], x) {
		return
	}
	s[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && worse(s[l], s[m]) {
			m = l
		}
		if r < len(s) && worse(s[r], s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
}
