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
//   - neighbours: consecutive chunks with the same header.
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
	// LexicalLogit adds LexicalLogit x (BM25 of the pair, divided by the
	// row's or column's best) to every in-batch logit, so the loss only
	// pushes on what term matching gets wrong: the encoder learns the
	// residual of BM25, which it is fused with. 0: off.
	LexicalLogit float64
	// Crop adds per chunk a pair of two independent random spans of its
	// terms, each 10-50 % of them (Contriever's cropping).
	Crop bool
	// Dropout drops each term of a pair's first text with this
	// probability (a shorter, query-like text).
	Dropout float64
	// HardNegatives > 0 adds to every pair a negative drawn from the
	// HardNegatives best BM25 matches of its first text among the other
	// training chunks (residual negatives, as in CLEAR, Gao et al. 2021):
	// the encoder is trained where term matching is wrong. 0: off.
	HardNegatives int
	// HardSkip skips the best HardSkip BM25 matches when drawing (they
	// are the likeliest unlabelled positives).
	HardSkip int
	// Asymmetric trains a second projection for the first text of every
	// pair (titles, sentences: query-like texts), used to embed queries
	// (Builtin.EmbedQuery); chunks keep the first one.
	Asymmetric bool
	// Soup trains Soup models from the same start with different seeds
	// and averages their projections (1 or 0: one model).
	Soup int
	// Progress, when set, is called after every epoch with the mean batch
	// loss (for logs and experiments).
	Progress func(epoch int, meanLoss float64)
}

// DefaultContrastiveConfig holds the values chosen by measurement on
// SciFact (see the eval package notes).
func DefaultContrastiveConfig() ContrastiveConfig {
	return ContrastiveConfig{Epochs: 6, BatchSize: 256, LearningRate: 0.05, Temperature: 0.3,
		Cloze: true, Title: true, Neighbours: true, ClozeKeep: 0.1, MaxPairs: 12_000, Seed: 1}
}

// pairText is one side of a training pair: its in-vocabulary term
// indexes (with repeats, so tf is kept).
type pairText []int32

type trainPair struct {
	a, b   pairText
	source int32 // chunk the pair came from: same-source texts are not negatives
	// neg is a mined negative (HardNegatives), from chunk negSource; nil
	// when none.
	neg       pairText
	negSource int32
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
// is when cfg.Epochs is 0 or the texts yield fewer than 2 pairs. The
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
	parts := make([]chunkParts, len(texts))
	parallelRange(len(texts), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			parts[i] = m.splitChunk(texts[i])
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fine-tune builtin: %w", err)
	}
	if cfg.Soup > 1 {
		return soup(ctx, m, texts, cfg)
	}
	out := *m
	out.proj = slices.Clone(m.proj)
	if cfg.Asymmetric {
		out.projQ = slices.Clone(m.proj)
	}
	t := newTrainer(&out, cfg)
	if cfg.LexicalLogit != 0 || cfg.HardNegatives > 0 {
		t.lex = newLexicalScorer(parts, len(m.terms))
	}
	rng := newGaussian(cfg.Seed*0x9e3779b97f4a7c15 + 7)
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		pairs := structurePairs(parts, cfg, rng)
		if len(pairs) < 2 {
			// Texts without titles or sentences teach nothing: plain LSA.
			return m, nil
		}
		shuffle(pairs, rng)
		if cfg.MaxPairs > 0 && len(pairs) > cfg.MaxPairs {
			pairs = pairs[:cfg.MaxPairs]
		}
		if cfg.ClusterBatches {
			pairs = t.clusterOrder(pairs, rng)
		}
		if cfg.HardNegatives > 0 {
			t.lex.mine(pairs, parts, cfg.HardSkip, cfg.HardNegatives, rng)
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
	for _, s := range splitSentences(body) {
		if idx := m.termIndexes(s); len(idx) > 0 {
			p.sentences = append(p.sentences, idx)
		}
	}
	return p
}

func (m *Builtin) termIndexes(text string) []int32 {
	var out []int32
	for _, t := range m.analyzer.Terms(text) {
		if i, ok := m.termIdx[t]; ok {
			out = append(out, i)
		}
	}
	return out
}

// splitSentences cuts at '.', '?' or '!' followed by white space and an
// upper-case letter or digit: crude, but abbreviations inside a sentence
// ("e.g. the") mostly survive, and a wrong cut only makes a shorter pair.
func splitSentences(s string) []string {
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
		if cfg.Crop && len(body) >= 2*minPairTerms {
			span := func() pairText {
				n := len(body)
				l := max(minPairTerms, int(float64(n)*(0.1+0.4*rng.uniform())))
				st := int(rng.u64() % uint64(n-l+1))
				return append(pairText(nil), body[st:st+l]...)
			}
			pairs = append(pairs, trainPair{a: span(), b: span(), source: int32(i)})
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
	if cfg.Dropout > 0 {
		for k := range pairs {
			var kept pairText
			for _, t := range pairs[k].a {
				if rng.uniform() >= cfg.Dropout {
					kept = append(kept, t)
				}
			}
			if len(kept) >= 2 {
				pairs[k].a = kept
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
	lex     *lexicalScorer
	// q holds the query projection's Adam state (Asymmetric).
	q *adamState
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
	rms := math.Sqrt(ss / float64(max(n, 1)))
	var init []float32
	if cfg.Anchor != 0 {
		init = slices.Clone(m.proj)
	}
	var q *adamState
	if m.projQ != nil {
		q = &adamState{proj: m.projQ, mom: make([]float32, n), vel: make([]float32, n), grad: make([]float32, n),
			touched: make([]bool, len(m.terms))}
	}
	return &trainer{
		q: q,
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

// adamState is a second trained projection (the query tower).
type adamState struct {
	proj, mom, vel, grad []float32
	touched              []bool
	rows                 []int32
}

func (t *trainer) encode(idx pairText) encoded { return t.encodeWith(t.m.proj, idx) }

// encodeQ encodes a pair's first text: with the query projection when
// there is one.
func (t *trainer) encodeQ(idx pairText) encoded {
	if t.q != nil {
		return t.encodeWith(t.q.proj, idx)
	}
	return t.encode(idx)
}

func (t *trainer) encodeWith(proj []float32, idx pairText) encoded {
	w := t.m.weightsOf(slices.Clone(idx))
	e := make([]float32, t.dims)
	for _, x := range w {
		blas.Saxpy(t.dims, x.w, proj[int(x.idx)*t.dims:int(x.idx+1)*t.dims], 1, e, 1)
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
// Row i scores a_i against every b_j and every mined negative h_j;
// column i scores b_i against every a_k.
func (t *trainer) step(batch []trainPair) {
	b := len(batch)
	hasNeg := false
	for _, p := range batch {
		hasNeg = hasNeg || p.neg != nil
	}
	nc := b // candidates of a row: the b_j, then the h_j
	if hasNeg {
		nc = 2 * b
	}
	ea := make([]encoded, b)
	ec := make([]encoded, nc)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ea[i] = t.encodeQ(batch[i].a)
			ec[i] = t.encode(batch[i].b)
			if hasNeg && batch[i].neg != nil {
				ec[b+i] = t.encode(batch[i].neg)
			}
		}
	})
	masked := func(i, j int) bool {
		if j < b {
			return j != i && batch[j].source == batch[i].source
		}
		p := batch[j-b]
		return p.neg == nil || p.negSource == batch[i].source
	}
	// Similarities and the gradient of the loss w.r.t. them.
	s := make([]float64, b*nc)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := 0; j < nc; j++ {
				if masked(i, j) {
					s[i*nc+j] = math.Inf(-1)
					continue
				}
				s[i*nc+j] = float64(blas.Sdot(t.dims, ea[i].u, 1, ec[j].u, 1) * t.invTemp)
			}
		}
	})
	var rowLex, colLex []float64
	if t.lex != nil && t.cfg.LexicalLogit != 0 {
		rowLex, colLex = t.lex.batch(batch, nc, t.cfg.LexicalLogit)
	}
	lexAt := func(l []float64, k int) float64 {
		if l == nil {
			return 0
		}
		return l[k]
	}
	g := make([]float64, b*nc)
	loss := 0.0
	scale := 1 / (2 * float64(b))
	softmaxInto := func(n int, get func(k int) float64, put func(k int, v float64), target int) {
		mx := math.Inf(-1)
		for k := 0; k < n; k++ {
			mx = math.Max(mx, get(k))
		}
		z := 0.0
		for k := 0; k < n; k++ {
			z += math.Exp(get(k) - mx)
		}
		loss += (mx + math.Log(z) - get(target)) * scale
		for k := 0; k < n; k++ {
			p := math.Exp(get(k)-mx) / z
			if k == target {
				p--
			}
			put(k, p*scale)
		}
	}
	for i := 0; i < b; i++ {
		softmaxInto(nc, func(k int) float64 { return s[i*nc+k] + lexAt(rowLex, i*nc+k) }, func(k int, v float64) { g[i*nc+k] += v }, i)
		softmaxInto(b, func(k int) float64 { return s[k*nc+i] + lexAt(colLex, k*nc+i) }, func(k int, v float64) { g[k*nc+i] += v }, i)
	}
	t.lastLoss = loss
	// Gradients w.r.t. the unit vectors, then through the normalization:
	// de = (du - u (u . du)) / |e|.
	da := make([][]float32, b)
	dc := make([][]float32, nc)
	parallelRange(b, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ga := make([]float32, t.dims)
			for j := 0; j < nc; j++ {
				if w := float32(g[i*nc+j]) * t.invTemp; w != 0 {
					blas.Saxpy(t.dims, w, ec[j].u, 1, ga, 1)
				}
			}
			da[i] = throughNorm(ga, ea[i])
		}
	})
	parallelRange(nc, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			gc := make([]float32, t.dims)
			for i := 0; i < b; i++ {
				if w := float32(g[i*nc+j]) * t.invTemp; w != 0 {
					blas.Saxpy(t.dims, w, ea[i].u, 1, gc, 1)
				}
			}
			dc[j] = throughNorm(gc, ec[j])
		}
	})
	// Every encoded text with its gradient, in a fixed order.
	qs := make([]textGrad, 0, b)
	for i := 0; i < b; i++ {
		qs = append(qs, textGrad{ea[i], da[i]})
	}
	ds := make([]textGrad, 0, nc)
	for j := 0; j < nc; j++ {
		ds = append(ds, textGrad{ec[j], dc[j]})
	}
	t.steps++
	main := &adamState{proj: t.m.proj, mom: t.mom, vel: t.vel, grad: t.grad, touched: t.touched, rows: t.rows}
	if t.q == nil {
		t.update(main, append(qs, ds...), true)
	} else {
		t.update(main, ds, true)
		t.update(t.q, qs, false)
	}
	t.rows = main.rows
}

// textGrad is an encoded text and the loss gradient w.r.t. its sum.
type textGrad struct {
	e  encoded
	de []float32
}

// update accumulates the gradients of texts into st and takes one Adam
// step on the rows they touch.
func (t *trainer) update(st *adamState, all []textGrad, anchored bool) {
	st.rows = st.rows[:0]
	for _, x := range all {
		for _, w := range x.e.w {
			if !st.touched[w.idx] {
				st.touched[w.idx] = true
				st.rows = append(st.rows, w.idx)
			}
		}
	}
	slices.Sort(st.rows)
	bc1 := float32(1 - math.Pow(adamBeta1, float64(t.steps)))
	bc2 := float32(1 - math.Pow(adamBeta2, float64(t.steps)))
	b1, b2 := float32(adamBeta1), float32(adamBeta2)
	d := t.dims
	// Each worker owns a column range of every row: accumulation and the
	// update are race-free and summed in a fixed order (deterministic).
	parallelRange(d, func(clo, chi int) {
		for _, x := range all {
			for _, w := range x.e.w {
				off := int(w.idx) * d
				blas.Saxpy(chi-clo, w.w, x.de[clo:chi], 1, st.grad[off+clo:off+chi], 1)
			}
		}
		for _, r := range st.rows {
			off := int(r) * d
			for c := off + clo; c < off+chi; c++ {
				gr := st.grad[c]
				if anchored && t.anchor != 0 {
					gr += t.anchor * (st.proj[c] - t.init[c])
				}
				st.grad[c] = 0
				st.mom[c] = b1*st.mom[c] + (1-b1)*gr
				st.vel[c] = b2*st.vel[c] + (1-b2)*gr*gr
				mh := st.mom[c] / bc1
				vh := st.vel[c] / bc2
				st.proj[c] -= t.lr * mh / (float32(math.Sqrt(float64(vh))) + t.adamEps)
			}
		}
	})
	for _, r := range st.rows {
		st.touched[r] = false
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

// lexicalScorer scores training pairs with BM25 (k1 1.2, b 0.75) over the
// training chunks' statistics.
type lexicalScorer struct {
	idf    []float64
	avgLen float64
	// postings per term: chunks holding it and the term's tf there
	post   [][]posting
	length []int32
}

type posting struct {
	chunk int32
	tf    float32
}

func newLexicalScorer(parts []chunkParts, vocab int) *lexicalScorer {
	df := make([]int, vocab)
	seen := make([]int32, vocab)
	for i := range seen {
		seen[i] = -1
	}
	total := 0
	for i, p := range parts {
		mark := func(ts []int32) {
			for _, t := range ts {
				total++
				if seen[t] != int32(i) {
					seen[t] = int32(i)
					df[t]++
				}
			}
		}
		mark(p.header)
		for _, s := range p.sentences {
			mark(s)
		}
	}
	n := float64(len(parts))
	l := &lexicalScorer{idf: make([]float64, vocab), avgLen: float64(total) / math.Max(n, 1),
		post: make([][]posting, vocab), length: make([]int32, len(parts))}
	for t, f := range df {
		l.idf[t] = math.Log(1 + (n-float64(f)+0.5)/(float64(f)+0.5))
	}
	tf := map[int32]float32{}
	for i, p := range parts {
		clear(tf)
		for _, t := range p.header {
			tf[t]++
		}
		for _, s := range p.sentences {
			for _, t := range s {
				tf[t]++
			}
		}
		keys := make([]int32, 0, len(tf))
		for t, f := range tf {
			keys = append(keys, t)
			l.length[i] += int32(f)
		}
		slices.Sort(keys)
		for _, t := range keys {
			l.post[t] = append(l.post[t], posting{chunk: int32(i), tf: tf[t]})
		}
	}
	return l
}

// mine gives each pair a negative: a chunk other than its source drawn
// from ranks skip+1 .. skip+k of its first text's BM25 matches.
func (l *lexicalScorer) mine(pairs []trainPair, parts []chunkParts, skip, k int, rng *gaussian) {
	draws := make([]uint64, len(pairs))
	for i := range draws {
		draws[i] = rng.u64()
	}
	full := func(c int32) pairText {
		p := parts[c]
		out := append(pairText(nil), p.header...)
		for _, s := range p.sentences {
			out = append(out, s...)
		}
		return out
	}
	parallelRange(len(pairs), func(lo, hi int) {
		acc := make([]float32, len(l.length))
		var touched []int32
		type hit struct {
			c int32
			s float32
		}
		var top []hit
		for pi := lo; pi < hi; pi++ {
			pr := &pairs[pi]
			touched = touched[:0]
			for k2, t := range pr.a {
				if slices.Contains(pr.a[:k2], t) {
					continue
				}
				idf := float32(l.idf[t])
				for _, ps := range l.post[t] {
					if acc[ps.chunk] == 0 {
						touched = append(touched, ps.chunk)
					}
					norm := float32(1.2 * (0.25 + 0.75*float64(l.length[ps.chunk])/l.avgLen))
					acc[ps.chunk] += idf * ps.tf * 2.2 / (ps.tf + norm)
				}
			}
			top = top[:0]
			hk := parts[pr.source].headerKey
			for _, c := range touched {
				if c != pr.source && acc[c] > 0 && (hk == "" || parts[c].headerKey != hk) {
					top = append(top, hit{c, acc[c]})
				}
				acc[c] = 0
			}
			slices.SortFunc(top, func(x, y hit) int {
				if x.s != y.s {
					if x.s > y.s {
						return -1
					}
					return 1
				}
				return int(x.c - y.c)
			})
			if len(top) <= skip {
				pr.neg = nil
				continue
			}
			cands := top[skip:min(len(top), skip+k)]
			c := cands[int(draws[pi]%uint64(len(cands)))].c
			pr.neg, pr.negSource = full(c), c
		}
	})
}

// batch returns scale x BM25(a_i, candidate j) / max over the row, and
// / max over the column for the first b candidates (the b_j), row-major
// b x nc; the candidates are the b_j then the mined negatives.
func (l *lexicalScorer) batch(batch []trainPair, nc int, scale float64) (row, col []float64) {
	b := len(batch)
	cand := func(j int) pairText {
		if j < b {
			return batch[j].b
		}
		return batch[j-b].neg
	}
	raw := make([]float64, b*nc)
	parallelRange(nc, func(lo, hi int) {
		tf := map[int32]float64{}
		for j := lo; j < hi; j++ {
			c := cand(j)
			if c == nil {
				continue
			}
			clear(tf)
			for _, t := range c {
				tf[t]++
			}
			norm := 1.2 * (0.25 + 0.75*float64(len(c))/l.avgLen)
			for i := 0; i < b; i++ {
				q := batch[i].a
				var sc float64
				for k, t := range q {
					if slices.Contains(q[:k], t) {
						continue
					}
					if f := tf[t]; f > 0 {
						sc += l.idf[t] * f * 2.2 / (f + norm)
					}
				}
				raw[i*nc+j] = sc
			}
		}
	})
	row = make([]float64, b*nc)
	col = make([]float64, b*nc)
	for i := 0; i < b; i++ {
		mx := 0.0
		for j := 0; j < nc; j++ {
			mx = math.Max(mx, raw[i*nc+j])
		}
		if mx > 0 {
			for j := 0; j < nc; j++ {
				row[i*nc+j] = scale * raw[i*nc+j] / mx
			}
		}
	}
	for j := 0; j < b; j++ {
		mx := 0.0
		for i := 0; i < b; i++ {
			mx = math.Max(mx, raw[i*nc+j])
		}
		if mx > 0 {
			for i := 0; i < b; i++ {
				col[i*nc+j] = scale * raw[i*nc+j] / mx
			}
		}
	}
	return row, col
}

// soup trains cfg.Soup models from m with seeds Seed, Seed+1, ... and
// averages their projections (a "model soup": one start, so the averaged
// weights stay in the same basin).
func soup(ctx context.Context, m *Builtin, texts []string, cfg ContrastiveConfig) (*Builtin, error) {
	n := cfg.Soup
	cfg.Soup = 1
	var acc []float32
	var last *Builtin
	for k := 0; k < n; k++ {
		c := cfg
		c.Seed = cfg.Seed + uint64(k)
		r, err := FineTuneContrastive(ctx, m, texts, c)
		if err != nil {
			return nil, err
		}
		if acc == nil {
			acc = make([]float32, len(r.proj))
		}
		blas.Saxpy(len(acc), 1/float32(n), r.proj, 1, acc, 1)
		last = r
	}
	out := *last
	out.proj = acc
	out.id = out.computeID()
	return &out, nil
}
