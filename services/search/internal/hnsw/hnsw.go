// Package hnsw is an in-memory approximate nearest-neighbour graph over
// cosine similarity: the hierarchical navigable small world of Malkov and
// Yashunin (arXiv:1603.09320), with the neighbour-selection heuristic
// (their algorithm 4), with pgvector's parameters. The search service
// keeps one over every stored vector so that a query's vector side costs
// no database walk (engine's vector mirror).
//
// Walks compare int8 codes (dot_amd64.s: AVX2 or SSE4.1), which take a
// quarter of the memory a float32 vector does, and on amd64 fetch each
// expanded node's unseen neighbours all at once (prefetch). Building
// uses the codes too (the 100k benchmark's graph was ready 11 s after
// its ingest, against 63 to 76 s built with exact distances); a search
// scores the candidates it ends with exactly, unless the graph keeps the
// codes only (Config.CodesOnly: a third of the memory).
//
// A vector added again under another id (a boilerplate chunk stored many
// times) is not linked: it is returned with the node first linked with
// it (sameAs).
//
// One goroutine adds at a time (Add and Delete take the write lock);
// any number search concurrently with each other.
package hnsw

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"unsafe"

	"github.com/bmcis/knowledge/services/search/internal/vecmath"
)

// Config is a graph's shape.
type Config struct {
	// Dims is the vectors' dimension.
	Dims int
	// M is the links a node keeps per layer above 0 (2M on layer 0).
	M int
	// EfConstruction is the candidate list size while linking a new node.
	EfConstruction int
	// Seed makes a graph's layers, and so its answers, reproducible.
	Seed uint64
	// CodesOnly keeps each vector's int8 code and drops the float32
	// vector: a node takes about a third of the memory (NodeBytes), so a
	// million 256-d vectors fit in about 550 MB. Searches then score the
	// candidates they end with from the codes too (cosines within about
	// 0.01 of exact), and Vector and Hit.Vector are the codes decoded:
	// unit length, not the stored vector.
	CodesOnly bool
}

// DefaultConfig is pgvector's default build (m = 16, ef_construction =
// 64), which migrations/00001 uses for the stored index.
func DefaultConfig(dims int) Config {
	return Config{Dims: dims, M: 16, EfConstruction: 64, Seed: 1}
}

// Hit is one neighbour.
type Hit struct {
	ID int64
	// Cosine is the cosine similarity with the query.
	Cosine float64
	// Vector is the stored vector as added (not a copy: read only), or
	// its code decoded (CodesOnly).
	Vector []float32
}

// Graph is safe for concurrent use.
type Graph struct {
	cfg Config
	ml  float64
	rng *rand.Rand

	mu     sync.RWMutex
	ids    []int64
	vecs   [][]float32 // nil when CodesOnly
	inv    []float32   // 1/|v|, 0 for a zero vector; nil when CodesOnly
	codes  []int8      // node n's int8 code at [n*Dims, (n+1)*Dims)
	scales []float32   // unit vector ≈ scale × code
	// links0 holds every node's layer-0 links in one slab, without a
	// pointer per node for the collector to trace: node n's count at
	// n*(2M+1), then up to 2M ids.
	links0 []int32
	// upper holds the links on layers 1 and up of the nodes that reach
	// them (about one in M): upper[n][l-1].
	upper   map[int32][][]int32
	deleted []bool
	ndel    int
	byID    map[int64]int32
	// copies are the nodes added with a vector equal to a linked node's,
	// by that node: they have no links and are returned with it (sameAs).
	copies map[int32][]int32
	entry  int32 // -1 while empty
	top    int   // the entry point's layer

	visits sync.Pool // *visited
	// scratch holds the buffers of linking, reused under the write lock:
	// a build of a million nodes otherwise allocates gigabytes of them.
	scratch struct {
		eps, nb, cs, kept, pruned []cand
		layers                    [][]cand // linkNode's candidates, from its top layer down
		ls                        []int32
	}
}

// NodeBytes estimates one node's memory at dims: its int8 code, its
// float32 vector unless codesOnly, its id, scale and links (up to 32 on
// layer 0) and map entry. The arrays grow by a quarter when full (Go's
// append), so it counts them a quarter larger: a bound, which
// TestNodeBytesCoversAGraph measures after such a growth.
func NodeBytes(dims int, codesOnly bool) int {
	// The code, layer-0 links, id, scale and flag; then byID's entry,
	// with room for the map's own growth.
	slabs := 5 * (dims + 145) / 4
	const entry = 48
	if codesOnly {
		return slabs + entry
	}
	return slabs + entry + 4*dims + 5*(24+4)/4 // the vector, its slice and norm
}

// New returns an empty graph.
func New(cfg Config) *Graph {
	if cfg.M < 2 {
		cfg.M = 2
	}
	if cfg.EfConstruction < cfg.M {
		cfg.EfConstruction = cfg.M
	}
	return &Graph{cfg: cfg, ml: 1 / math.Log(float64(cfg.M)), rng: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		byID: map[int64]int32{}, upper: map[int32][][]int32{}, copies: map[int32][]int32{}, entry: -1}
}

// CodesOnly reports whether the graph keeps codes only (Config.CodesOnly).
func (g *Graph) CodesOnly() bool { return g.cfg.CodesOnly }

// Dims is the dimension the graph was made for.
func (g *Graph) Dims() int { return g.cfg.Dims }

// Len is the number of nodes, deleted ones included.
func (g *Graph) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.ids)
}

// Deleted is the number of nodes marked deleted.
func (g *Graph) Deleted() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.ndel
}

// Vector returns the vector stored under id (nil when absent or deleted;
// read only), or with CodesOnly its code decoded.
func (g *Graph) Vector(id int64) []float32 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if n, ok := g.byID[id]; ok && !g.deleted[n] {
		return g.vector(n)
	}
	return nil
}

func (g *Graph) vector(n int32) []float32 {
	if !g.cfg.CodesOnly {
		return g.vecs[n]
	}
	return g.decode(n, make([]float32, g.cfg.Dims))
}

// decode writes node n's code, scaled back, into dst (Dims long).
func (g *Graph) decode(n int32, dst []float32) []float32 {
	at := int(n) * g.cfg.Dims
	for i, c := range g.codes[at : at+g.cfg.Dims] {
		dst[i] = float32(c) * g.scales[n]
	}
	return dst
}

// Delete marks id deleted: searches still walk through it but never return
// it. Deleting an absent id does nothing.
func (g *Graph) Delete(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := g.byID[id]; ok && !g.deleted[n] {
		g.deleted[n] = true
		g.ndel++
	}
}

// Add links v under id. An id already present (not deleted) is left as it
// is: a stored vector never changes under one model; a deleted one comes
// back with the new vector as a new node. v is kept, not copied (nor
// kept at all with CodesOnly).
func (g *Graph) Add(id int64, v []float32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := g.byID[id]; ok && !g.deleted[n] {
		return
	}
	// A deleted one stays a waypoint; the id now names the new node.
	g.linkNode(g.appendNode(id, v), g.drawLevel())
}

// drawLevel is a new node's top layer.
func (g *Graph) drawLevel() int {
	return int(math.Floor(-math.Log(1-g.rng.Float64()) * g.ml))
}

// appendNode stores v under id as node n, not linked yet.
func (g *Graph) appendNode(id int64, v []float32) int32 {
	n := int32(len(g.ids))
	g.ids = append(g.ids, id)
	inv := invNorm(v)
	if !g.cfg.CodesOnly {
		g.vecs = append(g.vecs, v)
		g.inv = append(g.inv, inv)
	}
	var scale float32
	g.codes, scale = quantize(g.codes, v, inv, g.cfg.Dims)
	g.scales = append(g.scales, scale)
	g.deleted = append(g.deleted, false)
	g.links0 = append(g.links0, make([]int32, 2*g.cfg.M+1)...)
	return n
}

// linkNode links node n, stored already, on layers 0 to level. Nodes
// stored after it and not linked yet are never reached: nothing links to
// them.
func (g *Graph) linkNode(n int32, level int) {
	if level > 0 {
		g.upper[n] = make([][]int32, level)
	}
	g.byID[g.ids[n]] = n
	if g.entry < 0 {
		g.entry, g.top = n, level
		return
	}
	q := g.nodeQuery(n)
	vis := g.visited()
	defer g.visits.Put(vis)
	ep := g.entry
	epd := g.dist(q, ep)
	for l := g.top; l > level; l-- {
		ep, epd = g.greedy(q, ep, epd, l)
	}
	s := &g.scratch
	// Every layer's candidates first: a copy of a linked node is linked on
	// no layer (sameAs reads layer 0's), and what is linked on one layer
	// does not change the walk of the layers below.
	from := min(level, g.top)
	for len(s.layers) <= from {
		s.layers = append(s.layers, nil)
	}
	eps := append(s.eps[:0], cand{epd, ep})
	s.eps = eps
	for l := from; l >= 0; l-- {
		// The next layer starts from all of them (algorithm 1).
		s.layers[from-l] = g.searchLayer(q, eps, g.cfg.EfConstruction, l, vis, nil, s.layers[from-l])
		eps = s.layers[from-l]
	}
	if o, ok := g.sameAs(s.layers[from], q, n); ok {
		g.copies[o] = append(g.copies[o], n)
		delete(g.upper, n)
		return
	}
	for l := from; l >= 0; l-- {
		s.nb = g.selectNeighbours(s.layers[from-l], g.cfg.M, s.nb)
		var ls []int32 // layer 0's go into the slab; the others are kept
		if l == 0 {
			ls = s.ls[:0]
		}
		for _, c := range s.nb {
			ls = append(ls, c.node)
		}
		if l == 0 {
			s.ls = ls
		}
		g.setLinks(n, l, ls)
		for _, c := range s.nb {
			g.link(c.node, n, c.d, l)
		}
	}
	if level > g.top {
		g.entry, g.top = n, level
	}
}

// Search returns the k live nodes nearest q, best first (ties in the
// order the nodes were added),
// walking layer 0 with a candidate list of max(ef, k) live nodes.
func (g *Graph) Search(q []float32, k, ef int) []Hit {
	return g.search(q, k, ef, true)
}

// search is Search; coded walks the int8 codes, else the float32 vectors
// (tests compare the two).
func (g *Graph) search(q []float32, k, ef int, coded bool) []Hit {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.entry < 0 || k <= 0 {
		return nil
	}
	nn := dot(q, q)
	if !finite(nn) {
		return nil // a NaN or infinite component: no distance means anything
	}
	exact := query{v: q, inv: invOf(nn)}
	// The walk compares int8 codes: a quarter of the bytes a float32
	// vector takes, and a walk's cost is mostly fetching vectors from
	// memory. The list it ends with is then scored exactly and re-sorted.
	// At k = ef that list is the answer, so the codes may cost a true
	// neighbour at its edge (recall@100 at ef 100 within 0.01 of the float
	// walk, TestCodedWalkKeepsRecall).
	qq := exact
	if coded || g.cfg.CodesOnly {
		qq.codes, qq.scale = quantize(make([]int8, 0, g.cfg.Dims), q, exact.inv, g.cfg.Dims)
	}
	vis := g.visited()
	defer g.visits.Put(vis)
	ep := g.entry
	epd := g.dist(qq, ep)
	for l := g.top; l > 0; l-- {
		ep, epd = g.greedy(qq, ep, epd, l)
	}
	// Deleted nodes are walked through but take no place in the list, so
	// k answers come back whenever k live ones are reachable.
	var returnable func(int32) bool
	if g.ndel > 0 {
		returnable = g.returnable
	}
	w := g.searchLayer(qq, []cand{{epd, ep}}, max(ef, k), 0, vis, returnable, nil)
	if !g.cfg.CodesOnly {
		for _, c := range w {
			if v := g.vecs[c.node]; len(v) > 0 {
				prefetchVector(v)
			}
		}
		for i := range w {
			w[i].d = g.dist(exact, w[i].node)
		}
	}
	if len(g.copies) > 0 || g.ndel > 0 {
		w = g.withCopies(w)
	}
	sortCands(w)
	w = w[:min(k, len(w))]
	out := make([]Hit, 0, len(w))
	var decoded []float32 // every hit's decoded code, in one allocation
	if g.cfg.CodesOnly {
		decoded = make([]float32, len(w)*g.cfg.Dims)
	}
	for i, c := range w {
		h := Hit{ID: g.ids[c.node], Cosine: 1 - float64(c.d)}
		if g.cfg.CodesOnly {
			h.Cosine = max(-1, min(1, h.Cosine)) // the codes' rounding can pass ±1
		}
		if g.cfg.CodesOnly {
			h.Vector = g.decode(c.node, decoded[i*g.cfg.Dims:(i+1)*g.cfg.Dims:(i+1)*g.cfg.Dims])
		} else {
			h.Vector = g.vecs[c.node]
		}
		out = append(out, h)
	}
	return out
}

// sameAs returns the node of w (a layer-0 search for node n, as q) whose
// vector equals n's. A vector stored many times (a boilerplate chunk)
// is linked once and its copies are returned with it: linked as nodes of
// their own, the copies filled every list near them (the heuristic keeps
// a candidate as far from each kept one as from the base), later copies
// got no links in, and walks entering the graph elsewhere never reached
// them (TestDuplicatesStayReachable).
func (g *Graph) sameAs(w []cand, q query, n int32) (int32, bool) {
	self := g.dist(q, n) // an equal vector has the same code: this distance
	for _, c := range w {
		if c.d == self && g.equal(c.node, n) {
			return c.node, true
		}
	}
	return 0, false
}

// equal reports whether nodes a and b hold the same vector: the same
// float32 vector, or with CodesOnly the same code and scale (all that is
// kept of it).
func (g *Graph) equal(a, b int32) bool {
	if !g.cfg.CodesOnly {
		return slices.Equal(g.vecs[a], g.vecs[b])
	}
	d := g.cfg.Dims
	return g.scales[a] == g.scales[b] && slices.Equal(g.codes[int(a)*d:int(a+1)*d], g.codes[int(b)*d:int(b+1)*d])
}

// returnable says whether a walk's list may hold n: it is live, or one of
// its copies is.
func (g *Graph) returnable(n int32) bool {
	if !g.deleted[n] {
		return true
	}
	for _, c := range g.copies[n] {
		if !g.deleted[c] {
			return true
		}
	}
	return false
}

// withCopies is w's live nodes and their live copies, each copy at its
// node's distance.
func (g *Graph) withCopies(w []cand) []cand {
	out := make([]cand, 0, len(w))
	for _, c := range w {
		if !g.deleted[c.node] {
			out = append(out, c)
		}
		for _, o := range g.copies[c.node] {
			if !g.deleted[o] {
				out = append(out, cand{c.d, o})
			}
		}
	}
	return out
}

func (g *Graph) maxLinks(layer int) int {
	if layer == 0 {
		return 2 * g.cfg.M
	}
	return g.cfg.M
}

// link adds to from's layer-l links to, d apart, pruning from's list by
// the heuristic when it is full.
func (g *Graph) link(from, to int32, d float32, l int) {
	ls := g.neighbours(from, l)
	if len(ls) < g.maxLinks(l) {
		g.setLinks(from, l, append(ls, to))
		return
	}
	fq := g.nodeQuery(from)
	s := &g.scratch // not s.nb: linkNode is walking it
	cs := append(s.cs[:0], cand{d, to})
	for _, o := range ls {
		cs = append(cs, cand{g.dist(fq, o), o})
	}
	sortCands(cs)
	s.cs = cs
	s.kept = g.selectNeighbours(cs, g.maxLinks(l), s.kept)
	ls = ls[:0]
	for _, c := range s.kept {
		ls = append(ls, c.node)
	}
	g.setLinks(from, l, ls)
}

// neighbours is node n's links on layer l. On layer 0 it is a window of
// the slab with room for 2M: appending within it writes the slab.
func (g *Graph) neighbours(n int32, l int) []int32 {
	if l > 0 {
		return g.upper[n][l-1]
	}
	at := int(n) * (2*g.cfg.M + 1)
	end := at + 1 + 2*g.cfg.M
	return g.links0[at+1 : at+1+int(g.links0[at]) : end]
}

// setLinks makes ls node n's links on layer l (at most maxLinks(l)).
func (g *Graph) setLinks(n int32, l int, ls []int32) {
	if l > 0 {
		g.upper[n][l-1] = ls
		return
	}
	at := int(n) * (2*g.cfg.M + 1)
	copy(g.links0[at+1:], ls) // a no-op when ls is the window itself
	g.links0[at] = int32(len(ls))
}

// selectNeighbours is the heuristic of the paper's algorithm 4 over cs
// (sorted, nearest first): a candidate is kept only when it is nearer the
// base than to every one kept before, so links spread in all directions;
// the nearest discarded ones fill what room is left.
func (g *Graph) selectNeighbours(cs []cand, m int, dst []cand) []cand {
	if len(cs) <= m {
		return append(dst[:0], cs...)
	}
	kept := dst[:0]
	pruned := g.scratch.pruned[:0]
	defer func() { g.scratch.pruned = pruned[:0] }()
	for _, c := range cs {
		if len(kept) == m {
			break
		}
		cq := g.nodeQuery(c.node)
		good := true
		for _, k := range kept {
			if g.dist(cq, k.node) < c.d {
				good = false
				break
			}
		}
		if good {
			kept = append(kept, c)
		} else {
			pruned = append(pruned, c)
		}
	}
	for _, c := range pruned {
		if len(kept) == m {
			break
		}
		kept = append(kept, c)
	}
	return kept
}

// nodeQuery is node n as a query over the codes: the graph is built, as
// it is searched, on int8 estimates of the cosine (a quarter of the
// memory to fetch per distance).
func (g *Graph) nodeQuery(n int32) query {
	at := int(n) * g.cfg.Dims
	end := at + g.cfg.Dims
	q := query{codes: g.codes[at:end:end], scale: g.scales[n]}
	if !g.cfg.CodesOnly {
		q.v, q.inv = g.vecs[n], g.inv[n]
	}
	return q
}

// greedy walks layer l from ep to the node nearest q.
func (g *Graph) greedy(q query, ep int32, epd float32, l int) (int32, float32) {
	for changed := true; changed; {
		changed = false
		for _, o := range g.neighbours(ep, l) {
			if d := g.dist(q, o); d < epd {
				ep, epd, changed = o, d, true
			}
		}
	}
	return ep, epd
}

// searchLayer is the paper's algorithm 2: the ef nodes of layer l nearest
// q found from the entry points, sorted nearest first. When returnable is
// set, only the nodes it accepts fill the list; the others are walked
// through (hnswlib's way with deleted nodes). The list is written over
// dst's array.
func (g *Graph) searchLayer(q query, eps []cand, ef, l int, vis *visited, returnable func(int32) bool, dst []cand) []cand {
	vis.reset(len(g.ids))
	cands, res := minHeap(vis.cands[:0]), maxHeap(vis.res[:0])
	for _, e := range eps {
		vis.mark(e.node)
		cands.push(e)
		if returnable == nil || returnable(e.node) {
			res.push(e)
		}
	}
	for len(cands) > 0 {
		c := cands.pop()
		if len(res) >= ef && c.d > res[0].d {
			break
		}
		// The neighbours not seen yet, fetched from memory all at once:
		// one at a time, the walk waits for memory at each (issue 32).
		next := vis.next[:0]
		for _, o := range g.neighbours(c.node, l) {
			if !vis.seen(o) {
				vis.mark(o)
				next = append(next, o)
			}
		}
		vis.next = next
		if q.codes != nil && len(next) > 0 && len(g.codes) > 0 {
			// A code not aligned to a cache line spans one line more.
			lines := (g.cfg.Dims + 63) / 64
			if g.cfg.Dims%64 != 0 {
				lines++
			}
			prefetch(unsafe.Pointer(&g.codes[0]), uintptr(g.cfg.Dims), lines, next)
			prefetch(unsafe.Pointer(&g.scales[0]), 4, 1, next)
		}
		var dots []int32 // the codes' dot products with q, all at once
		if q.codes != nil {
			if cap(vis.dots) < len(next) {
				// Level 0 holds at most 2M links; max keeps make safe if that changes.
				vis.dots = make([]int32, len(next), max(len(next), 2*g.cfg.M))
			}
			dots = vis.dots[:len(next)]
			dotsInt8(q.codes, g.codes, g.cfg.Dims, next, dots)
		}
		queued := next[:0] // the candidates queued, over next's array
		for i, o := range next {
			var d float32
			if dots != nil {
				d = g.codeDist(q, dots[i], o)
			} else {
				d = g.dist(q, o)
			}
			if len(res) < ef || d < res[0].d {
				cands.push(cand{d, o})
				queued = append(queued, o)
				if returnable == nil || returnable(o) {
					if len(res) < ef {
						res.push(cand{d, o})
					} else {
						res.replaceTop(cand{d, o})
					}
				}
			}
		}
		if l == 0 && len(queued) > 0 {
			// A queued candidate's links are read when it is expanded: they
			// are fetched now, while the walk goes on (their count and
			// links, unless the row straddles a fourth line).
			row := 4 * (2*g.cfg.M + 1)
			prefetch(unsafe.Pointer(&g.links0[0]), uintptr(row), (row+63)/64, queued)
		}
	}
	vis.cands, vis.res = cands[:0], res[:0] // grown buffers, for the next walk
	out := append(dst[:0], res...)
	sortCands(out)
	return out
}

type query struct {
	v   []float32
	inv float32
	// codes, when set, make dist the int8 estimate (every walk, and the
	// build's neighbour selection).
	codes []int8
	scale float32
}

// dist is the cosine distance of q and node n.
func (g *Graph) dist(q query, n int32) float32 {
	if q.codes != nil {
		at := int(n) * g.cfg.Dims
		return g.codeDist(q, dotInt8(q.codes, g.codes[at:at+g.cfg.Dims]), n)
	}
	return 1 - dot(q.v, g.vecs[n])*q.inv*g.inv[n]
}

// codeDist is the int8 estimate of the cosine distance of q and node n
// from their codes' dot product.
func (g *Graph) codeDist(q query, dot int32, n int32) float32 {
	return 1 - float32(dot)*q.scale*g.scales[n]
}

// quantize appends to dst the int8 code of v/|v| (inv = 1/|v|) in dims
// places, scaled so its largest component is ±127, and returns the scale
// back (unit vector ≈ scale × code). A zero vector's code is zero.
func quantize(dst []int8, v []float32, inv float32, dims int) ([]int8, float32) {
	var top float32
	for _, x := range v[:min(len(v), dims)] {
		top = max(top, x*inv, -x*inv)
	}
	if top == 0 {
		return append(dst, make([]int8, dims)...), 0
	}
	k := 127 / top
	for i := range dims {
		var c int8
		if i < len(v) {
			c = int8(math.Round(float64(v[i] * inv * k)))
		}
		dst = append(dst, c)
	}
	return dst, top / 127
}

// dotInt8Go is the dot product of two codes of one length, in Go.
func dotInt8Go(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// dotsInt8Go is dotsInt8 by node, in Go (dotInt8's kernels).
func dotsInt8Go(q, codes []int8, dims int, nodes []int32, out []int32) {
	out = out[:len(nodes)]
	for i, o := range nodes {
		at := int(o) * dims
		out[i] = dotInt8(q, codes[at:at+dims])
	}
}

func dot(a, b []float32) float32 { return vecmath.Dot(a, b) }

func finite(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

func invNorm(v []float32) float32 { return invOf(dot(v, v)) }

// invOf is 1/sqrt(nn), 0 for a zero vector; nn is a vector's dot with
// itself.
func invOf(nn float32) float32 {
	if nn == 0 {
		return 0
	}
	return float32(1 / math.Sqrt(float64(nn)))
}

func (g *Graph) visited() *visited {
	if v, ok := g.visits.Get().(*visited); ok {
		return v
	}
	return &visited{}
}

// visited marks nodes seen by one walk, a bit per node: at 100k nodes
// 12.5 KB, which stays in cache where a word per node would not.
type visited struct {
	bits []uint64
	// next is searchLayer's buffer of neighbours to score, dots their
	// codes' dot products with the query; cands and res its heaps'.
	next       []int32
	dots       []int32
	cands, res []cand
}

func (v *visited) reset(n int) {
	words := (n + 63) / 64
	if len(v.bits) < words {
		v.bits = make([]uint64, words+words/4)
		return
	}
	clear(v.bits[:words])
}

func (v *visited) mark(n int32)      { v.bits[n>>6] |= 1 << (n & 63) }
func (v *visited) seen(n int32) bool { return v.bits[n>>6]&(1<<(n&63)) != 0 }
