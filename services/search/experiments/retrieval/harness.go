// Package retrieval is the in-process retrieval harness and the opt-in
// SciFact experiments run on it (NOTES.md): the service's analyzer, BM25
// index, embedder and fusion, driven directly, without a database. No
// binary imports it; ../README.md says how to run it and why it is here.
package retrieval

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/cl100k"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// Config describes one retrieval pipeline to measure.
type Config struct {
	Name     string
	Analyzer analysis.Options
	BM25     bm25.Params
	Chunk    chunker.Options
	// HeaderInText indexes each chunk as ContextHeader + "\n" + Text (for an
	// abstract the header is its title), for both BM25 and embeddings.
	HeaderInText bool
	// HeaderWeight repeats the context header's terms this many times in
	// what BM25 indexes (0 or 1: once, as in the text). A BM25F-style
	// field weight for the title/heading path.
	HeaderWeight int
	// LeadWeight and LastWeight repeat the terms of a chunk's first and
	// last sentence this many times in what BM25 indexes (0 or 1: once):
	// a positional field weight (the ninth round, NOTES.md).
	LeadWeight, LastWeight int
	// Embed configures the builtin embedder; zero Dims skips vector runs.
	Embed embed.BuiltinConfig
	// Fusion configures hybrid ranking.
	Fusion Fusion
	// Candidates is how many chunks each retriever returns (default 200).
	Candidates int
	// Train, when set, replaces builtin training (experiments with other
	// representations); Embed.Dims must still be > 0.
	Train func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error)
}

// DefaultConfig is the shipped pipeline configuration (see NOTES.md).
func DefaultConfig() Config {
	return Config{
		Name:         "default",
		BM25:         bm25.DefaultParams(),
		Chunk:        chunker.DefaultOptions(),
		HeaderInText: true,
		HeaderWeight: analysis.HeaderWeight,
		Embed:        embed.DefaultBuiltinConfig(),
		Fusion:       Fusion{Method: "preset", RRF: fusion.BuiltinOptions()},
		Candidates:   100,
	}
}

// Result holds the metrics of one pipeline run.
type Result struct {
	Config  string
	Chunks  int
	BM25    eval.Metrics
	Vector  eval.Metrics
	Hybrid  eval.Metrics
	Timings map[string]time.Duration
	// BM25Run and HybridRun are the rankings of every query (document
	// ids), for paired comparisons (PairedNDCG10).
	BM25Run, HybridRun eval.Run
}

// Pipeline is an indexed corpus ready to answer queries, so several query
// configurations can share one (expensive) build.
type Pipeline struct {
	cfg      Config
	analyzer *analysis.Analyzer
	index    *bm25.Index
	model    *embed.Builtin
	vectors  [][]float32
	chunkDoc []string // chunk id -> document id
	chunkTxt []string
	chunkHdr []string
	Timings  map[string]time.Duration

	cache      map[string]queryCands
	cacheKey   candidateKey
	cacheTimes map[string]time.Duration
	docChunks  map[string]int // document id -> number of chunks
}

// candidateKey says which query set, exclusions and BM25 parameters the
// cached candidate lists answer.
type candidateKey struct {
	ds      *eval.Dataset
	exclude uintptr // the exclusion map's identity (0: none)
	params  bm25.Params
}

// Build chunks, analyzes and indexes the corpus, and trains the builtin
// embedder when cfg.Embed.Dims > 0.
func Build(ctx context.Context, ds *eval.Dataset, cfg Config) (*Pipeline, error) {
	p := &Pipeline{cfg: cfg, analyzer: analysis.New(cfg.Analyzer), index: bm25.New(cfg.BM25), Timings: map[string]time.Duration{},
		docChunks: map[string]int{}}
	ck, err := cl100k.Load()
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	ch, err := chunker.New(ck, cfg.Chunk)
	if err != nil {
		return nil, fmt.Errorf("chunker: %w", err)
	}

	t0 := time.Now()
	for _, d := range ds.Corpus {
		chunks, err := ch.Split(ctx, chunker.Abstract, d.Title, d.Text)
		if err != nil {
			return nil, fmt.Errorf("chunk %s: %w", d.ID, err)
		}
		if len(chunks) == 0 {
			// Title-only documents still deserve to be findable.
			chunks = []chunker.Chunk{{ContextHeader: d.Title}}
		}
		for _, c := range chunks {
			text := c.ChunkText
			if cfg.HeaderInText && c.ContextHeader != "" {
				text = c.ContextHeader + "\n" + c.ChunkText
			}
			p.chunkDoc = append(p.chunkDoc, d.ID)
			p.chunkTxt = append(p.chunkTxt, text)
			p.chunkHdr = append(p.chunkHdr, c.ContextHeader)
			p.docChunks[d.ID]++
		}
	}
	p.Timings["chunk"] = time.Since(t0)

	t0 = time.Now()
	docs := make([]bm25.Doc, len(p.chunkTxt))
	parallel(len(p.chunkTxt), func(i int) {
		terms := p.analyzer.Terms(p.chunkTxt[i])
		if cfg.HeaderInText {
			for r := 1; r < cfg.HeaderWeight; r++ {
				terms = p.analyzer.AppendTerms(terms, p.chunkHdr[i])
			}
		}
		if cfg.LeadWeight > 1 || cfg.LastWeight > 1 {
			lead, last := edgeSentences(p.chunkTxt[i][len(p.chunkHdr[i]):])
			for r := 1; r < cfg.LeadWeight; r++ {
				terms = p.analyzer.AppendTerms(terms, lead)
			}
			for r := 1; r < cfg.LastWeight; r++ {
				terms = p.analyzer.AppendTerms(terms, last)
			}
		}
		docs[i] = bm25.Doc{ChunkID: int64(i), Terms: terms}
	})
	p.Timings["analyze"] = time.Since(t0)
	t0 = time.Now()
	p.index.ReplaceBatch(docs)
	p.Timings["bm25-index"] = time.Since(t0)

	if cfg.Embed.Dims > 0 {
		t0 = time.Now()
		train := cfg.Train
		if train == nil {
			train = func(ctx context.Context, a *analysis.Analyzer, texts []string) (*embed.Builtin, error) {
				return embed.TrainBuiltin(ctx, a, texts, cfg.Embed)
			}
		}
		// The service's sample and order (embed.Sample), so both train the
		// same model on the same corpus.
		limit := cfg.Embed.MaxTrainDocs
		if limit <= 0 {
			limit = embed.DefaultBuiltinConfig().MaxTrainDocs
		}
		sample := embed.NewSample(limit)
		pos := map[string]int{}
		for i, text := range p.chunkTxt {
			doc := p.chunkDoc[i]
			sample.Add(doc, pos[doc], text)
			pos[doc]++
		}
		m, err := train(ctx, p.analyzer, sample.Texts())
		if err != nil {
			return nil, fmt.Errorf("train builtin embedder: %w", err)
		}
		p.model = m
		p.Timings["embed-train"] = time.Since(t0)
		t0 = time.Now()
		vecs, err := m.Embed(ctx, p.chunkTxt)
		if err != nil {
			return nil, fmt.Errorf("embed corpus: %w", err)
		}
		p.vectors = vecs
		p.Timings["embed-corpus"] = time.Since(t0)
	}
	return p, nil
}

// Chunks returns the number of indexed chunks.
func (p *Pipeline) Chunks() int { return len(p.chunkDoc) }

// Model returns the trained embedder (nil when none).
func (p *Pipeline) Model() *embed.Builtin { return p.model }

// Index returns the BM25 index.
func (p *Pipeline) Index() *bm25.Index { return p.index }

// Fusion selects how hybrid results are fused.
type Fusion struct {
	// Method is "rrf" (default) or "convex".
	Method string
	RRF    fusion.Options
	// Alpha is the BM25 weight of convex fusion.
	Alpha float64
}

func (f Fusion) fuse(bm, vec []fusion.Candidate) []fusion.Result {
	switch f.Method {
	case "convex":
		return fusion.Convex(bm, vec, f.Alpha, 0)
	case "preset":
		return fusion.Fuse(bm, vec, f.RRF)
	}
	return fusion.RRF(bm, vec, f.RRF)
}

type queryCands struct {
	bm, vec []fusion.Candidate
	// vecFB is the vector list of the query moved towards the top BM25
	// hits (fusion.Options.FeedbackChunks), which hybrid ranking uses.
	vecFB []fusion.Candidate
}

// candidates retrieves (and caches per query set and BM25 parameters)
// both candidate lists for every query, so fusion sweeps do not redo
// retrieval.
func (p *Pipeline) candidates(ctx context.Context, ds *eval.Dataset, k int) (map[string]queryCands, map[string]time.Duration, error) {
	return p.candidatesExcluding(ctx, ds, k, nil)
}

// candidatesExcluding is candidates with, for each query id, documents
// whose chunks are dropped from both lists before feedback and fusion, as
// if the collection did not hold them; each list still has k chunks when
// the collection has enough.
func (p *Pipeline) candidatesExcluding(ctx context.Context, ds *eval.Dataset, k int, exclude map[string]map[string]bool) (map[string]queryCands, map[string]time.Duration, error) {
	key := candidateKey{ds: ds, exclude: reflect.ValueOf(exclude).Pointer(), params: p.index.Params()}
	if p.cache != nil && p.cacheKey == key {
		return p.cache, p.cacheTimes, nil
	}
	out := make(map[string]queryCands, len(ds.Queries))
	var bm25Time, embTime, vecTime time.Duration
	for _, q := range ds.Queries {
		ex := exclude[q.ID]
		extra := 0
		for id := range ex {
			extra += p.docChunks[id]
		}
		keep := func(list []fusion.Candidate) []fusion.Candidate {
			if len(ex) == 0 {
				return list
			}
			kept := list[:0]
			for _, c := range list {
				if !ex[p.chunkDoc[c.ChunkID]] {
					kept = append(kept, c)
				}
			}
			return kept[:min(len(kept), k)]
		}
		t0 := time.Now()
		hits := p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: k + extra})
		bm25Time += time.Since(t0)
		qc := queryCands{bm: make([]fusion.Candidate, len(hits))}
		for i, h := range hits {
			qc.bm[i] = fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score}
		}
		qc.bm = keep(qc.bm)
		if p.model != nil {
			t0 = time.Now()
			qv, err := p.model.Embed(ctx, []string{q.Text})
			if err != nil {
				return nil, nil, fmt.Errorf("embed query %s: %w", q.ID, err)
			}
			embTime += time.Since(t0)
			t0 = time.Now()
			qc.vec = keep(exactKNN(p.vectors, qv[0], k+extra))
			if fb := p.cfg.Fusion.RRF; fb.FeedbackChunks > 0 {
				var vs [][]float32
				for i := 0; i < min(fb.FeedbackChunks, len(qc.bm)); i++ {
					vs = append(vs, p.vectors[qc.bm[i].ChunkID])
				}
				qc.vecFB = keep(exactKNN(p.vectors, embed.Feedback(qv[0], vs, float32(fb.FeedbackWeight)), k+extra))
			}
			vecTime += time.Since(t0)
		}
		out[q.ID] = qc
	}
	n := time.Duration(max(1, len(ds.Queries)))
	times := map[string]time.Duration{"bm25-query-mean": bm25Time / n}
	if p.model != nil {
		times["embed-query-mean"] = embTime / n
		times["knn-query-mean"] = vecTime / n
	}
	p.cache, p.cacheKey, p.cacheTimes = out, key, times
	return out, times, nil
}

// Run answers every query with BM25, vector and hybrid retrieval and
// returns document-level metrics for each.
func (p *Pipeline) Run(ctx context.Context, ds *eval.Dataset, f Fusion) (Result, error) {
	return p.RunExcluding(ctx, ds, f, nil)
}

// RunExcluding is Run with documents removed from each query's results
// (ParagraphSet.Exclude): they are dropped from both candidate lists
// before vector feedback and fusion.
func (p *Pipeline) RunExcluding(ctx context.Context, ds *eval.Dataset, f Fusion, exclude map[string]map[string]bool) (Result, error) {
	k := p.cfg.Candidates
	if k <= 0 {
		k = 200
	}
	res := Result{Config: p.cfg.Name, Chunks: len(p.chunkDoc), Timings: map[string]time.Duration{}}
	for name, d := range p.Timings {
		res.Timings[name] = d
	}
	cands, times, err := p.candidatesExcluding(ctx, ds, k, exclude)
	if err != nil {
		return res, err
	}
	for name, d := range times {
		res.Timings[name] = d
	}
	bm25Run, vecRun, hybRun := eval.Run{}, eval.Run{}, eval.Run{}
	for qid, qc := range cands {
		bm25Run[qid] = p.docs(len(qc.bm), func(i int) int64 { return qc.bm[i].ChunkID })
		if p.model == nil {
			continue
		}
		vecRun[qid] = p.docs(len(qc.vec), func(i int) int64 { return qc.vec[i].ChunkID })
		vec := qc.vec
		if qc.vecFB != nil {
			vec = qc.vecFB
		}
		fused := f.fuse(qc.bm, vec)
		hybRun[qid] = p.docs(len(fused), func(i int) int64 { return fused[i].ChunkID })
	}
	res.BM25 = eval.Evaluate(bm25Run, ds.Qrels)
	res.BM25Run, res.HybridRun = bm25Run, hybRun
	if p.model != nil {
		res.Vector = eval.Evaluate(vecRun, ds.Qrels)
		res.Hybrid = eval.Evaluate(hybRun, ds.Qrels)
	}
	return res, nil
}

func (p *Pipeline) docs(n int, id func(int) int64) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = p.chunkDoc[id(i)]
	}
	return out
}

// exactKNN is brute-force cosine search (vectors are unit length), standing
// in for pgvector in measurements.
func exactKNN(vecs [][]float32, q []float32, k int) []fusion.Candidate {
	out := make([]fusion.Candidate, len(vecs))
	for i, v := range vecs {
		out[i] = fusion.Candidate{ChunkID: int64(i), Score: float64(embed.Dot(v, q))}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].ChunkID < out[j].ChunkID
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}

func parallel(n int, fn func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	next := make(chan int, 256)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// FormatResults renders results as an aligned table for logs.
func FormatResults(rs []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %7s %9s %9s %9s %9s %9s %9s\n", "config", "chunks", "bm25@10", "bm25R100", "vec@10", "vecR100", "hyb@10", "hybR100")
	for _, r := range rs {
		fmt.Fprintf(&b, "%-44s %7d %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", r.Config, r.Chunks,
			r.BM25.NDCG10, r.BM25.Recall100, r.Vector.NDCG10, r.Vector.Recall100, r.Hybrid.NDCG10, r.Hybrid.Recall100)
	}
	return b.String()
}

// DocOf returns the document id of a chunk.
func (p *Pipeline) DocOf(chunkID int64) string { return p.chunkDoc[chunkID] }

// resortTop returns the chunk ids of fused with its first len(score)
// results re-sorted by score (descending, stable) and the rest as fused:
// the shape of every second stage measured here.
func resortTop(fused []fusion.Result, score []float64) []int64 {
	idx := make([]int, len(score))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	out := make([]int64, 0, len(fused))
	for _, i := range idx {
		out = append(out, fused[i].ChunkID)
	}
	for _, r := range fused[len(score):] {
		out = append(out, r.ChunkID)
	}
	return out
}

// sentenceEnd ends a sentence: a full stop, question or exclamation mark
// followed by white space and a capital letter or a digit.
var sentenceEnd = regexp.MustCompile(`[.!?]\s+[A-Z0-9]`)

// edgeSentences is a text's first and last sentence ("" when it has one
// sentence only: then the whole text is the first).
func edgeSentences(text string) (lead, last string) {
	text = strings.TrimSpace(text)
	ends := sentenceEnd.FindAllStringIndex(text, -1)
	if len(ends) == 0 {
		return text, ""
	}
	return text[:ends[0][0]+1], text[ends[len(ends)-1][1]-1:]
}
