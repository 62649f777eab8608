package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmcis/knowledge/services/search/internal/hnsw"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// vectorMirror holds every stored vector of the active model, indexed or
// still queued, in an HNSW graph in memory, so an unrestricted query's
// vector side walks memory and asks PostgreSQL nothing (issue 32: the
// database walk, then the round trip for the queue, were most of a hybrid
// query's time). PostgreSQL stays the store of record; the mirror is a
// cache of it that is used only while it is complete as of the change
// feed:
//
//   - It is read in one snapshot together with that snapshot's vectors
//     generation, which moves whenever vectors are queued or applied
//     (a queue merge moves a vector from one table to the other, and the
//     mirror holds both). Vectors leave only with their chunks, which every
//     path drops when the replica no longer holds them.
//   - The follower tells the engine every vectors generation the feed
//     brings (VectorsRead), before it applies the documents read with
//     it. A query uses the graph when it is at least that one and the
//     feed's listener is connected; otherwise it takes the pgvector path,
//     and the mirror catches up in the background. So a
//     query sees the vectors committed before the replica's last feed
//     sync, as BM25 sees the documents: a vector queued by another replica
//     shows once its LISTEN notification reaches this one, and the replica
//     that ingests syncs its feed before it answers the ingest.
//   - Catching up reads only what changed: the chunks of documents written
//     since the generation read last (the feed's own order, equal to
//     commit order), and the chunks read before without a vector. A stored
//     vector never changes under one model; another model is a full read.
//
// Chunks deleted are marked deleted in the graph (walked through, never
// returned); past a quarter of the graph the next catch-up rebuilds it.
// Like every vector path, what it returns is tested against the replica's
// own records before it is ranked.
type vectorMirror struct {
	st     MirrorStore
	budget int
	// loaded is how many chunks the replica holds: more than fit means no
	// full read is tried (counting the stored vectors scans the table).
	loaded func() int
	// dims is the vectors' dimension, told by the queries (0: none yet).
	dims atomic.Int64
	log  *slog.Logger

	view    atomic.Pointer[mirrorView]
	running atomic.Bool
	again   atomic.Bool
	// seen is the newest vectors generation the change feed brought:
	// while it is past the view's, queries go to pgvector.
	seen atomic.Int64
	// building is set while a full read and build run.
	building atomic.Bool

	// life stops the catch-ups at shutdown (close).
	ctx     context.Context
	cancel  context.CancelFunc
	life    sync.Mutex
	closed  bool
	rounds  sync.WaitGroup
	retried atomic.Bool // a kick is scheduled for retryAt

	mu       sync.Mutex // one catch-up at a time; guards the fields below
	graph    *hnsw.Graph
	model    int64
	gen      int64
	pending  map[int64]int64   // chunk read without a vector → its document
	chunksOf map[int64][]int64 // document → its chunks
	retryAt  time.Time
	tooMany  int64 // vectors counted when the last full read found too many
	version  int64 // the vectors generation read last
}

// MirrorStore is the database side of the mirror (store.Store).
type MirrorStore interface {
	MirrorChanges(ctx context.Context, q store.MirrorQuery, each func(store.MirrorChunk) error) (store.MirrorRead, error)
}

// mirrorView is what queries use: a graph complete at version for model.
type mirrorView struct {
	g              *hnsw.Graph
	model, version int64
}

// errOtherDims stops a read that meets vectors of another dimension than
// the queries'.
var errOtherDims = errors.New("stored vectors of another dimension than the queries'")

// mirrorReadTimeout bounds one catch-up's database read (a full read of
// a million vectors moves about a gigabyte, encoded as it arrives).
const mirrorReadTimeout = 10 * time.Minute

func newVectorMirror(st MirrorStore, budgetBytes int, loaded func() int, log *slog.Logger) *vectorMirror {
	if budgetBytes <= 0 || st == nil {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &vectorMirror{st: st, log: log, budget: budgetBytes, loaded: loaded, ctx: ctx, cancel: cancel}
}

// close stops the catch-ups and waits for the one running.
func (m *vectorMirror) close() {
	m.life.Lock()
	m.closed = true
	m.life.Unlock()
	m.cancel()
	m.rounds.Wait()
}

// usable returns the graph when it holds model's vectors.
func (m *vectorMirror) usable(model int64) *mirrorView {
	v := m.view.Load()
	if v == nil || v.model != model {
		return nil
	}
	return v
}

// held is the number of vectors the mirror holds (deleted ones not
// counted).
func (m *vectorMirror) held() int {
	v := m.view.Load()
	if v == nil {
		return 0
	}
	return v.g.Len() - v.g.Deleted()
}

// kick starts a catch-up in the background, or asks the one running for
// another round; dims, when not 0, is the dimension of the query vectors.
func (m *vectorMirror) kick(dims int) {
	if dims > 0 {
		m.dims.Store(int64(dims))
	}
	m.again.Store(true)
	if !m.running.CompareAndSwap(false, true) {
		return
	}
	m.life.Lock()
	if m.closed {
		m.life.Unlock()
		m.running.Store(false)
		return
	}
	m.rounds.Add(1)
	m.life.Unlock()
	go func() {
		defer m.rounds.Done()
		for {
			for m.again.Swap(false) {
				ctx, cancel := context.WithTimeout(m.ctx, mirrorReadTimeout)
				err := m.catchUp(ctx)
				cancel()
				if err != nil {
					if m.ctx.Err() == nil {
						m.log.Warn("vector mirror not brought up to date; queries use pgvector meanwhile", "error", err.Error())
					}
					break
				}
			}
			m.running.Store(false)
			// A kick between the last round and the Store above found the
			// loop still running: take it.
			if !m.again.Load() || !m.running.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// catchUp brings the mirror to the database's current snapshot.
func (m *vectorMirror) catchUp(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	dims := int(m.dims.Load())
	if dims == 0 {
		return nil
	}
	if now.Before(m.retryAt) {
		// Not dropped: deletes move no version, so no query would ask
		// again.
		if m.retried.CompareAndSwap(false, true) {
			time.AfterFunc(m.retryAt.Sub(now), func() {
				m.retried.Store(false)
				m.kick(0)
			})
		}
		return nil
	}
	// Float32 vectors while they fit the budget (exact scores); past
	// that, int8 codes only, a third of the memory.
	exactMax := int64(m.budget / hnsw.NodeBytes(dims, false))
	maxVectors := int64(m.budget / hnsw.NodeBytes(dims, true))
	since := m.gen
	if m.graph == nil || m.graph.Dims() != dims {
		// None yet, or the queries now have another dimension (the
		// embeddings were resized, perhaps under the same model row).
		since = 0
	}
	var pending []int64 // a full read needs none
	if since > 0 {
		pending = make([]int64, 0, len(m.pending))
		for id := range m.pending {
			pending = append(pending, id)
		}
	}
	if since == 0 {
		if n := int64(m.loaded()); n > maxVectors {
			// Every chunk has a vector once embedded: this many will not
			// fit. Asked again a minute on, without a database call.
			if m.tooMany == 0 { // logged once as it turns off
				m.log.Info("vector mirror off: the chunks exceed BMCIS_SEARCH_VECTOR_MIRROR_MB; queries use pgvector",
					"chunks", n, "fit", maxVectors)
			}
			m.drop()
			m.tooMany = n
			m.retryAt = now.Add(time.Minute)
			return nil
		}
		m.building.Store(true)
		defer m.building.Store(false)
	}
	// A full read goes into a batch as it arrives (the store says when
	// a read is one); a catch-up's few chunks are kept to apply.
	var (
		batch    *hnsw.Batch
		changes  []store.MirrorChunk
		chunksOf = map[int64][]int64{}
		waiting  = map[int64]int64{}
	)
	q := store.MirrorQuery{Model: m.model, Since: since, LastVersion: m.version, Pending: pending, MaxVectors: maxVectors,
		Counted: func(model, vectors int64) {
			if model != m.model {
				// The graph held is of no use to the new model's queries:
				// free it before building the next.
				m.drop()
			}
			cfg := hnsw.DefaultConfig(dims)
			cfg.CodesOnly = vectors > exactMax
			batch = hnsw.NewBatch(cfg, int(vectors))
		}}
	rd, err := m.st.MirrorChanges(ctx, q, func(c store.MirrorChunk) error {
		if c.Vector != nil && len(c.Vector) != dims {
			return errOtherDims
		}
		if batch == nil {
			changes = append(changes, c)
			return nil
		}
		chunksOf[c.DocumentID] = append(chunksOf[c.DocumentID], c.ChunkID)
		if c.Vector == nil {
			waiting[c.ChunkID] = c.DocumentID
		} else {
			batch.Add(c.ChunkID, c.Vector)
		}
		return nil
	})
	if errors.Is(err, errOtherDims) {
		// Another model's dimension than the queries told: the next
		// query of the new model tells it (not before a minute, so mixed
		// dimensions do not make every query start a full read).
		m.drop()
		m.retryAt = now.Add(time.Minute)
		return nil
	}
	if err != nil {
		m.retryAt = now.Add(time.Second)
		if batch != nil {
			m.retryAt = now.Add(30 * time.Second) // a full read is costly to repeat
		}
		m.again.Store(true) // retried at retryAt
		return err
	}
	// seen is not lowered to the version read: a read that began before
	// the feed brought a newer generation must not make the graph look
	// current. (A restore starts the stack afresh: docs/BACKUP.md.)
	m.version = rd.Version
	switch {
	case rd.Model == 0:
		m.drop()
		return nil
	case rd.Model != m.model || since == 0:
		if rd.Vectors > maxVectors {
			if m.tooMany == 0 {
				m.log.Info("vector mirror off: the stored vectors exceed BMCIS_SEARCH_VECTOR_MIRROR_MB; queries use pgvector",
					"vectors", rd.Vectors, "fit", maxVectors)
			}
			m.drop()
			m.tooMany = rd.Vectors
			// Counted again at most once a minute.
			m.retryAt = now.Add(time.Minute)
			return nil
		}
		m.tooMany = 0
		if batch == nil { // not a full read after all: cannot be, but never a nil graph
			batch = hnsw.NewBatch(hnsw.DefaultConfig(dims), 0)
		}
		start := time.Now()
		g, err := batch.Build(m.ctx)
		if err != nil {
			return err
		}
		m.graph, m.pending, m.chunksOf = g, waiting, chunksOf
		m.log.Info("vector mirror built", "vectors", g.Len(), "codes_only", g.CodesOnly(),
			"seconds", time.Since(start).Seconds())
	default:
		m.apply(rd, changes)
	}
	m.model, m.gen = rd.Model, rd.Generation
	g := m.graph
	m.view.Store(&mirrorView{g: g, model: rd.Model, version: rd.Version})
	if live := g.Len() - g.Deleted(); int64(live) > maxVectors {
		m.drop() // counted on the next full read
		m.retryAt = now.Add(time.Minute)
	} else if g.Deleted() > 1000 && g.Deleted() > g.Len()/4 || !g.CodesOnly() && int64(live) > exactMax {
		// Rebuilt by the next round (as codes when the float32 vectors
		// outgrew the budget), the view serving meanwhile.
		m.gen = 0
		m.graph = nil
		m.again.Store(true)
	}
	return nil
}

func (m *vectorMirror) drop() {
	m.view.Store(nil)
	m.graph, m.model, m.gen, m.pending, m.chunksOf = nil, 0, 0, nil, nil
}

// apply adds what changed since the last read to the graph in place:
// queries may use it meanwhile, since everything it gains is stored.
func (m *vectorMirror) apply(rd store.MirrorRead, chunks []store.MirrorChunk) {
	g := m.graph
	changed := make(map[int64]map[int64]bool, len(rd.Changed))
	for _, d := range rd.Changed {
		changed[d] = map[int64]bool{}
	}
	for _, c := range chunks {
		if now, ok := changed[c.DocumentID]; ok {
			now[c.ChunkID] = true
		}
	}
	gone := func(id int64) {
		g.Delete(id)
		delete(m.pending, id)
	}
	for d, now := range changed {
		for _, id := range m.chunksOf[d] {
			if !now[id] {
				gone(id)
			}
		}
		ids := make([]int64, 0, len(now))
		for id := range now {
			ids = append(ids, id)
		}
		m.chunksOf[d] = ids
	}
	for _, d := range rd.Deleted {
		if _, ok := changed[d]; ok {
			continue
		}
		for _, id := range m.chunksOf[d] {
			gone(id)
		}
		delete(m.chunksOf, d)
	}
	for _, c := range chunks {
		if c.Vector == nil {
			m.pending[c.ChunkID] = c.DocumentID
			continue
		}
		delete(m.pending, c.ChunkID)
		g.Add(c.ChunkID, c.Vector)
	}
}

// mirrorSearch answers an unrestricted vector side from the mirror. ok is
// false when the mirror is not complete as of the change feed (it catches
// up in the background): the caller then asks pgvector.
func (e *Engine) mirrorSearch(_ context.Context, vs vectorSide, vec []float32, model int64) (hits []store.VectorHit, dbTime time.Duration, ok bool, err error) {
	view := e.mirror.usable(model)
	if view == nil || e.mirror.seen.Load() > view.version || view.g.Dims() != len(vec) {
		e.mirror.kick(len(vec))
		return nil, 0, false, nil
	}
	if e.cfg.FeedLive != nil && !e.cfg.FeedLive() {
		return nil, 0, false, nil
	}
	found := view.g.Search(vec, vs.k, e.cfg.EfSearch)
	hits = make([]store.VectorHit, len(found))
	for i, h := range found {
		hits[i] = store.VectorHit{ChunkID: h.ID, Cosine: h.Cosine, Vector: h.Vector}
	}
	return hits, 0, true, nil
}

// saw records a vectors generation the change feed brought: queries do
// not use a graph older than it.
func (m *vectorMirror) saw(gen int64) {
	for cur := m.seen.Load(); gen > cur && !m.seen.CompareAndSwap(cur, gen); {
		cur = m.seen.Load()
	}
}

// mirroredVectors returns the vectors of ids the mirror holds for model,
// and the ids it does not hold. No version check is needed: a stored
// vector never changes under one model.
func (e *Engine) mirroredVectors(model int64, ids []int64) (map[int64][]float32, []int64) {
	var view *mirrorView
	if e.mirror != nil {
		view = e.mirror.usable(model)
	}
	if view == nil {
		return nil, ids
	}
	vecs := make(map[int64][]float32, len(ids))
	var missing []int64
	for _, id := range ids {
		if v := view.g.Vector(id); v != nil {
			vecs[id] = v
		} else {
			missing = append(missing, id)
		}
	}
	return vecs, missing
}
