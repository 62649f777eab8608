package retrieval

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/vecmath"
)

// TestRerankModel measures a second-stage reranker trained on the corpus
// alone (issue 33, NOTES.md "Seventh round"): pseudo-queries cut from
// chunks (one sentence, as the inverse-cloze pairs, or a 300-500 byte run
// of sentences), the source chunk without that span as the positive, the
// shipped hybrid's other candidates for the pseudo-query as hard
// negatives. Each candidate gets KNRM-style kernel features (query term x
// chunk term cosines of the builtin model's word-and-sub-word vectors,
// pooled by Gaussian kernels) and scalar features (BM25, feedback and
// query cosines, their fusion, idf-weighted coverage, length); a linear
// or small MLP scorer is fitted with a listwise softmax loss. The score
// re-sorts the shipped hybrid's top N, interpolated with its fused score:
//
//	BMCIS_EVAL_SEM=rerankmodel BMCIS_EVAL_SEEDS=1,2,3,4 \
//	  go test ./experiments/retrieval -run TestRerankModel -v -timeout 120m
//
// BMCIS_EVAL_RM_PSEUDO (pseudo-queries, default 2000), BMCIS_EVAL_RM_TOPN
// (candidates re-ranked, default 50,100), BMCIS_EVAL_RM_KINDS (pseudo-query
// kinds, default sentence,paragraph,mixed; also title: the title as the
// query against the bodies; mixed: the kinds listed before it, an equal
// share of each). NOTES.md, "Seventh round", has the figures. Claims and the paragraph sets are
// measured against the shipped hybrid query by query; the last log lines
// are the means over seeds with the paired standard error of the
// seed-averaged per-query differences.
func TestRerankModel(t *testing.T) {
	ds := sweepData(t, "rerankmodel")
	ctx := context.Background()
	seeds, err := EnvList("BMCIS_EVAL_SEEDS", []uint64{1})
	require.NoError(t, err)
	nPseudo, err := EnvList("BMCIS_EVAL_RM_PSEUDO", []uint64{2000})
	require.NoError(t, err)
	topNs, err := EnvList("BMCIS_EVAL_RM_TOPN", []uint64{50, 100})
	require.NoError(t, err)
	kinds := strings.Split(cmp.Or(os.Getenv("BMCIS_EVAL_RM_KINDS"), "sentence,paragraph,mixed"), ",")
	sets := loadParagraphSets(t, ds)
	acc := newRerankTally()
	for _, seed := range seeds {
		cfg := DefaultConfig()
		cfg.Embed.Contrastive.Seed = seed
		t0 := time.Now()
		p, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		t.Logf("seed %d: build %v (embed-train %v)", seed, time.Since(t0).Round(time.Millisecond), p.Timings["embed-train"].Round(time.Millisecond))
		rs := newRerankSpace(ctx, p)
		opts := fusion.BuiltinOptions()

		// Evaluation lists: claims, then each paragraph draw.
		type evalSet struct {
			name  string
			ds    *eval.Dataset
			cands map[string]queryCands
		}
		// The shipped hybrid through the harness's own path: lambda 0
		// must reproduce it, or the comparison is not with what ships.
		base, err := p.Run(ctx, ds, cfg.Fusion)
		require.NoError(t, err)
		claims, _, err := p.candidates(ctx, ds, 100)
		require.NoError(t, err)
		evals := []evalSet{{"claims", ds, claims}}
		for i, set := range sets {
			c, _, err := p.candidatesExcluding(ctx, set.Dataset, 100, set.Exclude)
			require.NoError(t, err)
			evals = append(evals, evalSet{fmt.Sprintf("para%d", paragraphSeeds[i]), set.Dataset, c})
		}
		maxN := int(slices.Max(topNs))
		type evalQuery struct {
			fused []fusion.Result
			x     map[int][][]float64 // top N -> features of the fused top N
		}
		evalFeat := make([]map[string]*evalQuery, len(evals))
		t0 = time.Now()
		for e, es := range evals {
			t1, c1 := time.Now(), cpuTime()
			evalFeat[e] = map[string]*evalQuery{}
			var qs []eval.Query
			for _, q := range es.ds.Queries {
				if _, ok := es.ds.Qrels[q.ID]; ok {
					qs = append(qs, q)
				}
			}
			rq := make([]*rerankQuery, len(qs))
			for i, q := range qs {
				rq[i] = rs.query(ctx, q.Text, es.cands[q.ID].bm)
			}
			out := make([]*evalQuery, len(qs))
			parallel(len(qs), func(i int) {
				qc := es.cands[qs[i].ID]
				fused := fusion.Fuse(qc.bm, qc.vecFB, opts)
				n := min(maxN, len(fused))
				docs := make([]*rerankDoc, n)
				for j := 0; j < n; j++ {
					docs[j] = rs.chunks[fused[j].ChunkID]
				}
				raw, bm := rs.rawFeatures(rq[i], docs)
				eq := &evalQuery{fused: fused, x: map[int][][]float64{}}
				for _, tn := range topNs {
					k := min(int(tn), len(raw))
					rows := make([][]float64, k)
					for j := range rows {
						rows[j] = slices.Clone(raw[j])
					}
					eq.x[int(tn)] = relativeFeatures(rows, bm[:k])
				}
				out[i] = eq
			})
			for i, q := range qs {
				evalFeat[e][q.ID] = out[i]
			}
			// CPU time, not wall time: the machine is shared, so the wall
			// clock says more about the load than about the features.
			t.Logf("seed %d: %s features of the top %d, %v of CPU a query (%v wall for %d queries)", seed, es.name, maxN,
				((cpuTime() - c1) / time.Duration(max(1, len(qs)))).Round(10*time.Microsecond), time.Since(t1).Round(time.Millisecond), len(qs))
		}
		t.Logf("seed %d: evaluation features %v", seed, time.Since(t0).Round(time.Millisecond))

		for _, np := range nPseudo {
			// "mixed" is the kinds before it together, an equal share of each.
			byKind := map[string][]rerankList{}
			var genTime time.Duration
			for _, kind := range kinds {
				t0 = time.Now()
				var lists []rerankList
				gen := genTime / time.Duration(max(1, len(byKind)))
				if kind == "mixed" {
					for _, k := range kinds {
						if l, ok := byKind[k]; ok {
							lists = append(lists, l[:min(len(l), int(np)/len(byKind))]...)
						}
					}
				} else {
					lists = rs.pseudoLists(ctx, t, p, int(np), kind, seed, 50)
					byKind[kind] = lists
					gen = time.Since(t0)
					genTime += gen
				}
				for _, variant := range rerankVariants {
					t0 = time.Now()
					m := fitRerank(lists, variant.mask, variant.hidden, seed)
					fit := time.Since(t0)
					name := fmt.Sprintf("%s x%d %s", kind, np, variant.name)
					t.Logf("seed %d %s: pseudo-query lists %v, fit %v, train-list accuracy@1 %.3f",
						seed, name, gen.Round(time.Millisecond), fit.Round(time.Millisecond), m.trainAcc)
					for _, n := range topNs {
						for _, lambda := range []float64{0, 0.1, 0.2, 0.3, 0.5, 0.7, 1} {
							if lambda == 0 && (variant.name != rerankVariants[0].name || kind != kinds[0] || np != nPseudo[0]) {
								continue
							}
							key := fmt.Sprintf("%s top %d lambda %.1f", name, n, lambda)
							if lambda == 0 {
								key = fmt.Sprintf("shipped (top %d)", n)
							}
							var line strings.Builder
							for e, es := range evals {
								run := eval.Run{}
								for qid, eq := range evalFeat[e] {
									ids := rerankOrder(eq.fused, eq.x[int(n)], int(n), lambda, m)
									run[qid] = p.docs(len(ids), func(i int) int64 { return ids[i] })
								}
								acc.add(key, es.name, run, es.ds.Qrels, p, func(qid string) []fusion.Result { return evalFeat[e][qid].fused })
								got := eval.Evaluate(run, es.ds.Qrels)
								if lambda == 0 && e == 0 {
									require.InDelta(t, base.Hybrid.NDCG10, got.NDCG10, 1e-12, "lambda 0 is the shipped hybrid")
								}
								fmt.Fprintf(&line, " %s %.4f", es.name, got.NDCG10)
							}
							t.Logf("seed %d %-58s%s", seed, key, line.String())
						}
					}
				}
			}
		}
	}
	t.Logf("means over %d seeds (nDCG@10 / Recall@100, difference to the shipped hybrid ± paired s.e. of the seed-averaged per-query differences):\n%s",
		len(seeds), acc.report())
}

// rerankVariants are the scorers fitted on the same pseudo-query lists:
// the full model, then cheaper ones (no kernels; kernels and BM25 only).
var rerankVariants = []struct {
	name   string
	mask   []bool
	hidden int
}{
	{"linear all", maskAll(), 0},
	{"mlp16 all", maskAll(), 16},
	{"linear scalars", maskScalars(), 0},
	{"linear kernels+bm25", maskKernelsBM25(), 0},
}

// Feature layout (rerankSpace.features).
const (
	rmBMRel   = iota // BM25 / the list's best BM25
	rmBMMM           // BM25 min-max over the list
	rmBMRank         // 6 / (5 + rank by BM25 in the list)
	rmCosFB          // cosine with the feedback vector
	rmCosFBMM        // its min-max over the list
	rmCosQ           // cosine with the query's own vector
	rmFused          // 0.6 BM25 min-max + 0.4 feedback min-max (the shipped fusion's form)
	rmCover          // idf-weighted share of the query's terms the chunk holds
	rmLogLen         // log(1 + analyzed length)
	rmKernel0        // first kernel; rerankKernels follow
)

// rerankKernels are the kernels' centres: exact match (narrow), then soft
// matches from near-synonyms to unrelated terms.
var rerankKernels = []float64{1, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3}

const rerankFeatures = rmKernel0 + 8

func maskAll() []bool {
	m := make([]bool, rerankFeatures)
	for i := range m {
		m[i] = true
	}
	return m
}

func maskScalars() []bool {
	m := maskAll()
	for i := rmKernel0; i < rerankFeatures; i++ {
		m[i] = false
	}
	return m
}

func maskKernelsBM25() []bool {
	m := make([]bool, rerankFeatures)
	m[rmBMRel], m[rmBMMM], m[rmBMRank] = true, true, true
	for i := rmKernel0; i < rerankFeatures; i++ {
		m[i] = true
	}
	return m
}

// rerankSpace holds what features need: a term table with each term's
// vector (the builtin model's embedding of a word that analyzes to it:
// its own row and its sub-word rows), BM25 statistics, and every chunk's
// analyzed form.
type rerankSpace struct {
	p      *Pipeline
	termID map[string]int32
	vecs   [][]float32 // by term id; nil when the model knows nothing of it
	df     []int
	n      int
	avgdl  float64
	chunks []*rerankDoc
	mu     sync.Mutex
}

// rerankDoc is one candidate's analyzed form.
type rerankDoc struct {
	terms []int32   // distinct term ids, ascending
	tf    []float32 // their counts in the text (title once)
	bmTF  []float32 // their counts as BM25 indexes them (title x HeaderWeight)
	dl    float64   // BM25 length
	vec   []float32
}

type rerankQuery struct {
	terms  []int32
	counts []float32
	w      []float64 // idf / sum of idf
	idf    []float64
	qv, fb []float32
}

func newRerankSpace(ctx context.Context, p *Pipeline) *rerankSpace {
	rs := &rerankSpace{p: p, termID: map[string]int32{}, n: p.index.Len()}
	df := map[string]int{}
	p.index.EachTerm(func(term string, d int) { df[term] = d })
	words := []string{}
	for _, txt := range p.chunkTxt {
		for _, tok := range p.analyzer.Tokens(txt) {
			if _, ok := rs.termID[tok.Term]; !ok {
				rs.termID[tok.Term] = int32(len(words))
				words = append(words, tok.Original)
				rs.df = append(rs.df, df[tok.Term])
			}
		}
	}
	vecs, err := p.model.Embed(ctx, words)
	if err != nil {
		panic(err)
	}
	for i, v := range vecs {
		if embed.Dot(v, v) == 0 {
			vecs[i] = nil
		}
	}
	rs.vecs = vecs
	rs.chunks = make([]*rerankDoc, len(p.chunkTxt))
	parallel(len(p.chunkTxt), func(i int) { rs.chunks[i] = rs.doc(p.chunkTxt[i], p.chunkHdr[i], p.vectors[i]) })
	total := 0.0
	for _, d := range rs.chunks {
		total += d.dl
	}
	rs.avgdl = total / float64(len(rs.chunks))
	return rs
}

// doc analyzes a candidate text (header line included) whose terms are
// all in the table (a chunk, or part of one); vec is its embedding.
func (rs *rerankSpace) doc(text, header string, vec []float32) *rerankDoc {
	a := rs.p.analyzer
	tf := map[int32]float32{}
	for _, term := range a.Terms(text) {
		tf[rs.termID[term]]++
	}
	bm := map[int32]float32{}
	for id, c := range tf {
		bm[id] = c
	}
	dl := 0.0
	for _, c := range tf {
		dl += float64(c)
	}
	for r := 1; r < rs.p.cfg.HeaderWeight && header != ""; r++ {
		for _, term := range a.Terms(header) {
			bm[rs.termID[term]]++
			dl++
		}
	}
	d := &rerankDoc{dl: dl, vec: vec}
	for id := range tf {
		d.terms = append(d.terms, id)
	}
	slices.Sort(d.terms)
	for _, id := range d.terms {
		d.tf = append(d.tf, tf[id])
		d.bmTF = append(d.bmTF, bm[id])
	}
	return d
}

// query analyzes a query; terms new to the table are added (callers do
// this before any parallel feature work). bm is its BM25 list, whose top
// hits make the feedback vector as in the shipped pipeline.
func (rs *rerankSpace) query(ctx context.Context, text string, bm []fusion.Candidate) *rerankQuery {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p := rs.p
	q := &rerankQuery{}
	for _, qt := range p.analyzer.QueryTerms(text) {
		id, ok := rs.termID[qt.Term]
		if !ok {
			id = int32(len(rs.vecs))
			rs.termID[qt.Term] = id
			v, err := p.model.Embed(ctx, []string{qt.Words[0]})
			if err != nil || embed.Dot(v[0], v[0]) == 0 {
				v = [][]float32{nil}
			}
			rs.vecs = append(rs.vecs, v[0])
			rs.df = append(rs.df, 0)
		}
		q.terms = append(q.terms, id)
		q.counts = append(q.counts, float32(qt.Count))
		q.idf = append(q.idf, bm25.IDF(rs.n, rs.df[id]))
	}
	sum := 0.0
	for _, x := range q.idf {
		sum += x
	}
	for _, x := range q.idf {
		q.w = append(q.w, x/math.Max(sum, 1e-9))
	}
	qv, err := p.model.Embed(ctx, []string{text})
	if err != nil {
		panic(err)
	}
	q.qv = qv[0]
	var fb [][]float32
	o := fusion.BuiltinOptions()
	for i := 0; i < min(o.FeedbackChunks, len(bm)); i++ {
		fb = append(fb, p.vectors[bm[i].ChunkID])
	}
	q.fb = embed.Feedback(q.qv, fb, float32(o.FeedbackWeight))
	return q
}

// features computes every candidate's features (rows in docs' order);
// list-relative features are relative to docs.
func (rs *rerankSpace) features(q *rerankQuery, docs []*rerankDoc) [][]float64 {
	x, bmS := rs.rawFeatures(q, docs)
	return relativeFeatures(x, bmS)
}

// rawFeatures computes the features of each candidate alone, and its BM25
// score; relativeFeatures adds those relative to a list.
func (rs *rerankSpace) rawFeatures(q *rerankQuery, docs []*rerankDoc) ([][]float64, []float64) {
	k1, b := rs.p.index.Params().K1, rs.p.index.Params().B
	x := make([][]float64, len(docs))
	bmS := make([]float64, len(docs))
	kern := make([]float64, len(rerankKernels))
	for i, d := range docs {
		row := make([]float64, rerankFeatures)
		norm := k1 * (1 - b + b*d.dl/rs.avgdl)
		for qi, id := range q.terms {
			if j, ok := slices.BinarySearch(d.terms, id); ok {
				tf := float64(d.bmTF[j])
				bmS[i] += float64(q.counts[qi]) * q.idf[qi] * tf * (k1 + 1) / (tf + norm)
				row[rmCover] += q.w[qi]
			}
			// Kernel pooling over this query term's row of the cosine matrix.
			clear(kern)
			qv := rs.vecs[id]
			for j, t := range d.terms {
				var c float64
				switch {
				case t == id:
					c = 1
				case qv == nil || rs.vecs[t] == nil:
					continue
				default:
					c = float64(vecmath.Dot(qv, rs.vecs[t]))
				}
				tf := float64(d.tf[j])
				for k, mu := range rerankKernels {
					sigma := 0.1
					if mu == 1 {
						sigma = 0.001
					}
					if dd := c - mu; dd*dd < 16*sigma*sigma {
						kern[k] += tf * math.Exp(-dd*dd/(2*sigma*sigma))
					}
				}
			}
			for k := range kern {
				row[rmKernel0+k] += q.w[qi] * math.Log1p(kern[k])
			}
		}
		row[rmCosFB] = float64(vecmath.Dot(q.fb, d.vec))
		row[rmCosQ] = float64(vecmath.Dot(q.qv, d.vec))
		row[rmLogLen] = math.Log1p(d.dl)
		x[i] = row
	}
	return x, bmS
}

// relativeFeatures fills the list-relative features of rows x (in place)
// from their BM25 scores and feedback cosines.
func relativeFeatures(x [][]float64, bmS []float64) [][]float64 {
	fbS := make([]float64, len(x))
	for i, r := range x {
		fbS[i] = r[rmCosFB]
	}
	bmMM, fbMM := minMax(bmS), minMax(fbS)
	best := slices.Max(append([]float64{1e-9}, bmS...))
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return bmS[order[a]] > bmS[order[b]] })
	for r, i := range order {
		x[i][rmBMRank] = 6 / float64(5+r+1)
	}
	for i := range x {
		x[i][rmBMRel] = bmS[i] / best
		x[i][rmBMMM] = bmMM[i]
		x[i][rmCosFBMM] = fbMM[i]
		x[i][rmFused] = 0.6*bmMM[i] + 0.4*fbMM[i]
	}
	return x
}

func minMax(s []float64) []float64 {
	out := make([]float64, len(s))
	if len(s) == 0 {
		return out
	}
	lo, hi := slices.Min(s), slices.Max(s)
	for i, v := range s {
		if hi > lo {
			out[i] = (v - lo) / (hi - lo)
		}
	}
	return out
}

// pseudoLists draws n training lists from the corpus: a pseudo-query cut
// from a chunk (kind "sentence": one sentence of at least 5 terms;
// "paragraph": the longest run of whole sentences within 300-500 bytes;
// "title": the title, of at least 4 terms, every candidate without its own),
// the shipped hybrid's top (size-1) for it with the source document
// removed (hard negatives, each without one random sentence so the
// positive's shortening tells nothing), and the source chunk without the
// cut span as the positive, at row 0.
func (rs *rerankSpace) pseudoLists(ctx context.Context, t *testing.T, p *Pipeline, n int, kind string, seed uint64, size int) []rerankList {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_c1a1))
	type pseudo struct {
		chunk int
		pos   string
	}
	var ps []pseudo
	qds := &eval.Dataset{}
	exclude := map[string]map[string]bool{}
	for tries := 0; len(ps) < n && tries < 20*n; tries++ {
		c := rng.IntN(len(p.chunkTxt))
		header, body, ok := strings.Cut(p.chunkTxt[c], "\n")
		if !ok {
			continue
		}
		sents := embed.SplitSentences(body)
		if len(sents) < 3 {
			continue
		}
		lo, hi := 0, 0 // the span [lo, hi) of sentences cut out
		switch kind {
		case "title":
			// The title against the body: every candidate of the list is
			// then a body without its title, so none has the header's
			// repeated terms.
			if len(p.analyzer.Terms(header)) < 4 {
				continue
			}
			qid := fmt.Sprintf("pseudo%d", len(ps))
			ps = append(ps, pseudo{chunk: c, pos: "\n" + body})
			qds.Queries = append(qds.Queries, eval.Query{ID: qid, Text: header})
			exclude[qid] = map[string]bool{p.chunkDoc[c]: true}
			continue
		case "sentence":
			lo = rng.IntN(len(sents))
			hi = lo + 1
			if len(p.analyzer.Terms(sents[lo])) < 5 {
				continue
			}
		default:
			lo = rng.IntN(len(sents))
			size := 0
			for hi = lo; hi < len(sents) && size+len(sents[hi])+1 <= 500; hi++ {
				size += len(sents[hi]) + 1
			}
			if size < 300 || hi-lo >= len(sents) {
				continue
			}
		}
		qtext := strings.Join(sents[lo:hi], " ")
		rest := slices.Concat(sents[:lo], sents[hi:])
		qid := fmt.Sprintf("pseudo%d", len(ps))
		ps = append(ps, pseudo{chunk: c, pos: header + "\n" + strings.Join(rest, " ")})
		qds.Queries = append(qds.Queries, eval.Query{ID: qid, Text: qtext})
		exclude[qid] = map[string]bool{p.chunkDoc[c]: true}
	}
	t0, c0 := time.Now(), cpuTime()
	cands, _, err := p.candidatesExcluding(ctx, qds, 100, exclude)
	require.NoError(t, err)
	t.Logf("%d %s pseudo-queries: hybrid candidates %v (%v of CPU)", len(ps), kind, time.Since(t0).Round(time.Millisecond), (cpuTime() - c0).Round(time.Millisecond))
	t0, c0 = time.Now(), cpuTime()
	defer func() {
		t.Logf("%d %s pseudo-queries: lists and features %v (%v of CPU)", len(ps), kind, time.Since(t0).Round(time.Millisecond), (cpuTime() - c0).Round(time.Millisecond))
	}()
	rq := make([]*rerankQuery, len(ps))
	for i, q := range qds.Queries {
		rq[i] = rs.query(ctx, q.Text, cands[q.ID].bm)
	}
	// Per-list random choices are drawn up front so the lists do not
	// depend on the parallel schedule.
	drops := make([][]uint64, len(ps))
	for i := range drops {
		drops[i] = make([]uint64, size)
		for j := range drops[i] {
			drops[i][j] = rng.Uint64()
		}
	}
	opts := fusion.BuiltinOptions()
	lists := make([]rerankList, len(ps))
	parallel(len(ps), func(i int) {
		qc := cands[qds.Queries[i].ID]
		fused := fusion.Fuse(qc.bm, qc.vecFB, opts)
		posHeader := p.chunkHdr[ps[i].chunk]
		if kind == "title" {
			posHeader = ""
		}
		docs := []*rerankDoc{rs.embedDoc(ctx, ps[i].pos, posHeader)}
		for j := 0; j < len(fused) && len(docs) < size; j++ {
			c := fused[j].ChunkID
			header, body, ok := strings.Cut(p.chunkTxt[c], "\n")
			if kind == "title" {
				docs = append(docs, rs.embedDoc(ctx, "\n"+body, ""))
				continue
			}
			sents := embed.SplitSentences(body)
			if !ok || len(sents) < 2 {
				docs = append(docs, rs.chunks[c])
				continue
			}
			k := int(drops[i][len(docs)] % uint64(len(sents)))
			docs = append(docs, rs.embedDoc(ctx, header+"\n"+strings.Join(slices.Concat(sents[:k], sents[k+1:]), " "), header))
		}
		lists[i] = rerankList{x: rs.features(rq[i], docs)}
	})
	return lists
}

func (rs *rerankSpace) embedDoc(ctx context.Context, text, header string) *rerankDoc {
	v, err := rs.p.model.Embed(ctx, []string{text})
	if err != nil {
		panic(err)
	}
	return rs.doc(text, header, v[0])
}

// rerankList is one training list; row 0 is the positive.
type rerankList struct{ x [][]float64 }

// rerankScorer is a linear score over standardized features plus, when
// hidden > 0, a one-layer tanh MLP's.
type rerankScorer struct {
	mask      []bool
	mean, std []float64
	w         []float64   // linear weights
	wh        [][]float64 // hidden x features
	bh, u     []float64
	trainAcc  float64
}

func (m *rerankScorer) score(x []float64, z []float64, h []float64) float64 {
	for f := range x {
		z[f] = 0
		if m.mask[f] {
			z[f] = (x[f] - m.mean[f]) / m.std[f]
		}
	}
	s := 0.0
	for f, v := range z {
		s += m.w[f] * v
	}
	for k := range m.wh {
		a := m.bh[k]
		for f, v := range z {
			a += m.wh[k][f] * v
		}
		h[k] = math.Tanh(a)
		s += m.u[k] * h[k]
	}
	return s
}

// fitRerank fits the scorer by Adam on the listwise softmax loss (the
// positive against its list), 30 epochs of mini-batches of 32 lists.
func fitRerank(lists []rerankList, mask []bool, hidden int, seed uint64) *rerankScorer {
	nf := rerankFeatures
	m := &rerankScorer{mask: mask, mean: make([]float64, nf), std: make([]float64, nf), w: make([]float64, nf)}
	cnt := 0.0
	for _, l := range lists {
		for _, r := range l.x {
			for f, v := range r {
				m.mean[f] += v
				m.std[f] += v * v
			}
			cnt++
		}
	}
	for f := range m.mean {
		m.mean[f] /= cnt
		m.std[f] = math.Sqrt(math.Max(m.std[f]/cnt-m.mean[f]*m.mean[f], 1e-12))
	}
	rng := rand.New(rand.NewPCG(seed, 0xf17))
	m.bh, m.u = make([]float64, hidden), make([]float64, hidden)
	for k := 0; k < hidden; k++ {
		row := make([]float64, nf)
		for f := range row {
			row[f] = rng.NormFloat64() * 0.3 / math.Sqrt(float64(nf))
		}
		m.wh = append(m.wh, row)
		m.u[k] = rng.NormFloat64() * 0.1
	}
	// Parameters as one slice of pointers, for Adam.
	var params []*float64
	for f := range m.w {
		params = append(params, &m.w[f])
	}
	for k := range m.wh {
		for f := range m.wh[k] {
			params = append(params, &m.wh[k][f])
		}
		params = append(params, &m.bh[k], &m.u[k])
	}
	grad := make([]float64, len(params))
	mom, vel := make([]float64, len(params)), make([]float64, len(params))
	const lr, l2, batch, epochs = 0.01, 1e-4, 32, 30
	z, h := make([]float64, nf), make([]float64, hidden)
	order := make([]int, len(lists))
	for i := range order {
		order[i] = i
	}
	step := 0
	for epoch := 0; epoch < epochs; epoch++ {
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		for start := 0; start < len(order); start += batch {
			clear(grad)
			end := min(start+batch, len(order))
			for _, li := range order[start:end] {
				x := lists[li].x
				s := make([]float64, len(x))
				for i, r := range x {
					s[i] = m.score(r, z, h)
				}
				mx := slices.Max(s)
				sum := 0.0
				for i := range s {
					s[i] = math.Exp(s[i] - mx)
					sum += s[i]
				}
				for i, r := range x {
					g := s[i] / sum
					if i == 0 {
						g--
					}
					g /= float64(end - start)
					m.score(r, z, h) // z and h of this row
					gi := 0
					for f := range m.w {
						grad[gi] += g * z[f]
						gi++
					}
					for k := range m.wh {
						dpre := g * m.u[k] * (1 - h[k]*h[k])
						for f := range m.wh[k] {
							grad[gi] += dpre * z[f]
							gi++
						}
						grad[gi] += dpre
						grad[gi+1] += g * h[k]
						gi += 2
					}
				}
			}
			step++
			c1 := 1 - math.Pow(0.9, float64(step))
			c2 := 1 - math.Pow(0.999, float64(step))
			for i, pp := range params {
				gr := grad[i] + l2**pp
				mom[i] = 0.9*mom[i] + 0.1*gr
				vel[i] = 0.999*vel[i] + 0.001*gr*gr
				*pp -= lr * (mom[i] / c1) / (math.Sqrt(vel[i]/c2) + 1e-8)
			}
		}
	}
	hit := 0
	for _, l := range lists {
		best, bs := 0, math.Inf(-1)
		for i, r := range l.x {
			if s := m.score(r, z, h); s > bs {
				best, bs = i, s
			}
		}
		if best == 0 {
			hit++
		}
	}
	m.trainAcc = float64(hit) / float64(max(1, len(lists)))
	return m
}

// rerankOrder re-sorts the fused top n by (1 - lambda) x min-max of the
// fused score + lambda x min-max of the scorer's, then the rest as fused.
func rerankOrder(fused []fusion.Result, x [][]float64, n int, lambda float64, m *rerankScorer) []int64 {
	n = min(n, len(fused), len(x))
	fs := make([]float64, n)
	rs := make([]float64, n)
	z, h := make([]float64, rerankFeatures), make([]float64, len(m.wh))
	for i := 0; i < n; i++ {
		fs[i] = fused[i].Fused
		if lambda > 0 {
			rs[i] = m.score(x[i], z, h)
		}
	}
	fmm, rmm := minMax(fs), minMax(rs)
	score := make([]float64, n)
	for i := range score {
		score[i] = (1-lambda)*fmm[i] + lambda*rmm[i]
	}
	return resortTop(fused, score)
}

// rerankTally accumulates, per setting and query set, every seed's
// per-query nDCG@10 and Recall@100 and the per-query difference to the
// shipped hybrid, so the report gives seed means and the paired standard
// error of the seed-averaged differences.
type rerankTally struct {
	order []string
	cells map[string]*rerankCell
}

type rerankCell struct {
	seeds      int
	ndcg, r100 float64
	diff       map[string]float64 // query -> sum over seeds of the difference
}

func newRerankTally() *rerankTally { return &rerankTally{cells: map[string]*rerankCell{}} }

func (a *rerankTally) add(key, set string, run eval.Run, qrels eval.Qrels, p *Pipeline, shipped func(qid string) []fusion.Result) {
	k := key + "\x00" + set
	c := a.cells[k]
	if c == nil {
		c = &rerankCell{diff: map[string]float64{}}
		a.cells[k] = c
		a.order = append(a.order, k)
	}
	c.seeds++
	m := eval.Evaluate(run, qrels)
	c.ndcg += m.NDCG10
	c.r100 += m.Recall100
	for qid, rels := range qrels {
		f := shipped(qid)
		base := p.docs(len(f), func(i int) int64 { return f[i].ChunkID })
		c.diff[qid] += eval.NDCG(eval.Dedupe(run[qid]), rels, 10) - eval.NDCG(eval.Dedupe(base), rels, 10)
	}
}

func (a *rerankTally) report() string {
	var b strings.Builder
	// Paragraph draws are pooled: a source's differences are averaged over
	// the draws that hold it (its draws share the judgements, so they are
	// not independent queries).
	type pooled struct {
		n          int
		ndcg, r100 float64
		sum        map[string]float64
		cnt        map[string]int
	}
	rows := map[string]*pooled{}
	var keys []string
	for _, k := range a.order {
		key, set, _ := strings.Cut(k, "\x00")
		group := key + "\x00claims"
		if set != "claims" {
			group = key + "\x00paragraphs"
		}
		r := rows[group]
		if r == nil {
			r = &pooled{sum: map[string]float64{}, cnt: map[string]int{}}
			rows[group] = r
			keys = append(keys, group)
		}
		c := a.cells[k]
		r.n++
		r.ndcg += c.ndcg / float64(c.seeds)
		r.r100 += c.r100 / float64(c.seeds)
		for id, d := range c.diff {
			r.sum[id] += d / float64(c.seeds)
			r.cnt[id]++
		}
	}
	for _, g := range keys {
		r := rows[g]
		key, set, _ := strings.Cut(g, "\x00")
		var diffs []float64
		for id, s := range r.sum {
			diffs = append(diffs, s/float64(r.cnt[id]))
		}
		var mean, ss float64
		for _, d := range diffs {
			mean += d
		}
		mean /= float64(len(diffs))
		for _, d := range diffs {
			ss += (d - mean) * (d - mean)
		}
		se := math.Sqrt(ss/float64(len(diffs)-1)) / math.Sqrt(float64(len(diffs)))
		fmt.Fprintf(&b, "%-58s %-10s %.4f / %.4f  %+.4f ± %.4f\n", key, set, r.ndcg/float64(r.n), r.r100/float64(r.n), mean, se)
	}
	return b.String()
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
