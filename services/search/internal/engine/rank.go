package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embed"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
	"github.com/bmcis/knowledge/services/search/internal/vecmath"
)

// rank computes the whole ranked candidate list of a query. The vector
// side (query embedding + HNSW query, which also returns its hits'
// vectors for duplicate detection) runs concurrently with BM25.
func (e *Engine) rank(ctx context.Context, query Query) (*Ranked, time.Duration, error) {
	q, mode, cats := query.Text, query.Mode, query.Categories
	qts := e.ix.Analyzer().QueryTerms(q)
	var terms, distinct []string
	for _, t := range qts {
		distinct = append(distinct, t.Term)
		for i := 0; i < t.Count; i++ {
			terms = append(terms, t.Term)
		}
	}
	k := e.cfg.Candidates
	useBM25 := mode != Vector
	useVec := mode != BM25
	cur := e.emb.Current()
	haveModel := cur != nil
	provider := e.cfg.Provider
	if cur != nil {
		provider = cur.Provider
	}
	fopts := e.cfg.fusionFor(provider, cur)
	// Vector-side feedback needs the top BM25 hits' vectors; the builtin
	// model embeds their text in-process in microseconds, while a remote
	// provider would add a network call per query, so only builtin does it.
	feedback := mode == Hybrid && fopts.FeedbackChunks > 0 && provider == embedding.ProviderBuiltin
	fbHits := make(chan feedbackHits, 1)

	scope := e.readScope(cats, query.Access)
	vecCh := make(chan vecOut, 1)
	if useVec {
		fb := sync.OnceValue(func() feedbackHits { return <-fbHits })
		vs := vectorSide{q: q, mode: mode, k: k, scope: scope, feedback: feedback, cur: cur,
			feedbackWeight: fopts.FeedbackWeight, fb: fb} // fopts may be replaced after the goroutine reports
		go func() { vecCh <- e.vectorRetrying(ctx, vs) }()
	}
	var bmHits []bm25.Hit
	type embOut struct {
		vecs   map[int64][]float32
		dbTime time.Duration
		err    error
	}
	embCh := make(chan embOut, 1)
	if useBM25 {
		t0 := time.Now()
		// The caller's own set, not the scope's: a restricted document
		// loaded since readScope must not reach the feedback texts.
		bmHits = e.ix.SearchBM25(terms, cats, query.Access, k)
		e.m.Stage.WithLabelValues("bm25").Observe(time.Since(t0).Seconds())
		if feedback {
			n := min(len(bmHits), fopts.FeedbackChunks)
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = bmHits[i].ChunkID
			}
			fb := feedbackHits{ids: ids}
			for _, c := range e.ix.Chunks(ids) {
				if c != nil && !c.TextInDatabase {
					fb.texted = append(fb.texted, c)
				}
			}
			fbHits <- fb
		}
		// Vectors of the top BM25 hits, for near-duplicate detection, in
		// keyword mode only: in hybrid mode the HNSW query returns the
		// vectors of its hits, and a second concurrent query would slow it
		// down more than the extra duplicates it could find are worth.
		w := min(len(bmHits), e.cfg.DedupWindow)
		if haveModel && w > 1 && !useVec {
			ids := make([]int64, w)
			for i := range ids {
				ids[i] = bmHits[i].ChunkID
			}
			// The mirror holds them all but those stored since it last
			// caught up: only those are read.
			held, missing := e.mirroredVectors(cur.Row, ids)
			if len(missing) == 0 {
				embCh <- embOut{vecs: held}
			} else {
				go func() {
					dctx, cancel := context.WithTimeout(ctx, e.cfg.DBTimeout)
					defer cancel()
					t1 := time.Now()
					vecs, err := e.st.Embeddings(dctx, missing)
					d := time.Since(t1)
					e.m.Stage.WithLabelValues("dedup_vectors").Observe(d.Seconds())
					if err != nil {
						err = fmt.Errorf("read vectors for duplicates: %w", err)
					} else {
						for id, v := range held {
							vecs[id] = v
						}
					}
					embCh <- embOut{vecs: vecs, dbTime: d, err: err}
				}()
			}
		} else {
			embCh <- embOut{}
		}
	} else {
		embCh <- embOut{}
	}
	var vo vecOut
	if useVec {
		vo = <-vecCh
	}
	eo := <-embCh
	dbTime := max(vo.dbTime, eo.dbTime)
	if vo.err != nil {
		return nil, dbTime, vo.err
	}
	if eo.err != nil {
		return nil, dbTime, eo.err
	}

	bmC := make([]fusion.Candidate, 0, len(bmHits))
	for _, h := range bmHits {
		bmC = append(bmC, fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score})
	}
	vectors := eo.vecs
	if vectors == nil {
		vectors = map[int64][]float32{}
	}
	vecC := make([]fusion.Candidate, 0, len(vo.hits))
	for i, h := range vo.hits {
		vecC = append(vecC, fusion.Candidate{ChunkID: h.ChunkID, Score: h.Cosine})
		if i < e.cfg.DedupWindow && h.Vector != nil {
			vectors[h.ChunkID] = h.Vector
		}
	}
	var fused []fusion.Result
	switch mode {
	case BM25:
		fused = fusion.FromBM25(bmC)
	case Vector:
		fused = fusion.FromVector(vecC)
	default:
		if vo.active != nil && vo.active != cur {
			// The model changed since the query began: fuse with the preset
			// of the one that embedded it.
			fopts = e.cfg.fusionFor(vo.provider, vo.active)
		}
		fused = fusion.Fuse(bmC, vecC, fopts)
	}
	if vo.query != nil {
		similarityToQuery(fused, vo.query, vo.hits)
	}
	// Keep what this replica has loaded: a vector hit committed after the
	// last feed poll is left out until the poll brings it in. The access
	// test repeats the retrievers' against this replica's records, the
	// view it answers from: a list changed in the database after the last
	// poll applies here once the poll brings it in, never half.
	ids := make([]int64, len(fused))
	for i, r := range fused {
		ids[i] = r.ChunkID
	}
	recs := e.ix.Chunks(ids)
	kept := fused[:0]
	keptRecs := recs[:0]
	for i, r := range fused {
		// An unrestricted caller's test reads no record: each one read
		// is a cache miss, and a list holds up to twice Candidates.
		if recs[i] != nil && (query.Access == nil || access.Allows(query.Access, recs[i].Doc.Access)) {
			kept = append(kept, r)
			keptRecs = append(keptRecs, recs[i])
		}
	}
	fused, recs = kept, keptRecs

	t0 := time.Now()
	dups := e.duplicates(fused, vectors)
	e.m.Stage.WithLabelValues("dedup").Observe(time.Since(t0).Seconds())

	rk := &Ranked{QueryTerms: lowerAll(analysis.OriginalWords(qts, distinct)), Results: make([]Result, len(fused)),
		degraded: vo.degraded, qts: qts, dups: dups}
	var others []int // results BM25 did not return: their terms from the index, under one lock
	for i, r := range fused {
		var m []string
		if r.BM25Rank > 0 {
			// bmC is bmHits, one for one, and BM25's hits are distinct.
			m = bmHits[r.BM25Rank-1].MatchedTerms
		} else {
			others = append(others, i)
		}
		rk.Results[i] = Result{Chunk: recs[i], Result: r, terms: m}
	}
	if len(others) > 0 {
		ids := make([]int64, len(others))
		for j, i := range others {
			ids[j] = fused[i].ChunkID
		}
		for j, terms := range e.ix.MatchedTerms(ids, distinct) {
			rk.Results[others[j]].terms = terms
		}
	}
	return rk, dbTime, nil
}

// vecOut is the vector side's answer.
type vecOut struct {
	hits []store.VectorHit
	// query is the query's own vector when feedback moved the one searched
	// with: results report their similarity to the query, not to its
	// feedback (which holds the top BM25 hits themselves).
	query    []float32
	provider string
	active   *embedding.Active // the model that embedded the query
	dbTime   time.Duration
	err      error
	degraded bool
}

// vectorSide is one query's vector retrieval.
type vectorSide struct {
	q              string
	mode           Mode
	k              int
	scope          readScope
	feedback       bool
	feedbackWeight float64
	cur            *embedding.Active // the model when ranking began
	fb             func() feedbackHits
}

// vectorRetrying runs the vector side; when another replica has switched
// the active model since this one loaded its own, it waits (at most
// modelSwitchWait) for this replica to load the new model and runs it once
// more. A query embedded by one model is never compared with another's
// vectors: if the model is still not loaded, hybrid ranks by BM25 alone
// (not cached) and vector mode answers ErrModelChanging.
func (e *Engine) vectorRetrying(ctx context.Context, vs vectorSide) vecOut {
	out := e.vectorSearch(ctx, vs)
	if !errors.Is(out.err, store.ErrModelChanged) {
		return out
	}
	if err := e.awaitModel(ctx, out.active); err != nil {
		if ctx.Err() != nil {
			out.err = ctx.Err()
			return out
		}
		logging.FromContext(ctx).Warn("query embedded by a model no longer active, and this replica has not loaded the new one",
			"model_row", out.active.Row, "waited", min(modelSwitchWait, e.cfg.DBTimeout).String())
	} else {
		first := out.dbTime
		out = e.vectorSearch(ctx, vs)
		out.dbTime += first
	}
	if errors.Is(out.err, store.ErrModelChanged) {
		if vs.mode == Vector {
			out.err = ErrModelChanging
		} else {
			out.err, out.hits, out.degraded = nil, nil, true
		}
	}
	return out
}

// modelSwitchWait bounds how long a query waits for its replica to load a
// model another replica activated: the change feed notifies at once and
// loading takes well under this; a shorter wait than the servers' 500 ms
// slow-failure mark keeps the UNAVAILABLE answer retryable by clients.
const modelSwitchWait = 250 * time.Millisecond

// awaitModel waits until this replica's model is no longer stale, at most
// modelSwitchWait (and DBTimeout).
func (e *Engine) awaitModel(ctx context.Context, stale *embedding.Active) error {
	t := time.NewTimer(min(modelSwitchWait, e.cfg.DBTimeout))
	defer t.Stop()
	for {
		changed := e.emb.Changed()
		if e.emb.Current() != stale {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return ErrModelChanging
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (e *Engine) vectorSearch(ctx context.Context, vs vectorSide) vecOut {
	var out vecOut
	t0 := time.Now()
	vec, active, err := e.emb.EmbedQuery(ctx, vs.q)
	e.m.Stage.WithLabelValues("embed").Observe(time.Since(t0).Seconds())
	if active != nil {
		out.provider, out.active = active.Provider, active
	}
	if err != nil {
		// The embedder's own text may name internal endpoints: log it,
		// tell the caller less.
		logging.FromContext(ctx).Warn("query embedding failed", "error", err.Error())
		if vs.mode == Vector {
			out.err = ErrEmbedderUnavailable
		} else {
			// Hybrid degrades to keyword ranking rather than failing.
			out.degraded = true
		}
		return out
	}
	if active == nil {
		if vs.mode == Vector {
			out.err = ErrNoModel
			if why := e.emb.Unusable(); why != "" {
				out.err = &ModelUnusableError{Reason: why}
			}
		}
		return out
	}
	// The model may have changed since feedback was decided: never embed
	// feedback texts with a remote provider.
	if vec != nil && vs.feedback && active.Provider == embedding.ProviderBuiltin {
		// Stored feedback vectors of another model than active make a
		// wrong query vector, but then the vector search below, a later
		// snapshot, finds that model active too and rejects it.
		if fb := e.feedbackVectors(ctx, active, vs.fb()); len(fb) > 0 {
			w := vs.feedbackWeight
			if active != vs.cur { // switched since: that model's preset
				w = e.cfg.fusionFor(active.Provider, active).FeedbackWeight
			}
			out.query = vec
			vec = embed.Feedback(vec, fb, float32(w))
		}
	}
	if vec == nil || vs.scope.none {
		return out
	}
	dctx, cancel := context.WithTimeout(ctx, e.cfg.DBTimeout)
	defer cancel()
	t1 := time.Now()
	// The paths that answer from the replica's memory, when they may; each
	// declines (ok false) when what it holds is not complete for the query.
	for _, p := range []struct {
		name   string
		on     bool
		search func(context.Context, vectorSide, []float32, int64) ([]store.VectorHit, time.Duration, bool, error)
	}{
		{"held", e.classes != nil && vs.scope.pairs != nil, e.classSearch},
		{"mirror", e.mirror != nil && vs.scope.access == nil && len(vs.scope.cats) == 0, e.mirrorSearch},
	} {
		if !p.on {
			continue
		}
		hits, dbTime, ok, err := p.search(dctx, vs, vec, active.Row)
		if ok {
			e.m.VectorPath.WithLabelValues(p.name).Inc()
		}
		if ok || err != nil {
			out.hits, out.dbTime = hits, dbTime
			e.m.Stage.WithLabelValues("vector").Observe(time.Since(t1).Seconds())
			if err != nil {
				out.err = fmt.Errorf("vector search: %w", err)
			}
			return out
		}
	}
	out.hits, err = e.st.VectorSearch(dctx, store.VectorQuery{Vector: vec, K: vs.k, Categories: vs.scope.cats,
		Access: vs.scope.access, Classes: vs.scope.classes, Exact: vs.scope.exact, Model: active.Row,
		EfSearch: e.cfg.EfSearch, MaxScanTuples: e.cfg.MaxScanTuples, WithVectors: true})
	out.dbTime = time.Since(t1)
	e.m.Stage.WithLabelValues("vector").Observe(out.dbTime.Seconds())
	e.m.VectorPath.WithLabelValues("pgvector").Inc()
	if err != nil {
		out.err = fmt.Errorf("vector search: %w", err)
	}
	return out
}

// similarityToQuery sets each vector hit's SimilarityScore to its cosine
// with the query's own vector: the list was searched and ranked with the
// feedback vector, whose cosine with the top BM25 hits is high by
// construction and would tell a caller nothing about the query.
func similarityToQuery(rs []fusion.Result, q []float32, hits []store.VectorHit) {
	cos := make(map[int64]float64, len(hits))
	qn := math.Sqrt(float64(vecmath.Dot(q, q)))
	for _, h := range hits {
		if h.Vector == nil || qn == 0 {
			continue
		}
		if vn := math.Sqrt(float64(vecmath.Dot(h.Vector, h.Vector))); vn > 0 {
			cos[h.ChunkID] = float64(vecmath.Dot(q, h.Vector)) / (qn * vn)
		}
	}
	for i := range rs {
		if c, ok := cos[rs[i].ChunkID]; ok && rs[i].VectorRank > 0 {
			rs[i].SimilarityScore = max(0, min(1, c))
		}
	}
}

// feedbackHits are the top BM25 hits for feedback: their ids, and the
// records of those whose text the replica keeps (records never change, so
// their texts are built only if the mirror lacks a vector).
type feedbackHits struct {
	ids    []int64
	texted []*index.Chunk
}

// feedbackVectors returns the vectors of the top BM25 hits: the vector
// mirror's copies, or embedded from their text in-process, or read from
// PostgreSQL (one primary-key read) when the replica keeps no text. A
// failure only costs the feedback.
func (e *Engine) feedbackVectors(ctx context.Context, active *embedding.Active, hits feedbackHits) [][]float32 {
	t0 := time.Now()
	defer func() { e.m.Stage.WithLabelValues("feedback").Observe(time.Since(t0).Seconds()) }()
	if len(hits.ids) == 0 {
		return nil
	}
	// A chunk's stored vector is its indexed text embedded by the same
	// model: the mirror's copy saves embedding the text again.
	stored, missing := e.mirroredVectors(active.Row, hits.ids)
	if len(missing) > 0 && len(hits.texted) > 0 {
		texts := make([]string, len(hits.texted))
		for i, c := range hits.texted {
			texts[i] = analysis.IndexedText(c.ContextHeader, c.ChunkText)
		}
		fb, err := active.Embedder.Embed(ctx, texts)
		if err != nil {
			logging.FromContext(ctx).Warn("feedback embedding failed", "error", err.Error())
			return nil
		}
		return fb
	}
	if len(missing) > 0 {
		dctx, cancel := context.WithTimeout(ctx, e.cfg.DBTimeout)
		defer cancel()
		read, err := e.st.Embeddings(dctx, missing)
		if err != nil {
			logging.FromContext(ctx).Warn("feedback vectors not read", "error", err.Error())
			return nil
		}
		if stored == nil {
			stored = read
		}
		for id, v := range read {
			stored[id] = v
		}
	}
	var fb [][]float32
	for _, id := range hits.ids {
		if v := stored[id]; v != nil {
			fb = append(fb, v)
		}
	}
	return fb
}

// duplicates compares, for flagging near-duplicates (fusion.Duplicates),
// the top DedupWindow results whose vectors are at hand by embedding
// cosine (> 0.95): in hybrid and vector mode those the HNSW query returned
// (the top DedupWindow of the vector list), in keyword mode the top
// DedupWindow BM25 hits. Identical content hashes count over the whole
// list. The flags are found per page (Ranked.Duplicates) from these
// comparisons and the results' records, which are immutable: a kept
// list's later pages read nothing newer than ranked it.
func (e *Engine) duplicates(rs []fusion.Result, vectors map[int64][]float32) fusion.Duplicates {
	window := make([][]float32, max(0, min(len(rs), e.cfg.DedupWindow)))
	for i := range window {
		window[i] = vectors[rs[i].ChunkID]
	}
	return fusion.NewDuplicates(window, fusion.DefaultDuplicateCosine)
}

func lowerAll(s []string) []string {
	for i := range s {
		s[i] = strings.ToLower(s[i])
	}
	return s
}
