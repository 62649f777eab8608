package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/blas/gonum"
)

// blas gives the SIMD float32 kernels (axpy, dot) of the hot loops; each
// output is still summed by one goroutine in a fixed order.
var blas gonum.Implementation

// ContrastiveConfig configures fine-tuning of a trained builtin model's
// term projection with an InfoNCE loss on pairs taken from the structure
// of the training texts themselves (no labels, no pretrained weights):
//
//   - cloze: a sentence of a chunk <-> the rest of the chunk (inverse cloze
//     task, Lee et al. 2019);
//   - title: the context header (title / heading path) <-> the chunk body;
//   - neighbours: chunks with the same header next to each other in the
//     training texts (embed.Sample keeps a document's chunks in order:
//     consecutive chunks when the sample holds the whole corpus, chunks of
//     one section some positions apart under a cap).
//
// Each pair's other in-batch texts are its negatives. Epochs 0 turns
// fine-tuning off (plain LSA).
type ContrastiveConfig struct {
	Epochs    int
	BatchSize int
	// LearningRate is Adam's step relative to the RMS of the initial
	// projection entries, so it does not depend on the corpus's scale.
	LearningRate float64
	// Temperature divides cosine similarities before the softmax.
	Temperature float64
	// Cloze, Title and Neighbours select the pair kinds (per epoch: one
	// cloze pair and one title pair per chunk, one pair per neighbour).
	Cloze, Title, Neighbours bool
	// ClozeKeep is the probability that the cloze sentence is also left in
	// its context (so the encoder still rewards plain term overlap).
	ClozeKeep float64
	// MaxPairs caps the pairs of one epoch (a random subset), which bounds
	// training time whatever the sample size. 0: no cap.
	MaxPairs int
	// Anchor pulls the projection towards its initial (LSA) value:
	// gradient += Anchor * (P - P0) on the rows a batch touches.
	Anchor float64
	// Seed makes training deterministic.
	Seed uint64
	// ClusterBatches groups pairs whose contexts lie close in the current
	// space (k-means, one cluster per batch) into the same batches, so the
	// in-batch negatives are hard ones instead of random chunks.
	ClusterBatches bool
	// Subwords adds character n-gram rows before fine-tuning (N 0: none);
	// see SubwordConfig.
	Subwords SubwordConfig
	// Progress, when set, is called after every epoch with the mean batch
	// loss (for logs and experiments).
	Progress func(epoch int, meanLoss float64)
}

// DefaultContrastiveConfig holds the values chosen by measurement on
// SciFact (see the eval package notes).
func DefaultContrastiveConfig() ContrastiveConfig {
	return ContrastiveConfig{Epochs: 6, BatchSize: 256, LearningRate: 0.05, Temperature: 0.3,
		Cloze: true, Title: true, Neighbours: true, ClozeKeep: 0.1, MaxPairs: 12_000, Seed: 1,
		Subwords: SubwordConfig{N: 4, Max: 50_000, Scale: 2}}
}

// pairText is one side of a training pair: its in-vocabulary term
// indexes (with repeats, so tf is kept).
type pairText []int32

type trainPair struct {
	a, b   pairText
	source int32 // chunk the pair came from: same-source texts are not negatives
}

// chunkParts is a training text analyzed once: header terms, the terms of
// each body sentence.
type chunkParts struct {
	header    []int32
	sentences [][]int32
	headerKey string
}

// FineTuneContrastive returns a copy of m whose projection was trained
// with InfoNCE on structure pairs of texts (each "header\nbody", as
// analysis.IndexedText builds them). m is not changed; it is returned as
// is when cfg.Epochs is 0 or the texts yield fewer than 2 pairs. With
// cfg.Subwords the result also has n-gram rows (subword.go). The
// result is a pure function of (m, texts, cfg).
func FineTuneContrastive(ctx context.Context, m *Builtin, texts []string, cfg ContrastiveConfig) (*Builtin, error) {
	if m == nil {
		return nil, errors.New("fine-tune builtin: nil model")
	}
	if cfg.Epochs <= 0 {
		return m, nil
	}
	if cfg.BatchSize < 2 || cfg.Temperature <= 0 || cfg.LearningRate <= 0 {
		return nil, fmt.Errorf("fine-tune builtin: batch size %d, temperature %g, learning rate %g: all must be positive (batch >= 2)",
			cfg.BatchSize, cfg.Temperature, cfg.LearningRate)
	}
	plain := m
	if cfg.Subwords.N > 0 {
		var err error
		if m, err = m.withSubwords(ctx, texts, cfg.Subwords); err != nil {
			return nil, err
		}
	}
	parts := make([]chunkParts, len(texts))
	parallelRange(len(texts), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			parts[i] = m.splitChunk(texts[i])
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fine-tune builtin: %w", err)
	}
	out := *m
	out.proj = slices.Clone(m.proj)
	t := newTrainer(&out, cfg)
	rng := newGaussian(cfg.Seed*0x9e3779b97f4a7c15 + 7)
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		pairs := structurePairs(parts, cfg, rng)
		if len(pairs) < 2 {
			// Texts without titles or sentences teach nothing: plain LSA.
			return plain, nil
		}
		shuffle(pairs, rng)
		if cfg.MaxPairs > 0 && len(pairs) > cfg.MaxPairs {
			pairs = pairs[:cfg.MaxPairs]
		}
		if cfg.ClusterBatches {
			pairs = t.clusterOrder(pairs, rng)
		}
		sum, batches := 0.0, 0
		for lo := 0; lo+1 < len(pairs); lo += cfg.BatchSize {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("fine-tune builtin: %w", err)
			}
			t.step(pairs[lo:min(lo+cfg.BatchSize, len(pairs))])
			sum += t.lastLoss
			batches++
		}
		if cfg.Progress != nil {
			cfg.Progress(epoch, sum/float64(max(batches, 1)))
		}
	}
	out.tunedEpochs = cfg.Epochs
	out.id = out.computeID()
	return &out, nil
}

// splitChunk separates the header line from the body and the body into
// sentences, keeping in-vocabulary term indexes only. A chunk stored
// without a header starts with its own first line, which then plays the
// title: still a line of the text against the rest of it.
func (m *Builtin) splitChunk(text string) chunkParts {
	var p chunkParts
	header, body, ok := strings.Cut(text, "\n")
	if !ok {
		header, body = "", text
	}
	p.header = m.termIndexes(header)
	p.headerKey = header
	for _, s := range SplitSentences(body) {
		if idx := m.termIndexes(s); len(idx) > 0 {
			p.sentences = append(p.sentences, idx)
		}
	}
	return p
}

func (m *Builtin) termIndexes(text string) []int32 {
	return m.appendIndexes(nil, m.analyzer.Terms(text))
}

// SplitSentences cuts at '.', '?' or '!' followed by white space and an
// upper-case letter or digit: crude, but abbreviations inside a sentence
// ("e.g. the") mostly survive, and a wrong cut only makes a shorter pair.
func SplitSentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i+2 < len(s); i++ {
		c := s[i]
		if c != '.' && c != '?' && c != '!' {
			continue
		}
		if s[i+1] != ' ' && s[i+1] != '\n' {
			continue
		}
		n := s[i+2]
		if (n >= 'A' && n <= 'Z') || (n >= '0' && n <= '9') {
			out = append(out, s[start:i+1])
			start = i + 2
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

const minPairTerms = 3

// structurePairs draws one epoch's pairs.
func structurePairs(parts []chunkParts, cfg ContrastiveConfig, rng *gaussian) []trainPair {
	var pairs []trainPair
	for i, p := range parts {
		var body []int32
		for _, s := range p.sentences {
			body = append(body, s...)
		}
		if cfg.Title && len(p.header) >= 2 && len(body) >= minPairTerms {
			pairs = append(pairs, trainPair{a: p.header, b: body, source: int32(i)})
		}
		if cfg.Cloze && len(p.sentences) >= 2 {
			k := int(rng.u64() % uint64(len(p.sentences)))
			keep := rng.uniform() < cfg.ClozeKeep
			ctxt := append([]int32(nil), p.header...)
			for j, s := range p.sentences {
				if j != k || keep {
					ctxt = append(ctxt, s...)
				}
			}
			if len(p.sentences[k]) >= minPairTerms && len(ctxt) >= minPairTerms {
				pairs = append(pairs, trainPair{a: p.sentences[k], b: ctxt, source: int32(i)})
			}
		}
		if cfg.Neighbours && i+1 < len(parts) && p.headerKey != "" && parts[i+1].headerKey == p.headerKey {
			var next []int32
			for _, s := range parts[i+1].sentences {
				next = append(next, s...)
			}
			if len(body) >= minPairTerms && len(next) >= minPairTerms {
				// Both chunks share a source so neither is the other's negative.
				pairs = append(pairs, trainPair{a: body, b: next, source: int32(i)})
			}
		}
	}
	return pairs
}

// trainer holds Adam's state for the projection; updates are lazy (only
// the rows a batch touches move).
type trainer struct {
	m       *Builtin
	cfg     ContrastiveConfig
	lr      float32   // Adam step in projection units
	init    []float32 // P0, for Anchor
	mom     []float32 // Adam's first moment
	vel     []float32 // Adam's second moment
	grad    []float32 // gradient of the current batch (touched rows only)
	touched []bool    // per term: in the current batch
	rows    []int32   // the touched rows, sorted
	steps   int
	adamEps float32
	invTemp float32
	dims    int
	anchor  float32
	// lastLoss is the last batch's mean loss (Progress).
	lastLoss float64
}

const adamBeta1, adamBeta2 = 0.9, 0.999

func newTrainer(m *Builtin, cfg ContrastiveConfig) *trainer {
	n := len(m.proj)
	var ss float64
	for _, x := range m.proj {
		ss += float64(x) * float64(x)
	}
	// The sub-word rows start at zero: the step's scale is the word rows'.
	rms := math.Sqrt(ss / float64(max(m.words*m.dims, 1)))
	var init []float32
	if cfg.Anchor != 0 {
		init = slices.Clone(m.proj)
	}
	return &trainer{
		m: m, cfg: cfg, lr: float32(cfg.LearningRate * rms), init: init,
		mom: make([]float32, n), vel: make([]float32, n), grad: make([]float32, n),
		touched: make([]bool, len(m.terms)), adamEps: float32(1e-8 * rms),
		invTemp: float32(1 / cfg.Temperature), dims: m.dims, anchor: float32(cfg.Anchor),
	}
}

// encoded is a text's forward pass: its weighted terms, unnormalized sum
// e and unit vector u.
type encoded struct {
	w    []weighted
	norm float32
	u    []float32
}

func (t *trainer) encode(idx pairText) encoded {
	w := t.m.weightsOf(slices.Clone(idx))
	e := make([]float32, t.dims)
	for _, x := range w {
		blas.Saxpy(t.dims, x.w, t.m.proj[int(x.idx)*t.dims:int(x.idx+1)*t.dims], 1, e, 1)
	}
	var s float64
	for _, v := range e {
		s += float64(v) * float64(v)
	}
	n := float32(math.Sqrt(s))
	if n > 0 {
		for c := range e {
			e[c] /= n
		}
	}
	return encoded{w: w, norm: n, u: e}
}

// step runs one batch: forward, symmetric InfoNCE gradient, Adam update.
func (t *trainer) step(batch []trainPair) {
	b := len(batch)
	ea := make([]encoded, b)
	eb := make([]encoded, b)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ea[i] = t.encode(batch[i].a)
			eb[i] = t.encode(batch[i].b)
		}
	})
	// Similarities and the gradient of the loss w.r.t. them.
	s := make([]float64, b*b)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := 0; j < b; j++ {
				if j != i && batch[j].source == batch[i].source {
					s[i*b+j] = math.Inf(-1)
					continue
				}
				s[i*b+j] = float64(blas.Sdot(t.dims, ea[i].u, 1, eb[j].u, 1) * t.invTemp)
			}
		}
	})
	g := make([]float64, b*b)
	loss := 0.0
	scale := 1 / (2 * float64(b))
	softmaxInto := func(get func(k int) float64, put func(k int, v float64), target int) {
		mx := math.Inf(-1)
		for k := 0; k < b; k++ {
			mx = math.Max(mx, get(k))
		}
		z := 0.0
		for k := 0; k < b; k++ {
			z += math.Exp(get(k) - mx)
		}
		loss += (mx + math.Log(z) - get(target)) * scale
		for k := 0; k < b; k++ {
			p := math.Exp(get(k)-mx) / z
			if k == target {
				p--
			}
			put(k, p*scale)
		}
	}
	for i := 0; i < b; i++ {
		softmaxInto(func(k int) float64 { return s[i*b+k] }, func(k int, v float64) { g[i*b+k] += v }, i)
		softmaxInto(func(k int) float64 { return s[k*b+i] }, func(k int, v float64) { g[k*b+i] += v }, i)
	}
	t.lastLoss = loss
	// Gradients w.r.t. the unit vectors, then through the normalization:
	// de = (du - u (u . du)) / |e|.
	da := make([][]float32, b)
	db := make([][]float32, b)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ga := make([]float32, t.dims)
			gb := make([]float32, t.dims)
			for j := 0; j < b; j++ {
				if w := float32(g[i*b+j]) * t.invTemp; w != 0 {
					blas.Saxpy(t.dims, w, eb[j].u, 1, ga, 1)
				}
				if w := float32(g[j*b+i]) * t.invTemp; w != 0 {
					blas.Saxpy(t.dims, w, ea[j].u, 1, gb, 1)
				}
			}
			da[i] = throughNorm(ga, ea[i])
			db[i] = throughNorm(gb, eb[i])
		}
	})
	// Touched rows, in a fixed order.
	t.rows = t.rows[:0]
	for i := 0; i < b; i++ {
		for _, e := range [2]encoded{ea[i], eb[i]} {
			for _, x := range e.w {
				if !t.touched[x.idx] {
					t.touched[x.idx] = true
					t.rows = append(t.rows, x.idx)
				}
			}
		}
	}
	slices.Sort(t.rows)
	t.steps++
	bc1 := float32(1 - math.Pow(adamBeta1, float64(t.steps)))
	bc2 := float32(1 - math.Pow(adamBeta2, float64(t.steps)))
	b1, b2 := float32(adamBeta1), float32(adamBeta2)
	d := t.dims
	// Each worker owns a column range of every row: accumulation and the
	// update are race-free and summed in a fixed order (deterministic).
	parallelRange(d, func(clo, chi int) {
		for i := 0; i < b; i++ {
			for side, e := range [2]encoded{ea[i], eb[i]} {
				de := da[i]
				if side == 1 {
					de = db[i]
				}
				for _, x := range e.w {
					off := int(x.idx) * d
					blas.Saxpy(chi-clo, x.w, de[clo:chi], 1, t.grad[off+clo:off+chi], 1)
				}
			}
		}
		for _, r := range t.rows {
			off := int(r) * d
			for c := off + clo; c < off+chi; c++ {
				gr := t.grad[c]
				if t.anchor != 0 {
					gr += t.anchor * (t.m.proj[c] - t.init[c])
				}
				t.grad[c] = 0
				t.mom[c] = b1*t.mom[c] + (1-b1)*gr
				t.vel[c] = b2*t.vel[c] + (1-b2)*gr*gr
				mh := t.mom[c] / bc1
				vh := t.vel[c] / bc2
				t.m.proj[c] -= t.lr * mh / (float32(math.Sqrt(float64(vh))) + t.adamEps)
			}
		}
	})
	for _, r := range t.rows {
		t.touched[r] = false
	}
}

func throughNorm(du []float32, e encoded) []float32 {
	if e.norm == 0 {
		return make([]float32, len(du))
	}
	dot := Dot(du, e.u)
	out := make([]float32, len(du))
	for c := range du {
		out[c] = (du[c] - e.u[c]*dot) / e.norm
	}
	return out
}

// shuffle is Fisher-Yates with the deterministic generator.
func shuffle[T any](s []T, rng *gaussian) {
	for i := len(s) - 1; i > 0; i-- {
		j := int(rng.u64() % uint64(i+1))
		s[i], s[j] = s[j], s[i]
	}
}

// clusterOrder reorders pairs so that each run of BatchSize pairs comes
// mostly from one k-means cluster of their context vectors.
func (t *trainer) clusterOrder(pairs []trainPair, rng *gaussian) []trainPair {
	n := len(pairs)
	k := (n + t.cfg.BatchSize - 1) / t.cfg.BatchSize
	if k < 2 {
		return pairs
	}
	vecs := make([][]float32, n)
	parallelRange(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			vecs[i] = t.encode(pairs[i].b).u
		}
	})
	cent := make([][]float32, k)
	for c := range cent {
		cent[c] = slices.Clone(vecs[int(rng.u64()%uint64(n))])
	}
	assign := make([]int, n)
	for it := 0; it < 5; it++ {
		parallelRange(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				best, bestS := 0, float32(math.Inf(-1))
				for c, v := range cent {
					if s := Dot(vecs[i], v); s > bestS {
						best, bestS = c, s
					}
				}
				assign[i] = best
			}
		})
		for c := range cent {
			clear(cent[c])
		}
		for i, c := range assign {
			for d, x := range vecs[i] {
				cent[c][d] += x
			}
		}
		for c := range cent {
			Normalize(cent[c])
		}
	}
	order := make([]int, k)
	for c := range order {
		order[c] = c
	}
	shuffle(order, rng)
	rank := make([]int, k)
	for r, c := range order {
		rank[c] = r
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	// Stable by cluster rank keeps the shuffled order within a cluster.
	slices.SortStableFunc(idx, func(a, b int) int { return rank[assign[a]] - rank[assign[b]] })
	out := make([]trainPair, n)
	for i, j := range idx {
		out[i] = pairs[j]
	}
	return out
}
