package hnsw

import (
	"cmp"
	"context"
	"slices"
)

// Batch collects the vectors of a graph built at once, held as the graph
// will hold them: each is encoded as it arrives, and with CodesOnly its
// float32 vector dropped, so collecting a million 256-d vectors takes
// about 270 MB, not a gigabyte. Build then hands these arrays to the
// graph: a graph built from a batch costs no second copy.
type Batch struct {
	cfg    Config
	ids    []int64
	vecs   [][]float32 // nil with CodesOnly
	codes  []int8
	scales []float32
}

// NewBatch returns an empty batch for a graph of cfg, with room for n
// and an eighth more: the graph built keeps the spare room, so the nodes
// added after it do not copy its arrays at once.
func NewBatch(cfg Config, n int) *Batch {
	c := n + n/8
	b := &Batch{cfg: cfg, ids: make([]int64, 0, c), codes: make([]int8, 0, c*cfg.Dims), scales: make([]float32, 0, c)}
	if !cfg.CodesOnly {
		b.vecs = make([][]float32, 0, c)
	}
	return b
}

// Add collects v under id (kept, not copied, unless CodesOnly).
func (b *Batch) Add(id int64, v []float32) {
	b.ids = append(b.ids, id)
	if !b.cfg.CodesOnly {
		b.vecs = append(b.vecs, v)
	}
	var scale float32
	b.codes, scale = quantize(b.codes, v, invNorm(v), b.cfg.Dims)
	b.scales = append(b.scales, scale)
}

// Build links every vector collected into a new graph, in id order, so
// the same vectors always make the same graph whatever order they came
// in. The batch is empty afterwards: the graph took its arrays. It stops,
// returning ctx's error, when ctx ends.
func (b *Batch) Build(ctx context.Context) (*Graph, error) {
	b.sortByID()
	n := len(b.ids)
	g := New(b.cfg)
	g.ids, g.vecs, g.codes, g.scales = b.ids, b.vecs, b.codes, b.scales
	c := cap(g.ids) // with NewBatch's spare room
	if !b.cfg.CodesOnly {
		g.inv = make([]float32, n, c)
		for i, v := range g.vecs {
			g.inv[i] = invNorm(v)
		}
	}
	g.deleted = make([]bool, n, c)
	stride := 2*g.cfg.M + 1 // g.cfg: New raises M to 2
	g.links0 = make([]int32, n*stride, c*stride)
	g.byID = make(map[int64]int32, n)
	*b = Batch{cfg: b.cfg}
	for k := range n {
		if k%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		g.mu.Lock()
		if o, ok := g.byID[g.ids[k]]; ok && !g.deleted[o] {
			// An id collected twice: the first stands.
			g.deleted[k] = true
			g.ndel++
		} else {
			g.linkNode(int32(k), g.drawLevel())
		}
		g.mu.Unlock()
	}
	return g, nil
}

// sortByID puts the collected vectors in id order, in place: at a
// million, a second copy of the codes would be another 256 MB.
func (b *Batch) sortByID() {
	n := len(b.ids)
	order := make([]int32, n) // position k takes what is at order[k]
	for i := range order {
		order[i] = int32(i)
	}
	// Stable: an id collected twice keeps its first vector on every replica.
	slices.SortStableFunc(order, func(x, y int32) int { return cmp.Compare(b.ids[x], b.ids[y]) })
	d := b.cfg.Dims
	code := func(i int) []int8 { return b.codes[i*d : (i+1)*d] }
	tmp := make([]int8, d)
	done := make([]bool, n)
	for start := range n {
		if done[start] {
			continue
		}
		// Follow the cycle through start, saving start's entry first.
		id, scale := b.ids[start], b.scales[start]
		var vec []float32
		if b.vecs != nil {
			vec = b.vecs[start]
		}
		copy(tmp, code(start))
		k := start
		for {
			done[k] = true
			src := int(order[k])
			if src == start {
				b.ids[k], b.scales[k] = id, scale
				if b.vecs != nil {
					b.vecs[k] = vec
				}
				copy(code(k), tmp)
				break
			}
			b.ids[k], b.scales[k] = b.ids[src], b.scales[src]
			if b.vecs != nil {
				b.vecs[k] = b.vecs[src]
			}
			copy(code(k), code(src))
			k = src
		}
	}
}
