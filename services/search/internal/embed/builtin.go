package embed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/bmcis/knowledge/services/search/internal/analysis"
)

// BuiltinConfig configures training of the builtin (LSA) embedder. Zero
// fields take the defaults of DefaultBuiltinConfig.
type BuiltinConfig struct {
	// Dims is the vector dimension (number of SVD components kept).
	Dims int
	// MinDF drops terms in fewer documents: they cannot relate documents.
	MinDF int
	// MaxDFRatio drops terms in more than this fraction of documents.
	MaxDFRatio float64
	// MaxVocab keeps at most this many terms (highest df first).
	MaxVocab int
	// MaxTrainDocs caps the texts trained on; all texts still get vectors.
	// The service picks them with Sample; given more, TrainBuiltin takes a
	// deterministic stride sample of what it was given.
	MaxTrainDocs int
	// Oversample and PowerIters are the randomized-SVD accuracy knobs.
	Oversample int
	PowerIters int
	// SigmaExp rescales component i by sigma_i^SigmaExp. A chunk's
	// projection x*V_k equals its row of U_k*Sigma_k, so 0 is classic LSA,
	// -1 whitens to U_k (every component equal weight) and -0.5 is between.
	// Unlike the other fields, 0 is a meaningful value, not "default".
	SigmaExp float64
	// Weighting is the term weighting of the training matrix and of every
	// embedded text: WeightTFIDF ((1+ln tf)*idf) or WeightLogEntropy
	// (ln(1+tf) * entropy weight, the classic LSA choice).
	Weighting Weighting
	// Seed makes training deterministic.
	Seed uint64
	// Contrastive fine-tunes the LSA projection on structure pairs of the
	// training sample (FineTuneContrastive). Epochs 0: plain LSA.
	Contrastive ContrastiveConfig
}

// Weighting selects the term weighting scheme.
type Weighting uint8

const (
	// WeightTFIDF is sublinear tf times smoothed idf.
	WeightTFIDF Weighting = iota
	// WeightLogEntropy is ln(1+tf) times 1 + sum_d p log p / log N, which
	// gives terms spread evenly over documents weight near 0.
	WeightLogEntropy
)

// DefaultBuiltinConfig holds the values chosen by measurement on SciFact
// (see the eval package notes).
func DefaultBuiltinConfig() BuiltinConfig {
	return BuiltinConfig{
		Dims:         256,
		MinDF:        2,
		MaxDFRatio:   0.5,
		MaxVocab:     100_000,
		MaxTrainDocs: 50_000,
		Oversample:   20,
		PowerIters:   3,
		SigmaExp:     -0.5,
		Weighting:    WeightLogEntropy,
		Seed:         1,
		Contrastive:  DefaultContrastiveConfig(),
	}
}

func (c BuiltinConfig) withDefaults() BuiltinConfig {
	d := DefaultBuiltinConfig()
	if c.Dims <= 0 {
		c.Dims = d.Dims
	}
	if c.MinDF <= 0 {
		c.MinDF = d.MinDF
	}
	if c.MaxDFRatio <= 0 || c.MaxDFRatio > 1 {
		c.MaxDFRatio = d.MaxDFRatio
	}
	if c.MaxVocab <= 0 {
		c.MaxVocab = d.MaxVocab
	}
	if c.MaxTrainDocs <= 0 {
		c.MaxTrainDocs = d.MaxTrainDocs
	}
	if c.Oversample <= 0 {
		c.Oversample = d.Oversample
	}
	if c.PowerIters < 0 {
		c.PowerIters = d.PowerIters
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	return c
}

// builtinVersion changes whenever training or embedding math changes, so
// vectors from an older implementation are never compared with new ones.
const builtinVersion = 1

// Builtin is a trained LSA embedder. A text's vector is
//
//	normalize( sum_t local(tf_t) * global_t * P[t] )
//
// (TF-IDF: local = 1 + ln tf, global = idf; log-entropy: ln(1+tf), entropy)
// over its analyzed terms t in the vocabulary, where P = V_k Sigma_k^(a-1)
// comes from the truncated SVD of the training TF-IDF matrix (a =
// BuiltinConfig.SigmaExp + 1). Embedding a
// query is a few hundred multiply-adds per term: microseconds.
// Builtin is immutable after training and safe for concurrent use.
type Builtin struct {
	dims      int
	weighting Weighting
	opts      analysis.Options
	analyzer  *analysis.Analyzer
	// terms are the words, sorted, then the n-gram rows (subword.go),
	// sorted: the order is part of the serialized bytes.
	terms     []string
	words     int // how many of terms are words
	termIdx   map[string]int32
	idf       []float32
	proj      []float32 // len(terms) * dims, row-major
	trainedOn int       // texts in the training sample (0: unknown, format 1)
	// tunedEpochs is how many epochs of contrastive fine-tuning followed
	// the SVD (0: plain LSA, and every model of formats 1 and 2).
	tunedEpochs int
	// subN is the n-gram length of the sub-word rows (0: none); gramPtr and
	// gramIdx list each word row's n-gram rows (CSR, derived from terms).
	subN             int
	gramPtr, gramIdx []int32
	id               string
}

var _ Embedder = (*Builtin)(nil)

// TrainBuiltin fits an LSA model on texts analyzed with a. Texts whose
// order depends on how they arrived should go through Sample first: the
// order decides the fine-tuning batches. The result is a
// pure function of (texts, analyzer options, cfg): same inputs, same bytes.
func TrainBuiltin(ctx context.Context, a *analysis.Analyzer, texts []string, cfg BuiltinConfig) (*Builtin, error) {
	cfg = cfg.withDefaults()
	if a == nil {
		return nil, errors.New("train builtin: nil analyzer")
	}
	if len(texts) < 2 {
		return nil, fmt.Errorf("train builtin: need at least 2 texts, got %d", len(texts))
	}
	// Deterministic stride sample keeps training time bounded on big corpora.
	train := texts
	if len(texts) > cfg.MaxTrainDocs {
		train = make([]string, 0, cfg.MaxTrainDocs)
		for i := 0; i < cfg.MaxTrainDocs; i++ {
			train = append(train, texts[int(int64(i)*int64(len(texts))/int64(cfg.MaxTrainDocs))])
		}
	}
	docs := make([][]string, len(train))
	parallelRange(len(train), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			docs[i] = a.Terms(train[i])
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("train builtin: %w", err)
	}

	// Vocabulary by document frequency.
	df := map[string]int{}
	for _, d := range docs {
		seen := map[string]struct{}{}
		for _, t := range d {
			if _, ok := seen[t]; !ok {
				seen[t] = struct{}{}
				df[t]++
			}
		}
	}
	n := len(docs)
	maxDF := int(cfg.MaxDFRatio * float64(n))
	type tdf struct {
		t  string
		df int
	}
	var cands []tdf
	for t, f := range df {
		if f >= cfg.MinDF && f <= max(maxDF, cfg.MinDF) {
			cands = append(cands, tdf{t, f})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].df != cands[j].df {
			return cands[i].df > cands[j].df
		}
		return cands[i].t < cands[j].t
	})
	if len(cands) > cfg.MaxVocab {
		cands = cands[:cfg.MaxVocab]
	}
	if len(cands) < 2 {
		return nil, fmt.Errorf("train builtin: vocabulary too small (%d terms)", len(cands))
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].t < cands[j].t })
	m := &Builtin{opts: a.Options(), analyzer: a, weighting: cfg.Weighting, termIdx: make(map[string]int32, len(cands)), trainedOn: len(train),
		words: len(cands)}
	for i, c := range cands {
		m.terms = append(m.terms, c.t)
		m.termIdx[c.t] = int32(i)
		// Smoothed idf, always positive.
		m.idf = append(m.idf, float32(math.Log(float64(n+1)/float64(c.df+1))+1))
	}
	if cfg.Weighting == WeightLogEntropy {
		m.idf = entropyWeights(m, docs)
	}

	// TF-IDF rows, L2-normalized so long chunks do not dominate the SVD.
	x := &csr{rows: n, cols: len(m.terms), ptr: make([]int, 1, n+1)}
	for _, d := range docs {
		start := len(x.idx)
		for _, e := range m.weights(d) {
			x.idx = append(x.idx, e.idx)
			x.val = append(x.val, float64(e.w))
		}
		normalizeRow(x.val[start:])
		x.ptr = append(x.ptr, len(x.idx))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("train builtin: %w", err)
	}

	v, sig, err := randomizedSVD(x, cfg.Dims, cfg.Oversample, cfg.PowerIters, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("train builtin: svd: %w", err)
	}
	_, k := v.Dims()
	m.dims = k
	m.proj = make([]float32, len(m.terms)*k)
	for c := 0; c < k; c++ {
		scale := 0.0
		if sig[c] > 0 {
			scale = math.Pow(sig[c], cfg.SigmaExp)
		}
		for r := range m.terms {
			m.proj[r*k+c] = float32(v.At(r, c) * scale)
		}
	}
	m.id = m.computeID()
	if cfg.Contrastive.Epochs > 0 {
		c := cfg.Contrastive
		if c.Seed == 0 {
			c.Seed = cfg.Seed
		}
		return FineTuneContrastive(ctx, m, train, c)
	}
	return m, nil
}

type weighted struct {
	idx int32
	w   float32
}

// weights returns the sublinear TF-IDF weights of in-vocabulary terms,
// sorted by term index (a stable order keeps float sums deterministic).
func (m *Builtin) weights(terms []string) []weighted {
	perWord := 1
	if m.subN > 0 {
		perWord = 8 // a word's own row and its n-grams' (6 on average for 4-grams)
	}
	return m.weightsOf(m.appendIndexes(make([]int32, 0, perWord*len(terms)), terms))
}

// weightsOf weighs in-vocabulary term indexes (with repeats); it sorts idx
// in place.
func (m *Builtin) weightsOf(idx []int32) []weighted {
	slices.Sort(idx)
	out := make([]weighted, 0, len(idx))
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && idx[j] == idx[i] {
			j++
		}
		tf := float64(j - i)
		local := 1 + math.Log(tf)
		if m.weighting == WeightLogEntropy {
			local = math.Log(1 + tf)
		}
		out = append(out, weighted{idx: idx[i], w: float32(local * float64(m.idf[idx[i]]))})
		i = j
	}
	return out
}

// entropyWeights computes the log-entropy global weight of every term:
// g_t = 1 + sum_d p_td ln p_td / ln N, p_td = tf_td / gf_t. It replaces the
// idf slot, so embedding code is shared.
func entropyWeights(m *Builtin, docs [][]string) []float32 {
	gf := make([]float64, len(m.terms))
	counts := make([]map[int32]int, len(docs))
	for d, terms := range docs {
		c := map[int32]int{}
		for _, t := range terms {
			if i, ok := m.termIdx[t]; ok {
				c[i]++
				gf[i]++
			}
		}
		counts[d] = c
	}
	ent := make([]float64, len(m.terms))
	for _, c := range counts {
		// Summation order over a map is random; sort keys for determinism.
		keys := make([]int32, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, i := range keys {
			p := float64(c[i]) / gf[i]
			ent[i] += p * math.Log(p)
		}
	}
	logN := math.Log(float64(max(len(docs), 2)))
	out := make([]float32, len(m.terms))
	for i := range out {
		out[i] = float32(math.Max(1+ent[i]/logN, 1e-3))
	}
	return out
}

func normalizeRow(v []float64) {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] *= inv
	}
}

// Dimensions implements Embedder.
func (m *Builtin) Dimensions() int { return m.dims }

// ModelID implements Embedder: "builtin:lsa-v<version>:<dims>:<fingerprint>",
// where the fingerprint hashes the serialized model, so a retrained model
// (different corpus) gets a different id and stale vectors are detected.
func (m *Builtin) ModelID() string { return m.id }

// TrainedOn is the number of texts the model was fitted on (0 for a model
// serialized before it was recorded).
func (m *Builtin) TrainedOn() int { return m.trainedOn }

// FineTuned reports whether the model was fine-tuned contrastively after
// the SVD: its vectors want another fusion preset than plain LSA's.
func (m *Builtin) FineTuned() bool { return m.tunedEpochs > 0 }

// Knows reports whether an analyzed term is in the model's vocabulary
// (a word row of its own; its n-grams do not count).
func (m *Builtin) Knows(term string) bool {
	i, ok := m.termIdx[term]
	return ok && int(i) < m.words
}

// VocabSize is the number of words the model knows (without n-grams).
func (m *Builtin) VocabSize() int { return m.words }

// Subwords is the n-gram length of the model's sub-word rows (0: none)
// and how many it has.
func (m *Builtin) Subwords() (n, rows int) { return m.subN, len(m.terms) - m.words }

// Embed implements Embedder. Texts with no known term get a zero vector
// (cosine 0 with everything). Large batches are embedded in parallel.
func (m *Builtin) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) < 64 {
		for i, t := range texts {
			out[i] = m.embedOne(t)
		}
		return out, nil
	}
	var wg sync.WaitGroup
	next := make(chan int, 64)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = m.embedOne(texts[i])
			}
		}()
	}
	var err error
	for i := range texts {
		if err = ctx.Err(); err != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("builtin embed: %w", err)
	}
	return out, nil
}

func (m *Builtin) embedOne(text string) []float32 {
	v := make([]float32, m.dims)
	for _, e := range m.weights(m.analyzer.Terms(text)) {
		blas.Saxpy(m.dims, e.w, m.proj[int(e.idx)*m.dims:int(e.idx+1)*m.dims], 1, v, 1)
	}
	Normalize(v)
	return v
}

// Serialization format (little endian), version 4:
//
//	magic "BMCISLSA" | u32 format version | u32 builtinVersion | u32 dims
//	| analyzer options: u8 stop list, u8 no-stem, u8 join-hyphen, u32 min-len
//	| u8 weighting | u32 texts trained on (from version 2) | u32 fine-tuning
//	epochs (from version 3) | u32 sub-word n-gram length, u32 word rows
//	(from version 4) | u32 vocab size | per term: u32 len + bytes | vocab x
//	f32 idf | vocab*dims x f32 projection
//
// A model without sub-words is written as version 3, byte for byte as
// before, so replicas of the release before version 4 keep reading it.
const (
	magic         = "BMCISLSA"
	formatVersion = 4
)

// MarshalBinary serializes the model; the bytes are deterministic.
func (m *Builtin) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(m.proj)*4 + len(m.terms)*12 + 64)
	b.WriteString(magic)
	le := binary.LittleEndian
	put32 := func(v uint32) { _ = binary.Write(&b, le, v) }
	fv := uint32(formatVersion)
	if m.subN == 0 {
		fv = 3
	}
	put32(fv)
	put32(builtinVersion)
	put32(uint32(m.dims))
	b.WriteByte(byte(m.opts.Stop))
	b.WriteByte(boolByte(m.opts.NoStem))
	b.WriteByte(boolByte(m.opts.JoinHyphenated))
	put32(uint32(m.opts.MinLength))
	b.WriteByte(byte(m.weighting))
	put32(uint32(m.trainedOn))
	put32(uint32(m.tunedEpochs))
	if fv >= 4 {
		put32(uint32(m.subN))
		put32(uint32(m.words))
	}
	put32(uint32(len(m.terms)))
	for _, t := range m.terms {
		put32(uint32(len(t)))
		b.WriteString(t)
	}
	buf := make([]byte, 4)
	for _, f := range m.idf {
		le.PutUint32(buf, math.Float32bits(f))
		b.Write(buf)
	}
	for _, f := range m.proj {
		le.PutUint32(buf, math.Float32bits(f))
		b.Write(buf)
	}
	return b.Bytes(), nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// ErrNewerModel: a stored model written by a newer release (a format or
// model version above this build's); upgrading the reader fixes it.
var ErrNewerModel = errors.New("model written by a newer release")

// ErrOlderModel: a stored model of an older model version than this build
// embeds with; retraining (bmcisctl reindex) fixes it.
var ErrOlderModel = errors.New("model of an older version than this build embeds with")

// UnmarshalBuiltin restores a model written by MarshalBinary, rebuilding
// the analyzer it was trained with.
func UnmarshalBuiltin(data []byte) (*Builtin, error) {
	r := bytes.NewReader(data)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != magic {
		return nil, errors.New("unmarshal builtin: not a builtin embedder model")
	}
	le := binary.LittleEndian
	var fv, bv, dims uint32
	for _, p := range []*uint32{&fv, &bv, &dims} {
		if err := binary.Read(r, le, p); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: header: %w", err)
		}
	}
	switch {
	case fv < 1:
		return nil, fmt.Errorf("unmarshal builtin: format version %d not supported", fv)
	case fv > formatVersion:
		return nil, fmt.Errorf("unmarshal builtin: %w: format version %d not supported (this build reads up to %d)", ErrNewerModel, fv, formatVersion)
	case bv > builtinVersion:
		return nil, fmt.Errorf("unmarshal builtin: %w: model version %d, this build embeds with version %d", ErrNewerModel, bv, builtinVersion)
	case bv < builtinVersion:
		return nil, fmt.Errorf("unmarshal builtin: %w: model version %d, this build embeds with version %d: retrain", ErrOlderModel, bv, builtinVersion)
	}
	var stop, noStem, join byte
	var minLen, vocab uint32
	for _, p := range []*byte{&stop, &noStem, &join} {
		c, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("unmarshal builtin: options: %w", err)
		}
		*p = c
	}
	if err := binary.Read(r, le, &minLen); err != nil {
		return nil, fmt.Errorf("unmarshal builtin: options: %w", err)
	}
	weighting, err := r.ReadByte()
	if err != nil || Weighting(weighting) > WeightLogEntropy {
		return nil, errors.New("unmarshal builtin: bad weighting")
	}
	var trainedOn uint32
	if fv >= 2 {
		if err := binary.Read(r, le, &trainedOn); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: trained-on count: %w", err)
		}
	}
	var tunedEpochs uint32
	if fv >= 3 {
		if err := binary.Read(r, le, &tunedEpochs); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: fine-tuning epochs: %w", err)
		}
	}
	var subN, words uint32
	if fv >= 4 {
		if err := binary.Read(r, le, &subN); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: sub-word length: %w", err)
		}
		if err := binary.Read(r, le, &words); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: word rows: %w", err)
		}
		if subN < 2 || subN > MaxSubwordN {
			return nil, fmt.Errorf("unmarshal builtin: sub-word length %d not in 2-%d", subN, MaxSubwordN)
		}
	}
	if err := binary.Read(r, le, &vocab); err != nil {
		return nil, fmt.Errorf("unmarshal builtin: vocab size: %w", err)
	}
	if fv < 4 {
		words = vocab
	}
	if words > vocab || words < 2 {
		return nil, fmt.Errorf("unmarshal builtin: %d word rows of %d", words, vocab)
	}
	if dims == 0 || dims > 1<<16 || uint64(vocab)*uint64(dims)*4 > uint64(len(data)) {
		return nil, fmt.Errorf("unmarshal builtin: implausible shape %d x %d for %d bytes", vocab, dims, len(data))
	}
	opts := analysis.Options{Stop: analysis.StopList(stop), NoStem: noStem == 1, JoinHyphenated: join == 1, MinLength: int(minLen)}
	m := &Builtin{dims: int(dims), weighting: Weighting(weighting), opts: opts, analyzer: analysis.New(opts), termIdx: make(map[string]int32, vocab), trainedOn: int(trainedOn),
		tunedEpochs: int(tunedEpochs), subN: int(subN), words: int(words)}
	m.terms = make([]string, vocab)
	for i := range m.terms {
		var n uint32
		if err := binary.Read(r, le, &n); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: term %d: %w", i, err)
		}
		if int(n) > r.Len() {
			return nil, fmt.Errorf("unmarshal builtin: term %d: truncated", i)
		}
		t := make([]byte, n)
		if _, err := io.ReadFull(r, t); err != nil {
			return nil, fmt.Errorf("unmarshal builtin: term %d: %w", i, err)
		}
		m.terms[i] = string(t)
		m.termIdx[m.terms[i]] = int32(i)
	}
	m.idf = make([]float32, vocab)
	m.proj = make([]float32, int(vocab)*int(dims))
	for _, dst := range [][]float32{m.idf, m.proj} {
		if r.Len() < len(dst)*4 {
			return nil, errors.New("unmarshal builtin: truncated weights")
		}
		buf := make([]byte, len(dst)*4)
		_, _ = io.ReadFull(r, buf)
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(buf[i*4:]))
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("unmarshal builtin: %d trailing bytes", r.Len())
	}
	for i, t := range m.terms {
		if isGram := t != "" && t[0] == gramPrefix; isGram != (i >= m.words) {
			return nil, fmt.Errorf("unmarshal builtin: term %d (%q) in the wrong section", i, t)
		}
	}
	m.indexGrams()
	m.id = m.computeID()
	return m, nil
}

func (m *Builtin) computeID() string {
	data, _ := m.MarshalBinary()
	sum := sha256.Sum256(data)
	return fmt.Sprintf("builtin:lsa-v%d:%d:%s", builtinVersion, m.dims, hex.EncodeToString(sum[:6]))
}

// Analyzer returns the analyzer the model embeds with.
func (m *Builtin) Analyzer() *analysis.Analyzer { return m.analyzer }
