package retrieval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/eval"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/stretchr/testify/require"
)

// Learned fusion (issue 14): per-candidate features over the union of the
// two top-100 lists, a few query-level features, small linear scorers fitted
// by coordinate ascent on nDCG@10 (RankLib style), reported in-sample and
// out-of-fold (5-fold cross-validation over the training queries).
//
//	BMCIS_EVAL_SEM=ltr go test ./experiments/retrieval -run TestLearnedFusion -v -timeout 60m

// Candidate features (index into ltrCand.f).
const (
	fBMmm    = iota // BM25 min-max over the BM25 list, 0 when absent
	fVecMM          // feedback cosine min-max over the vector list, 0 when absent
	fBMtop          // BM25 / the query's top BM25, 0 when absent
	fBMz            // BM25 z-score over the BM25 list, the list's lowest when absent
	fCosFB          // feedback cosine (every candidate: needs its vector)
	fCos            // cosine without feedback (every candidate)
	fBMrr           // 6/(5+BM25 rank), 0 when absent
	fVecRR          // 6/(5+vector rank), 0 when absent
	fBoth           // 1 when both lists hold it
	fCosFBmm        // feedback cosine min-max over the whole union
	fVecZ           // feedback cosine z-score over the vector list, lowest when absent
	fBMfull         // BM25 / top for every candidate (vector-only ones scored too)
	fCover          // idf-weighted share of the distinct query terms the chunk holds
	fCoverN         // share of the distinct query terms the chunk holds
	nFeat
)

var featNames = [nFeat]string{"bmMM", "vecMM", "bmTop", "bmZ", "cosFB", "cos", "bmRR", "vecRR", "both", "cosFBmmU", "vecZ", "bmFull", "cover", "coverN"}

// Query features (index into ltrQuery.q), roughly in 0..1.
const (
	qLen      = iota // analyzed query terms / 10
	qGap             // (top1 - top2) / top1 of BM25
	qOverlap         // |BM25 top 10 ∩ vector top 10| / 10
	qIDF             // mean idf of the query terms / 10
	qVecGap          // (top1 - top10) cosine of the vector list
	qTopBM           // the top BM25 score / 30 (absolute)
	qTopCos          // cosine (no feedback) of the query with the BM25 top hit
	qTopVecMM        // the BM25 top hit's min-max score on the vector side
	qTopCover        // idf-weighted query-term coverage of the BM25 top hit
	qVecTop          // the top feedback cosine of the vector list
	nQFeat
)

var qFeatNames = [nQFeat]string{"len", "gap", "overlap10", "idf", "vecGap10", "topBM", "topCos", "topVecMM", "topCover", "vecTop"}

type ltrCand struct {
	id   int64
	doc  int32
	gain int8
	f    [nFeat]float64
}

type ltrQuery struct {
	id    string
	cands []ltrCand
	q     [nQFeat]float64
	idcg  float64
	nrel  int
	// scratch
	s   []float64
	idx []int
}

// ltrModel scores a candidate with parameters w.
type ltrModel struct {
	name  string
	init  []float64
	score func(q *ltrQuery, c *ltrCand, w []float64) float64
}

// eval returns nDCG@10 (and Recall@100 when recall) of the query ranked by
// the model's score, documents deduplicated at their best chunk.
func (q *ltrQuery) eval(m *ltrModel, w []float64, recall bool) (float64, float64) {
	if q.s == nil {
		q.s = make([]float64, len(q.cands))
		q.idx = make([]int, len(q.cands))
	}
	for i := range q.cands {
		q.s[i] = m.score(q, &q.cands[i], w)
		q.idx[i] = i
	}
	sort.Slice(q.idx, func(a, b int) bool {
		x, y := q.idx[a], q.idx[b]
		if q.s[x] != q.s[y] {
			return q.s[x] > q.s[y]
		}
		return q.cands[x].id < q.cands[y].id
	})
	seen := make(map[int32]bool, 16)
	dcg, found, rank := 0.0, 0, 0
	limit := 10
	if recall {
		limit = 100
	}
	for _, i := range q.idx {
		c := &q.cands[i]
		if seen[c.doc] {
			continue
		}
		seen[c.doc] = true
		if c.gain > 0 {
			if rank < 10 {
				dcg += float64(c.gain) / math.Log2(float64(rank+2))
			}
			found++
		}
		rank++
		if rank >= limit {
			break
		}
	}
	nd := 0.0
	if q.idcg > 0 {
		nd = dcg / q.idcg
	}
	r := 0.0
	if q.nrel > 0 {
		r = float64(found) / float64(q.nrel)
	}
	return nd, r
}

func ltrMean(qs []*ltrQuery, m *ltrModel, w []float64) float64 {
	s := 0.0
	for _, q := range qs {
		n, _ := q.eval(m, w, false)
		s += n
	}
	return s / float64(len(qs))
}

// ltrMetrics is the mean over every judged query (all of them are in qs).
func ltrMetrics(qs []*ltrQuery, m *ltrModel, w []float64) eval.Metrics {
	var out eval.Metrics
	for _, q := range qs {
		n, r := q.eval(m, w, true)
		out.NDCG10 += n
		out.Recall100 += r
	}
	out.Queries = len(qs)
	out.NDCG10 /= float64(len(qs))
	out.Recall100 /= float64(len(qs))
	return out
}

// coordAscent maximises mean nDCG@10 over qs, one parameter at a time with
// steps of several sizes in both directions (RankLib's coordinate ascent,
// without restarts: the models have few parameters and a fixed anchor).
func coordAscent(qs []*ltrQuery, m *ltrModel) ([]float64, float64) {
	w := append([]float64(nil), m.init...)
	best := ltrMean(qs, m, w)
	steps := []float64{0.003, 0.01, 0.03, 0.1, 0.3, 1, 3}
	for round := 0; round < 8; round++ {
		improved := false
		for j := range w {
			for _, st := range steps {
				for _, sign := range []float64{1, -1} {
					old := w[j]
					w[j] = old + sign*st
					if v := ltrMean(qs, m, w); v > best+1e-6 {
						best, improved = v, true
					} else {
						w[j] = old
					}
				}
			}
		}
		if !improved {
			break
		}
	}
	return w, best
}

// ltrSetup skips unless BMCIS_EVAL_SEM=ltr, then builds the default
// pipeline and the features of every training query.
func ltrSetup(t *testing.T) []*ltrQuery {
	ds := sweepData(t, "ltr")
	p, err := Build(context.Background(), ds, DefaultConfig())
	require.NoError(t, err)
	return ltrData(t, ds, p)
}

// ltrData computes both lists and the features of every training query.
func ltrData(t *testing.T, ds *eval.Dataset, p *Pipeline) []*ltrQuery {
	ctx := context.Background()
	const K = 100
	fbo := fusion.BuiltinOptions()
	docIdx := map[string]int32{}
	for _, d := range p.chunkDoc {
		if _, ok := docIdx[d]; !ok {
			docIdx[d] = int32(len(docIdx))
		}
	}
	n := p.index.Len()
	df := map[string]int{}
	p.index.EachTerm(func(term string, d int) { df[term] = d })
	ts := &termScorer{p: p, cache: map[string]map[int64]float64{}}
	var out []*ltrQuery
	for _, qq := range ds.Queries {
		terms := p.analyzer.Terms(qq.Text)
		full := map[int64]float64{}
		for _, h := range p.index.Search(terms, bm25.SearchOptions{K: n}) {
			full[h.ChunkID] = h.Score
		}
		distinct := map[string]float64{}
		idfSum := 0.0
		for _, tm := range terms {
			if _, ok := distinct[tm]; !ok {
				distinct[tm] = bm25.IDF(n, df[tm])
				idfSum += distinct[tm]
			}
		}
		hits := p.index.Search(terms, bm25.SearchOptions{K: K})
		bm := make([]fusion.Candidate, len(hits))
		for i, h := range hits {
			bm[i] = fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score}
		}
		qv, err := p.model.Embed(ctx, []string{qq.Text})
		require.NoError(t, err)
		var fbv [][]float32
		for i := 0; i < min(fbo.FeedbackChunks, len(bm)); i++ {
			fbv = append(fbv, p.vectors[bm[i].ChunkID])
		}
		qfb := embed.Feedback(qv[0], fbv, float32(fbo.FeedbackWeight))
		vec := exactKNN(p.vectors, qfb, K)

		q := &ltrQuery{id: qq.ID}
		rels := ds.Qrels[qq.ID]
		gains := []int{}
		for _, g := range rels {
			if g > 0 {
				gains = append(gains, g)
				q.nrel++
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(gains)))
		for i, g := range gains {
			if i < 10 {
				q.idcg += float64(g) / math.Log2(float64(i+2))
			}
		}
		// Query features.
		q.q[qLen] = float64(len(terms)) / 10
		if len(bm) > 1 && bm[0].Score > 0 {
			q.q[qGap] = (bm[0].Score - bm[1].Score) / bm[0].Score
		}
		top := map[int64]bool{}
		for i := 0; i < min(10, len(bm)); i++ {
			top[bm[i].ChunkID] = true
		}
		for i := 0; i < min(10, len(vec)); i++ {
			if top[vec[i].ChunkID] {
				q.q[qOverlap] += 0.1
			}
		}
		if len(terms) > 0 {
			s := 0.0
			for _, tm := range terms {
				s += bm25.IDF(n, df[tm])
			}
			q.q[qIDF] = s / float64(len(terms)) / 10
		}
		if len(vec) >= 10 {
			q.q[qVecGap] = vec[0].Score - vec[9].Score
		}
		// Candidate features.
		stats := func(l []fusion.Candidate) (lo, hi, mean, sd float64) {
			lo, hi = math.Inf(1), math.Inf(-1)
			for _, c := range l {
				lo, hi = math.Min(lo, c.Score), math.Max(hi, c.Score)
				mean += c.Score
			}
			mean /= float64(len(l))
			for _, c := range l {
				sd += (c.Score - mean) * (c.Score - mean)
			}
			sd = math.Sqrt(sd / float64(len(l)))
			if sd == 0 {
				sd = 1
			}
			return
		}
		byID := map[int64]int{}
		get := func(id int64) *ltrCand {
			if i, ok := byID[id]; ok {
				return &q.cands[i]
			}
			byID[id] = len(q.cands)
			doc := p.chunkDoc[id]
			c := ltrCand{id: id, doc: docIdx[doc], gain: int8(rels[doc])}
			c.f[fCosFB] = float64(embed.Dot(p.vectors[id], qfb))
			c.f[fCos] = float64(embed.Dot(p.vectors[id], qv[0]))
			if len(bm) > 0 && bm[0].Score > 0 {
				c.f[fBMfull] = full[id] / bm[0].Score
			}
			for tm, idf := range distinct {
				if _, ok := ts.term(tm)[id]; ok {
					c.f[fCover] += idf / idfSum
					c.f[fCoverN] += 1 / float64(len(distinct))
				}
			}
			q.cands = append(q.cands, c)
			return &q.cands[len(q.cands)-1]
		}
		// listFeats sets a list's min-max, rank and z-score features; a
		// candidate absent from the list gets 0, 0 and the list's lowest z
		// (filled in below, once the union is complete).
		lowZ := map[int]float64{}
		listFeats := func(l []fusion.Candidate, mmF, rrF, zF int) {
			if len(l) == 0 {
				return
			}
			lo, hi, mean, sd := stats(l)
			for i, h := range l {
				c := get(h.ChunkID)
				c.f[mmF] = 1
				if hi > lo {
					c.f[mmF] = (h.Score - lo) / (hi - lo)
				}
				c.f[rrF] = 6 / float64(5+i+1)
				c.f[zF] = (h.Score - mean) / sd
			}
			lowZ[zF] = (lo - mean) / sd
		}
		listFeats(bm, fBMmm, fBMrr, fBMz)
		listFeats(vec, fVecMM, fVecRR, fVecZ)
		for i := range q.cands {
			c := &q.cands[i]
			if c.f[fBMrr] == 0 {
				c.f[fBMz] = lowZ[fBMz]
			}
			if c.f[fVecRR] == 0 {
				c.f[fVecZ] = lowZ[fVecZ]
			}
			if c.f[fVecRR] > 0 && c.f[fBMrr] > 0 {
				c.f[fBoth] = 1
			}
		}
		for _, h := range bm {
			get(h.ChunkID).f[fBMtop] = h.Score / bm[0].Score
		}
		ulo, uhi := math.Inf(1), math.Inf(-1)
		for i := range q.cands {
			ulo, uhi = math.Min(ulo, q.cands[i].f[fCosFB]), math.Max(uhi, q.cands[i].f[fCosFB])
		}
		for i := range q.cands {
			if uhi > ulo {
				q.cands[i].f[fCosFBmm] = (q.cands[i].f[fCosFB] - ulo) / (uhi - ulo)
			}
		}
		if len(bm) > 0 {
			q.q[qTopBM] = bm[0].Score / 30
			c := &q.cands[byID[bm[0].ChunkID]]
			q.q[qTopCos] = c.f[fCos]
			q.q[qTopVecMM] = c.f[fVecMM]
			q.q[qTopCover] = c.f[fCover]
		}
		if len(vec) > 0 {
			q.q[qVecTop] = vec[0].Score
		}
		out = append(out, q)
	}
	return out
}

// pairwiseFit fits a linear scorer on standardised features by pairwise
// logistic loss (RankNet with a linear model) with L2 penalty lambda: pairs
// (relevant, non-relevant) of one query; when topNeg > 0 only the
// non-relevant candidates within the top topNeg of the shipped convex
// ranking (the ones that matter for nDCG@10). feat maps a candidate to
// its feature vector. Returns the weights in the original feature scale.
func pairwiseFit(qs []*ltrQuery, feat func(q *ltrQuery, c *ltrCand) []float64, lambda float64, topNeg int) []float64 {
	base := linModel("convex", fBMmm, []int{fVecMM}, nil)
	var pairs [][]float64
	var dim int
	for _, q := range qs {
		q.eval(base, []float64{0.3 / 0.7}, false)
		inTop := map[int]bool{}
		for r, i := range q.idx {
			if topNeg > 0 && r >= topNeg {
				break
			}
			inTop[i] = true
		}
		xs := make([][]float64, len(q.cands))
		for i := range q.cands {
			xs[i] = feat(q, &q.cands[i])
			dim = len(xs[i])
		}
		for i := range q.cands {
			if q.cands[i].gain <= 0 {
				continue
			}
			for j := range q.cands {
				if q.cands[j].gain >= q.cands[i].gain || (topNeg > 0 && !inTop[j]) {
					continue
				}
				d := make([]float64, dim)
				for k := range d {
					d[k] = xs[i][k] - xs[j][k]
				}
				pairs = append(pairs, d)
			}
		}
	}
	// Scale each dimension by its standard deviation over pair differences.
	sd := make([]float64, dim)
	for _, d := range pairs {
		for k, x := range d {
			sd[k] += x * x
		}
	}
	for k := range sd {
		sd[k] = math.Sqrt(sd[k] / float64(len(pairs)))
		if sd[k] == 0 {
			sd[k] = 1
		}
	}
	w := make([]float64, dim)
	g := make([]float64, dim)
	lr := 1.0
	for it := 0; it < 300; it++ {
		for k := range g {
			g[k] = lambda * w[k]
		}
		for _, d := range pairs {
			z := 0.0
			for k, x := range d {
				z += w[k] * x / sd[k]
			}
			// d/dz log(1+exp(-z)) = -1/(1+exp(z))
			s := -1 / (1 + math.Exp(z))
			for k, x := range d {
				g[k] += s * x / sd[k] / float64(len(pairs))
			}
		}
		for k := range w {
			w[k] -= lr * g[k]
		}
	}
	for k := range w {
		w[k] /= sd[k]
	}
	return w
}

func TestPairwiseFusion(t *testing.T) {
	qs := ltrSetup(t)
	listFeats := []int{fBMmm, fVecMM, fBMtop, fBMz, fBMrr, fVecRR, fBoth, fVecZ}
	allFeats := []int{fBMmm, fVecMM, fBMtop, fBMz, fBMrr, fVecRR, fBoth, fVecZ, fCosFB, fCos, fCosFBmm, fBMfull, fCover, fCoverN}
	inter := func(feats []int, qfs []int) func(q *ltrQuery, c *ltrCand) []float64 {
		return func(q *ltrQuery, c *ltrCand) []float64 {
			x := make([]float64, 0, len(feats)+len(qfs))
			for _, f := range feats {
				x = append(x, c.f[f])
			}
			for _, qf := range qfs {
				x = append(x, c.f[fVecMM]*q.q[qf])
			}
			return x
		}
	}
	allQF := []int{qLen, qGap, qOverlap, qIDF, qVecGap, qTopBM, qTopCos, qTopVecMM, qTopCover, qVecTop}
	variants := []struct {
		name string
		feat func(q *ltrQuery, c *ltrCand) []float64
	}{
		{"convex pair (bmMM, vecMM)", inter([]int{fBMmm, fVecMM}, nil)},
		{"list features", inter(listFeats, nil)},
		{"all features", inter(allFeats, nil)},
		{"convex + vecMM x query feats", inter([]int{fBMmm, fVecMM}, allQF)},
		{"all features + vecMM x query feats", inter(allFeats, allQF)},
	}
	for _, v := range variants {
		for _, topNeg := range []int{0, 30} {
			for _, lambda := range []float64{1e-4, 1e-2} {
				m := &ltrModel{name: v.name, score: func(q *ltrQuery, c *ltrCand, w []float64) float64 {
					s := 0.0
					for k, x := range v.feat(q, c) {
						s += w[k] * x
					}
					return s
				}}
				w := pairwiseFit(qs, v.feat, lambda, topNeg)
				in := ltrMetrics(qs, m, w)
				oof, _ := crossValidate(qs, m, func(train []*ltrQuery) []float64 { return pairwiseFit(train, v.feat, lambda, topNeg) })
				t.Logf("pairwise %-36s neg top%-3d l2 %.0e | in-sample %.4f / %.4f | 5-fold OOF %.4f / %.4f | w=%s",
					v.name, topNeg, lambda, in.NDCG10, in.Recall100, oof.NDCG10, oof.Recall100, fmtW(w))
			}
		}
	}
}

// linModel scores anchor + sum w_i * feature_i (the anchor feature has
// weight 1: nDCG is scale invariant). inter lists vector features whose
// weight also varies with query features: w * (v0 + sum v_j q_j).
func linModel(name string, anchor int, feats []int, init []float64) *ltrModel {
	return &ltrModel{name: name, init: init, score: func(q *ltrQuery, c *ltrCand, w []float64) float64 {
		s := c.f[anchor]
		for i, f := range feats {
			s += w[i] * c.f[f]
		}
		return s
	}}
}

// perQueryModel: anchor + (w0 + sum_j w_j q_j) * vecFeat, then extra
// linear features.
func perQueryModel(name string, anchor, vecFeat int, qfs []int, extra []int, init []float64) *ltrModel {
	return &ltrModel{name: name, init: init, score: func(q *ltrQuery, c *ltrCand, w []float64) float64 {
		vw := w[0]
		for j, qf := range qfs {
			vw += w[1+j] * q.q[qf]
		}
		s := c.f[anchor] + vw*c.f[vecFeat]
		for i, f := range extra {
			s += w[1+len(qfs)+i] * c.f[f]
		}
		return s
	}}
}

func zeros(n int, first float64) []float64 {
	w := make([]float64, n)
	w[0] = first
	return w
}

func TestLearnedFusion(t *testing.T) {
	qs := ltrSetup(t)
	t.Logf("%d queries, mean union size %.1f", len(qs), func() float64 {
		s := 0
		for _, q := range qs {
			s += len(q.cands)
		}
		return float64(s) / float64(len(qs))
	}())

	// Shipped convex 0.7: bmMM + (0.3/0.7) vecMM.
	allQF := []int{qLen, qGap, qOverlap, qIDF, qVecGap}
	topQF := []int{qTopBM, qTopCos, qTopVecMM, qTopCover, qVecTop}
	models := []*ltrModel{
		linModel("bm25 only", fBMmm, nil, nil),
		linModel("convex (vecMM)", fBMmm, []int{fVecMM}, []float64{0.3 / 0.7}),
		linModel("convex z-scores", fBMz, []int{fVecZ}, []float64{0.3}),
		linModel("interp bmTop + cosFB (all cands)", fBMtop, []int{fCosFB}, []float64{0.5}),
		linModel("interp bmTop + cosFB + cos", fBMtop, []int{fCosFB, fCos}, []float64{0.5, 0}),
		linModel("convex + both + ranks", fBMmm, []int{fVecMM, fBoth, fBMrr, fVecRR}, []float64{0.3 / 0.7, 0, 0, 0}),
		linModel("list features (no extra cosines)", fBMmm, []int{fVecMM, fBMtop, fBMz, fBMrr, fVecRR, fBoth, fVecZ}, []float64{0.3 / 0.7, 0, 0, 0, 0, 0, 0}),
		linModel("all features", fBMmm, []int{fVecMM, fBMtop, fBMz, fBMrr, fVecRR, fBoth, fVecZ, fCosFB, fCos, fCosFBmm}, []float64{0.3 / 0.7, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
		perQueryModel("per-query alpha: overlap", fBMmm, fVecMM, []int{qOverlap}, nil, zeros(2, 0.3/0.7)),
		perQueryModel("per-query alpha: gap", fBMmm, fVecMM, []int{qGap}, nil, zeros(2, 0.3/0.7)),
		perQueryModel("per-query alpha: overlap+gap", fBMmm, fVecMM, []int{qOverlap, qGap}, nil, zeros(3, 0.3/0.7)),
		perQueryModel("per-query alpha: all query feats", fBMmm, fVecMM, allQF, nil, zeros(1+len(allQF), 0.3/0.7)),
		perQueryModel("per-query interp cosFB: all qf", fBMtop, fCosFB, allQF, nil, zeros(1+len(allQF), 0.5)),
		perQueryModel("per-query alpha all qf + both/ranks", fBMmm, fVecMM, allQF, []int{fBoth, fBMrr, fVecRR}, zeros(1+len(allQF)+3, 0.3/0.7)),
	}
	models = append(models,
		linModel("convex + bmFull", fBMmm, []int{fVecMM, fBMfull}, []float64{0.3 / 0.7, 0}),
		linModel("convex + cover", fBMmm, []int{fVecMM, fCover}, []float64{0.3 / 0.7, 0}),
		linModel("convex + cover + coverN + bmFull", fBMmm, []int{fVecMM, fCover, fCoverN, fBMfull}, []float64{0.3 / 0.7, 0, 0, 0}),
		perQueryModel("per-query alpha: top-hit feats", fBMmm, fVecMM, topQF, nil, zeros(1+len(topQF), 0.3/0.7)),
		perQueryModel("per-query alpha: topVecMM", fBMmm, fVecMM, []int{qTopVecMM}, nil, zeros(2, 0.3/0.7)),
		perQueryModel("per-query alpha: topCos", fBMmm, fVecMM, []int{qTopCos}, nil, zeros(2, 0.3/0.7)),
		linModel("interp bmFull + cosFB + cover", fBMfull, []int{fCosFB, fCover, fCoverN}, []float64{0.5, 0, 0}),
	)
	// Oracle: the best convex alpha chosen per query (upper bound of any
	// per-query weighting of the shipped convex fusion).
	{
		cm := linModel("convex", fBMmm, []int{fVecMM}, nil)
		alphas := []float64{1, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3}
		or, orBin := 0.0, 0.0
		for _, q := range qs {
			best, bin := 0.0, 0.0
			for _, a := range alphas {
				v, _ := q.eval(cm, []float64{(1 - a) / a}, false)
				best = math.Max(best, v)
				if a == 1 || a == 0.7 {
					bin = math.Max(bin, v)
				}
			}
			or += best
			orBin += bin
		}
		t.Logf("oracle per-query alpha over %v: %.4f; oracle choice BM25 vs convex 0.7: %.4f", alphas, or/float64(len(qs)), orBin/float64(len(qs)))
	}
	if only := os.Getenv("BMCIS_EVAL_LTR"); only != "" {
		var keep []*ltrModel
		for _, m := range models {
			if strings.Contains(m.name, only) {
				keep = append(keep, m)
			}
		}
		models = keep
	}
	// Fixed fold assignment (seeded shuffle).
	// The shipped default's per-query nDCG@10 (convex 0.7, not re-fitted).
	shipped := make([]float64, len(qs))
	for i, q := range qs {
		shipped[i], _ = q.eval(linModel("shipped", fBMmm, []int{fVecMM}, nil), []float64{0.3 / 0.7}, false)
	}
	for _, m := range models {
		init := ltrMetrics(qs, m, m.init)
		w, in := coordAscent(qs, m)
		full := ltrMetrics(qs, m, w)
		// Out of fold: every query scored by the model fitted without it.
		oof, per := crossValidate(qs, m, func(train []*ltrQuery) []float64 {
			fw, _ := coordAscent(train, m)
			return fw
		})
		d, se := pairedDiff(per, shipped)
		t.Logf("%-40s init %.4f / %.4f | in-sample %.4f / %.4f (fit %.4f) | 5-fold OOF %.4f / %.4f (vs shipped %+.4f ± %.4f se) | w=%s",
			m.name, init.NDCG10, init.Recall100, full.NDCG10, full.Recall100, in, oof.NDCG10, oof.Recall100, d, se, fmtW(w))
	}
}

// cvFolds splits query indices 0..n-1 into five folds by a seeded
// shuffle (the same folds for every model): test sets, and for each fold
// the training set (the other four).
func cvFolds(n int) (test, train [][]int) {
	const folds = 5
	test, train = make([][]int, folds), make([][]int, folds)
	for i, pi := range rand.New(rand.NewPCG(14, 5)).Perm(n) {
		for f := 0; f < folds; f++ {
			if i%folds == f {
				test[f] = append(test[f], pi)
			} else {
				train[f] = append(train[f], pi)
			}
		}
	}
	return test, train
}

// crossValidate fits on four folds and scores the fifth, for each fold:
// the out-of-fold metrics over every query, and each query's out-of-fold
// nDCG@10 (by index in qs).
func crossValidate(qs []*ltrQuery, m *ltrModel, fit func(train []*ltrQuery) []float64) (eval.Metrics, []float64) {
	pick := func(idx []int) []*ltrQuery {
		out := make([]*ltrQuery, len(idx))
		for i, x := range idx {
			out[i] = qs[x]
		}
		return out
	}
	var oof eval.Metrics
	per := make([]float64, len(qs))
	test, train := cvFolds(len(qs))
	for f := range test {
		w := fit(pick(train[f]))
		for _, i := range test[f] {
			per[i], _ = qs[i].eval(m, w, false)
		}
		mt := ltrMetrics(pick(test[f]), m, w)
		oof.NDCG10 += mt.NDCG10 * float64(mt.Queries)
		oof.Recall100 += mt.Recall100 * float64(mt.Queries)
		oof.Queries += mt.Queries
	}
	oof.NDCG10 /= float64(oof.Queries)
	oof.Recall100 /= float64(oof.Queries)
	return oof, per
}

// pairedDiff is the mean and standard error of per-query differences a-b.
func pairedDiff(a, b []float64) (mean, se float64) {
	for i := range a {
		mean += a[i] - b[i]
	}
	mean /= float64(len(a))
	for i := range a {
		d := a[i] - b[i] - mean
		se += d * d
	}
	return mean, math.Sqrt(se/float64(len(a)-1)) / math.Sqrt(float64(len(a)))
}

func fmtW(w []float64) string {
	parts := make([]string, len(w))
	for i, x := range w {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// alphaTree is a depth-limited regression tree on query features that picks
// the convex alpha per leaf (the alpha with the best summed nDCG@10 of the
// leaf's training queries); nd[q][a] is query q's nDCG@10 at alphas[a].
type alphaTree struct {
	feat      int
	threshold float64
	leaf      int // alpha index when feat < 0
	lo, hi    *alphaTree
}

func (tr *alphaTree) alpha(q *ltrQuery) int {
	for tr.feat >= 0 {
		if q.q[tr.feat] < tr.threshold {
			tr = tr.lo
		} else {
			tr = tr.hi
		}
	}
	return tr.leaf
}

func bestLeaf(idx []int, nd [][]float64) (int, float64) {
	best, bestSum := 0, math.Inf(-1)
	for a := range nd[0] {
		s := 0.0
		for _, i := range idx {
			s += nd[i][a]
		}
		if s > bestSum {
			best, bestSum = a, s
		}
	}
	return best, bestSum
}

// fitAlphaTree grows a tree over queries idx, splitting at deciles of
// each query feature when the split improves the summed nDCG@10 and both
// sides keep at least minLeaf queries.
func fitAlphaTree(qs []*ltrQuery, idx []int, nd [][]float64, depth, minLeaf int) *alphaTree {
	leaf, leafSum := bestLeaf(idx, nd)
	tr := &alphaTree{feat: -1, leaf: leaf}
	if depth == 0 {
		return tr
	}
	bestSum := leafSum
	var bestLo, bestHi []int
	for f := 0; f < nQFeat; f++ {
		vals := make([]float64, len(idx))
		for k, i := range idx {
			vals[k] = qs[i].q[f]
		}
		sort.Float64s(vals)
		for d := 1; d < 10; d++ {
			th := vals[d*len(vals)/10]
			var lo, hi []int
			for _, i := range idx {
				if qs[i].q[f] < th {
					lo = append(lo, i)
				} else {
					hi = append(hi, i)
				}
			}
			if len(lo) < minLeaf || len(hi) < minLeaf {
				continue
			}
			_, ls := bestLeaf(lo, nd)
			_, hs := bestLeaf(hi, nd)
			if ls+hs > bestSum+1e-9 {
				bestSum, tr.feat, tr.threshold, bestLo, bestHi = ls+hs, f, th, lo, hi
			}
		}
	}
	if tr.feat >= 0 {
		tr.lo = fitAlphaTree(qs, bestLo, nd, depth-1, minLeaf)
		tr.hi = fitAlphaTree(qs, bestHi, nd, depth-1, minLeaf)
	}
	return tr
}

func (tr *alphaTree) String() string {
	if tr.feat < 0 {
		return fmt.Sprintf("a%d", tr.leaf)
	}
	return fmt.Sprintf("(%s<%.3f ? %s : %s)", qFeatNames[tr.feat], tr.threshold, tr.lo, tr.hi)
}

// TestAlphaTrees: per-query convex alpha from query features by small
// decision trees (the linear per-query weights of TestLearnedFusion cannot
// express thresholds).
func TestAlphaTrees(t *testing.T) {
	qs := ltrSetup(t)
	alphas := []float64{1, 0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4}
	cm := linModel("convex", fBMmm, []int{fVecMM}, nil)
	nd := make([][]float64, len(qs))
	for i, q := range qs {
		nd[i] = make([]float64, len(alphas))
		for a, al := range alphas {
			nd[i][a], _ = q.eval(cm, []float64{(1 - al) / al}, false)
		}
	}
	testF, trainF := cvFolds(len(qs))
	all := make([]int, len(qs))
	for i := range all {
		all[i] = i
	}
	for _, depth := range []int{0, 1, 2, 3} {
		for _, minLeaf := range []int{40, 100} {
			tr := fitAlphaTree(qs, all, nd, depth, minLeaf)
			in := 0.0
			for i, q := range qs {
				in += nd[i][tr.alpha(q)]
			}
			oof := 0.0
			for f := range testF {
				ft := fitAlphaTree(qs, trainF[f], nd, depth, minLeaf*4/5)
				for _, i := range testF[f] {
					oof += nd[i][ft.alpha(qs[i])]
				}
			}
			t.Logf("alpha tree depth %d min leaf %3d | in-sample %.4f | 5-fold OOF %.4f | alphas %v tree %s",
				depth, minLeaf, in/float64(len(qs)), oof/float64(len(qs)), alphas, tr)
		}
	}
}
