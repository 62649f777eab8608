package hnsw

import (
	"cmp"
	"context"
	"slices"
)

// Batch collects the vectors of a graph built at once, held as the graph
// will hold them: with CodesOnly, each is encoded as it arrives and its
// float32 vector dropped, so collecting a million 256-d vectors takes
// about 260 MB, not a gigabyte.
type Batch struct {
	cfg    Config
	ids    []int64
	vecs   [][]float32
	codes  []int8
	scales []float32
}

// NewBatch returns an empty batch for a graph of cfg, with room for n.
func NewBatch(cfg Config, n int) *Batch {
	b := &Batch{cfg: cfg, ids: make([]int64, 0, n)}
	if cfg.CodesOnly {
		b.codes = make([]int8, 0, n*cfg.Dims)
		b.scales = make([]float32, 0, n)
	} else {
		b.vecs = make([][]float32, 0, n)
	}
	return b
}

// Len is the number of vectors collected.
func (b *Batch) Len() int { return len(b.ids) }

// Add collects v under id (kept, not copied, unless CodesOnly).
func (b *Batch) Add(id int64, v []float32) {
	b.ids = append(b.ids, id)
	if !b.cfg.CodesOnly {
		b.vecs = append(b.vecs, v)
		return
	}
	var scale float32
	b.codes, scale = quantize(b.codes, v, invNorm(v), b.cfg.Dims)
	b.scales = append(b.scales, scale)
}

// Build links every vector collected into a new graph, in id order, so
// the same vectors always make the same graph whatever order they came
// in. It stops, returning ctx's error, when ctx ends.
func (b *Batch) Build(ctx context.Context) (*Graph, error) {
	order := make([]int32, len(b.ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int { return cmp.Compare(b.ids[x], b.ids[y]) })
	g := New(b.cfg)
	g.Reserve(len(order))
	d := b.cfg.Dims
	for k, i := range order {
		if k%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		g.mu.Lock()
		if b.cfg.CodesOnly {
			g.add(b.ids[i], nil, b.codes[int(i)*d:int(i+1)*d], b.scales[i])
		} else {
			g.add(b.ids[i], b.vecs[i], nil, 0)
		}
		g.mu.Unlock()
	}
	return g, nil
}
