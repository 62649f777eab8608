package retrieval

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
)

// TestGraphSmoothing measures score regularisation over a corpus graph
// (issue 33, NOTES.md "Eighth round"; Diaz 2005, MacAvaney et al. 2022):
//
//	BMCIS_EVAL_SEM=graph [BMCIS_EVAL_SEEDS=1,2,3,4] [BMCIS_EVAL_GRAPH=<names>] \
//	  [BMCIS_EVAL_GRAPH_PARA=1] go test ./experiments/retrieval -run 'TestGraphSmoothing$' -v -timeout 60m
//
// The pool is the shipped hybrid's fused top N, plus (adaptive, GAR-like)
// the first e graph neighbours of each of its top 10 that are not already
// in it. Every pool member d has its fused score s0(d) (a newcomer is
// scored by the same fusion: its BM25 score and feedback-vector cosine,
// min-max over the query's two lists of 100, floored at 0), and
//
//	s_{t+1}(d) = (1-mu) s0(d) + mu sum_n w(d,n) s_t(n) / sum_n w(d,n)
//
// over d's k nearest neighbours n within the pool (t = 0, or 0 and 1 for
// two iterations; w clipped at 0; no neighbour with weight: s0). The pool
// is re-sorted by it, the rest of the fused list follows in fused order.
// Graphs: "cos pool" (exact chunk-vector cosine among the pool), "cos
// corpus" (each chunk's 16 nearest chunks by cosine, precomputed over the
// corpus, those in the pool), "bm25 corpus" (each chunk's 16 best BM25
// hits with its own indexed terms as the query, w = score / its own).
// BMCIS_EVAL_GRAPH keeps the settings whose name contains one of its
// comma-separated parts; BMCIS_EVAL_GRAPH_PARA=1 adds the paragraph sets.
// The last log lines are the means over seeds (rerankTally).
func TestGraphSmoothing(t *testing.T) {
	ds := sweepData(t, "graph")
	ctx := context.Background()
	seeds, err := EnvList("BMCIS_EVAL_SEEDS", []uint64{1})
	require.NoError(t, err)
	var only []string
	if env := os.Getenv("BMCIS_EVAL_GRAPH"); env != "" {
		only = strings.Split(env, ",")
	}
	keep := func(s graphSetting) bool {
		return only == nil || slices.ContainsFunc(only, func(o string) bool { return strings.Contains(s.String(), strings.TrimSpace(o)) })
	}
	var sets []*ParagraphSet
	if os.Getenv("BMCIS_EVAL_GRAPH_PARA") != "" {
		sets = loadParagraphSets(t, ds)
	}
	acc := newRerankTally()
	for _, seed := range seeds {
		cfg := DefaultConfig()
		cfg.Embed.Contrastive.Seed = seed
		t0 := time.Now()
		p, err := Build(ctx, ds, cfg)
		require.NoError(t, err)
		base, err := p.Run(ctx, ds, cfg.Fusion)
		require.NoError(t, err)
		t.Logf("seed %d: build %v, shipped %.4f / %.4f", seed, time.Since(t0).Round(time.Millisecond), base.Hybrid.NDCG10, base.Hybrid.Recall100)

		t0 = time.Now()
		graphs := map[string]corpusGraph{"cos": cosineGraph(p.vectors, 16)}
		t.Logf("seed %d: cosine graph (16 a chunk) %v", seed, time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		graphs["bm25"] = bm25Graph(p, 16)
		t.Logf("seed %d: BM25 graph (16 a chunk) %v", seed, time.Since(t0).Round(time.Millisecond))

		type evalSet struct {
			name string
			ds   *eval.Dataset
			qs   map[string]*graphQuery
		}
		claims, _, err := p.candidates(ctx, ds, 100)
		require.NoError(t, err)
		evals := []evalSet{{"claims", ds, graphQueries(ctx, t, p, ds, claims, nil)}}
		for i, set := range sets {
			c, _, err := p.candidatesExcluding(ctx, set.Dataset, 100, set.Exclude)
			require.NoError(t, err)
			evals = append(evals, evalSet{fmt.Sprintf("para%d", paragraphSeeds[i]), set.Dataset, graphQueries(ctx, t, p, set.Dataset, c, set.Exclude)})
		}

		for _, g := range []string{"cos pool", "cos corpus", "bm25 corpus"} {
			for _, n := range []int{50, 100} {
				for _, expand := range []int{0, 3, 5, 10} {
					var settings []graphSetting
					for _, k := range []int{3, 5, 10} {
						for _, mu := range []float64{0, 0.05, 0.1, 0.2, 0.3, 0.5} {
							for _, it := range []int{1, 2} {
								s := graphSetting{graph: g, n: n, expand: expand, k: k, mu: mu, iters: it}
								// mu 0 is the unsmoothed pool: once per pool.
								if (mu == 0 && (k != 3 || it != 1)) || !keep(s) {
									continue
								}
								settings = append(settings, s)
							}
						}
					}
					if len(settings) == 0 {
						continue
					}
					for _, es := range evals {
						qids := make([]string, 0, len(es.qs))
						for qid := range es.qs {
							qids = append(qids, qid)
						}
						pools := make([]*graphPool, len(qids))
						parallel(len(qids), func(i int) {
							pools[i] = newGraphPool(p, es.qs[qids[i]], graphs, g, n, expand, 10)
						})
						newcomers, positive := 0, 0
						for _, pl := range pools {
							newcomers += pl.newcomers
							positive += pl.positive
						}
						baseRun := eval.Run{}
						for qid, q := range es.qs {
							baseRun[qid] = p.docs(len(q.fused), func(j int) int64 { return q.fused[j].ChunkID })
						}
						for _, s := range settings {
							run := eval.Run{}
							top10 := 0 // graph newcomers ranked in the top 10
							for i, qid := range qids {
								ids := pools[i].rank(s.k, s.mu, s.iters)
								for _, c := range ids[:min(10, len(ids))] {
									if pools[i].newcomer[c] {
										top10++
									}
								}
								run[qid] = p.docs(len(ids), func(j int) int64 { return ids[j] })
							}
							if s.mu == 0 && s.expand == 0 && es.name == "claims" {
								require.InDelta(t, base.Hybrid.NDCG10, eval.Evaluate(run, ds.Qrels).NDCG10, 1e-12, "mu 0 is the shipped hybrid")
							}
							qs := es.qs
							acc.add(s.String(), es.name, run, es.ds.Qrels, p, func(qid string) []fusion.Result { return qs[qid].fused })
							m := eval.Evaluate(run, es.ds.Qrels)
							d, se := eval.PairedNDCG10(run, baseRun, es.ds.Qrels)
							t.Logf("seed %d %-6s %-48s %.4f / %.4f  %+.4f ± %.4f  (newcomers %.1f a query, %d scored above 0, %d in a top 10)",
								seed, es.name, s, m.NDCG10, m.Recall100, d, se, float64(newcomers)/float64(len(qids)), positive, top10)
						}
					}
				}
			}
		}
	}
	t.Logf("means over %d seeds (nDCG@10 / Recall@100, difference to the shipped hybrid ± paired s.e. of the seed-averaged per-query differences):\n%s",
		len(seeds), acc.report())
}

// graphSetting is one smoothing configuration.
type graphSetting struct {
	graph        string // "cos pool", "cos corpus" or "bm25 corpus"
	n, expand, k int
	mu           float64
	iters        int
}

func (s graphSetting) String() string {
	return fmt.Sprintf("%s N %d +%d k %d mu %.2f it %d", s.graph, s.n, s.expand, s.k, s.mu, s.iters)
}

// neighbour is one edge of a corpus graph.
type neighbour struct {
	id int32
	w  float32
}

// corpusGraph lists each chunk's nearest other chunks, best first.
type corpusGraph [][]neighbour

// cosineGraph is each chunk's k nearest chunks by exact cosine (the
// vectors are unit length), weighted by the cosine.
func cosineGraph(vecs [][]float32, k int) corpusGraph {
	g := make(corpusGraph, len(vecs))
	parallel(len(vecs), func(i int) {
		nb := make([]neighbour, 0, len(vecs))
		for j, v := range vecs {
			if j != i {
				nb = append(nb, neighbour{int32(j), embed.Dot(vecs[i], v)})
			}
		}
		g[i] = topNeighbours(nb, k)
	})
	return g
}

// bm25Graph is each chunk's k best BM25 hits when its own indexed terms
// (header counted as indexed) are the query, weighted by the hit's score
// over the chunk's score for itself, so weights are comparable across
// chunks of different lengths.
func bm25Graph(p *Pipeline, k int) corpusGraph {
	g := make(corpusGraph, len(p.chunkTxt))
	parallel(len(p.chunkTxt), func(i int) {
		terms := p.analyzer.Terms(p.chunkTxt[i])
		for r := 1; r < p.cfg.HeaderWeight && p.cfg.HeaderInText; r++ {
			terms = p.analyzer.AppendTerms(terms, p.chunkHdr[i])
		}
		hits := p.index.Search(terms, bm25.SearchOptions{K: k + 1})
		self := 0.0
		for _, h := range hits {
			if h.ChunkID == int64(i) {
				self = h.Score
			}
		}
		if self == 0 && len(hits) > 0 {
			self = hits[0].Score
		}
		nb := make([]neighbour, 0, len(hits))
		for _, h := range hits {
			if h.ChunkID != int64(i) && self > 0 {
				nb = append(nb, neighbour{int32(h.ChunkID), float32(h.Score / self)})
			}
		}
		g[i] = topNeighbours(nb, k)
	})
	return g
}

// topNeighbours returns the k heaviest of nb, heaviest first (ties by id).
func topNeighbours(nb []neighbour, k int) []neighbour {
	sort.Slice(nb, func(a, b int) bool {
		if nb[a].w != nb[b].w {
			return nb[a].w > nb[b].w
		}
		return nb[a].id < nb[b].id
	})
	return slices.Clip(nb[:min(k, len(nb))])
}

// graphQuery is what smoothing needs of one query: the shipped fused
// list and what scores a chunk outside it by the same fusion.
type graphQuery struct {
	fused    []fusion.Result
	inFused  map[int64]float64 // chunk -> Fused
	bmFull   []float32         // BM25 score of every chunk for the query
	fb       []float32         // the feedback vector the shipped hybrid searched with
	bmLo     float64
	bmSpan   float64
	vecLo    float64
	vecSpan  float64
	excluded map[string]bool // documents the collection is taken not to hold
}

func graphQueries(ctx context.Context, t testing.TB, p *Pipeline, ds *eval.Dataset, cands map[string]queryCands, exclude map[string]map[string]bool) map[string]*graphQuery {
	t.Helper()
	opts := fusion.BuiltinOptions()
	out := map[string]*graphQuery{}
	for _, q := range ds.Queries {
		if _, ok := ds.Qrels[q.ID]; !ok {
			continue
		}
		qc := cands[q.ID]
		gq := &graphQuery{fused: fusion.Fuse(qc.bm, qc.vecFB, opts), inFused: map[int64]float64{}, excluded: exclude[q.ID]}
		for _, r := range gq.fused {
			gq.inFused[r.ChunkID] = r.Fused
		}
		// The same lists and feedback as candidatesExcluding: min-max
		// bounds of each list, the feedback vector from BM25's top 3.
		gq.bmLo, gq.bmSpan = fusion.ScoreBounds(qc.bm)
		gq.vecLo, gq.vecSpan = fusion.ScoreBounds(qc.vecFB)
		qv, err := p.model.Embed(ctx, []string{q.Text})
		require.NoError(t, err)
		var vs [][]float32
		for i := 0; i < min(opts.FeedbackChunks, len(qc.bm)); i++ {
			vs = append(vs, p.vectors[qc.bm[i].ChunkID])
		}
		gq.fb = embed.Feedback(qv[0], vs, float32(opts.FeedbackWeight))
		gq.bmFull = make([]float32, len(p.chunkTxt))
		for _, h := range p.index.Search(p.analyzer.Terms(q.Text), bm25.SearchOptions{K: p.index.Len()}) {
			gq.bmFull[h.ChunkID] = float32(h.Score)
		}
		out[q.ID] = gq
	}
	return out
}

// ownScore is chunk c's fused score: from the fused list, or, for a chunk
// outside it, the shipped convex fusion of its BM25 score and feedback
// cosine min-max scaled by the lists' bounds, floored at 0 as the fusion
// scores a side that did not return the chunk.
func (q *graphQuery) ownScore(p *Pipeline, c int64) float64 {
	if s, ok := q.inFused[c]; ok {
		return s
	}
	alpha := fusion.BuiltinOptions().Alpha
	mm := func(x, lo, span float64) float64 {
		if span <= 0 {
			return 0
		}
		return math.Max(0, (x-lo)/span)
	}
	return alpha*mm(float64(q.bmFull[c]), q.bmLo, q.bmSpan) +
		(1-alpha)*mm(float64(embed.Dot(q.fb, p.vectors[c])), q.vecLo, q.vecSpan)
}

// graphPool is one query's pool with each member's nearest pool members
// (up to the largest k measured), ready to smooth with any k and mu.
type graphPool struct {
	q         *graphQuery
	ids       []int64
	s0        []float64
	nbrs      [][]poolEdge
	newcomers int            // pool members from graph expansion
	newcomer  map[int64]bool // which they are
	positive  int            // of them, scored above 0 by the fusion
}

type poolEdge struct {
	j int32
	w float64
}

func newGraphPool(p *Pipeline, q *graphQuery, graphs map[string]corpusGraph, kind string, n, expand, maxK int) *graphPool {
	gp := &graphPool{q: q, newcomer: map[int64]bool{}}
	at := map[int64]int{}
	add := func(c int64) {
		if _, ok := at[c]; !ok {
			at[c] = len(gp.ids)
			gp.ids = append(gp.ids, c)
		}
	}
	n = min(n, len(q.fused))
	for _, r := range q.fused[:n] {
		add(r.ChunkID)
	}
	graph := graphs[strings.Fields(kind)[0]]
	for _, r := range q.fused[:min(10, n)] {
		e := 0
		for _, nb := range graph[r.ChunkID] {
			if e == expand {
				break
			}
			c := int64(nb.id)
			if q.excluded[p.chunkDoc[c]] {
				continue // as if the collection did not hold it
			}
			e++
			if _, ok := at[c]; !ok {
				gp.newcomers++
				gp.newcomer[c] = true
				add(c)
			}
		}
	}
	gp.s0 = make([]float64, len(gp.ids))
	for i, c := range gp.ids {
		gp.s0[i] = q.ownScore(p, c)
		if i >= n && gp.s0[i] > 0 {
			if _, ok := q.inFused[c]; !ok {
				gp.positive++
			}
		}
	}
	gp.nbrs = make([][]poolEdge, len(gp.ids))
	for i, c := range gp.ids {
		var edges []poolEdge
		if kind == "cos pool" {
			for j, d := range gp.ids {
				if j != i {
					edges = append(edges, poolEdge{int32(j), float64(embed.Dot(p.vectors[c], p.vectors[d]))})
				}
			}
			sort.SliceStable(edges, func(a, b int) bool { return edges[a].w > edges[b].w })
			edges = edges[:min(maxK, len(edges))]
		} else {
			for _, nb := range graph[c] {
				if j, ok := at[int64(nb.id)]; ok && len(edges) < maxK {
					edges = append(edges, poolEdge{int32(j), float64(nb.w)})
				}
			}
		}
		for e := range edges {
			edges[e].w = math.Max(0, edges[e].w)
		}
		gp.nbrs[i] = edges
	}
	return gp
}

// rank smooths the pool's scores over each member's k nearest pool
// members (iters rounds anchored at s0, Diaz's iteration) and returns the
// pool by smoothed score, then the rest of the fused list in its order.
func (gp *graphPool) rank(k int, mu float64, iters int) []int64 {
	s := slices.Clone(gp.s0)
	for range iters {
		next := make([]float64, len(s))
		for i := range s {
			num, den := 0.0, 0.0
			for _, e := range gp.nbrs[i][:min(k, len(gp.nbrs[i]))] {
				num += e.w * s[e.j]
				den += e.w
			}
			avg := gp.s0[i]
			if den > 0 {
				avg = num / den
			}
			next[i] = (1-mu)*gp.s0[i] + mu*avg
		}
		s = next
	}
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] > s[idx[b]] })
	out := make([]int64, 0, len(gp.q.fused)+len(s))
	in := make(map[int64]bool, len(s))
	for _, i := range idx {
		out = append(out, gp.ids[i])
		in[gp.ids[i]] = true
	}
	for _, r := range gp.q.fused {
		if !in[r.ChunkID] {
			out = append(out, r.ChunkID)
		}
	}
	return out
}

// graphBench is the setup BenchmarkGraphSmoothing shares across its runs
// (building the pipeline takes most of a minute).
var graphBench struct {
	once   sync.Once
	p      *Pipeline
	graphs map[string]corpusGraph
	qs     []*graphQuery
	err    error
}

// BenchmarkGraphSmoothing is the query-time cost of the second stage
// alone, one claim an op (cycling through the 809): pool, its neighbour
// lists, smoothing and sort; the graphs are built beforehand, as an index
// would hold them.
//
//	BMCIS_EVAL_SEM=graph go test ./experiments/retrieval -run '^$' -bench BenchmarkGraphSmoothing -count 5
func BenchmarkGraphSmoothing(b *testing.B) {
	if os.Getenv("BMCIS_EVAL_SEM") != "graph" {
		b.Skip("set BMCIS_EVAL_SEM=graph")
	}
	dir := sciFactDir()
	if _, err := os.Stat(dir); err != nil {
		b.Skipf("SciFact not found at %s: %v", dir, err)
	}
	graphBench.once.Do(func() {
		ctx := context.Background()
		ds, err := eval.LoadBEIR(dir, "train")
		if err != nil {
			graphBench.err = fmt.Errorf("load SciFact: %w", err)
			return
		}
		cfg := DefaultConfig()
		cfg.Embed.Contrastive.Seed = 1
		p, err := Build(ctx, ds, cfg)
		if err != nil {
			graphBench.err = fmt.Errorf("build: %w", err)
			return
		}
		cands, _, err := p.candidates(ctx, ds, 100)
		if err != nil {
			graphBench.err = fmt.Errorf("candidates: %w", err)
			return
		}
		graphBench.p = p
		graphBench.graphs = map[string]corpusGraph{"cos": cosineGraph(p.vectors, 16), "bm25": bm25Graph(p, 16)}
		qs := graphQueries(ctx, b, p, ds, cands, nil)
		for _, q := range ds.Queries {
			if gq, ok := qs[q.ID]; ok {
				graphBench.qs = append(graphBench.qs, gq)
			}
		}
	})
	require.NoError(b, graphBench.err)
	for _, s := range []graphSetting{
		{graph: "cos pool", n: 50, k: 5, mu: 0.1, iters: 2},
		{graph: "cos pool", n: 100, k: 5, mu: 0.1, iters: 1},
		{graph: "bm25 corpus", n: 50, expand: 5, k: 5, mu: 0.1, iters: 1},
		{graph: "bm25 corpus", n: 100, expand: 10, k: 10, mu: 0.1, iters: 1},
		{graph: "cos corpus", n: 100, expand: 10, k: 10, mu: 0.1, iters: 1},
	} {
		b.Run(strings.ReplaceAll(s.String(), " ", "_"), func(b *testing.B) {
			i := 0
			for b.Loop() {
				q := graphBench.qs[i%len(graphBench.qs)]
				i++
				gp := newGraphPool(graphBench.p, q, graphBench.graphs, s.graph, s.n, s.expand, s.k)
				_ = gp.rank(s.k, s.mu, s.iters)
			}
		})
	}
}
