package server

import (
	"context"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/cache"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Request limits.
const (
	maxQueryChars = 500
	maxLimit      = 50
)

// ranked is one cached ranked candidate list: everything a page needs,
// chunk records included, so a page is cut without database work.
type ranked struct {
	queryTerms []string
	results    []rankedResult
	// degraded marks a hybrid list ranked by BM25 alone because the query
	// could not be embedded; it is never cached, so recovery shows at once.
	degraded bool
}

type rankedResult struct {
	chunk   *index.Chunk
	r       fusion.Result
	matched []string // query words as typed
}

// Search ranks chunks for a query and returns one page of the list.
func (s *Server) Search(ctx context.Context, req *searchv1.SearchRequest) (*searchv1.SearchResponse, error) {
	start := time.Now()
	q := strings.TrimSpace(req.GetQuery())
	switch n := utf8.RuneCountInString(req.GetQuery()); {
	case q == "":
		return nil, grpcserver.InvalidArgument("query", "must not be empty")
	case n > maxQueryChars:
		return nil, grpcserver.InvalidArgument("query", "must be at most %d characters, got %d", maxQueryChars, n)
	}
	if l := req.GetLimit(); l < 1 || l > maxLimit {
		return nil, grpcserver.InvalidArgument("limit", "must be between 1 and %d, got %d", maxLimit, l)
	}
	if req.GetOffset() < 0 {
		return nil, grpcserver.InvalidArgument("offset", "must not be negative, got %d", req.GetOffset())
	}
	mode := req.GetMode()
	switch mode {
	case searchv1.RetrievalMode_RETRIEVAL_MODE_UNSPECIFIED:
		mode = searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
	case searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR:
	default:
		return nil, grpcserver.InvalidArgument("mode", "unknown retrieval mode %d", mode)
	}
	// The key's scope narrows the category filter, so totals are counted
	// inside it; a category outside it is as unknown as a missing one.
	sc := s.readScope(req.GetScope())
	var cats []string
	for _, c := range req.GetCategories() {
		names := sc.filter(s.ix.ResolveCategory(strings.TrimSpace(c)))
		if len(names) == 0 {
			return nil, grpcserver.InvalidArgument("categories", "unknown category %q (ListCategories lists them)", c)
		}
		cats = append(cats, names...)
	}
	if sc.limited && len(cats) == 0 {
		if cats = sc.categories(); len(cats) == 0 {
			// No category of the scope exists: nothing to find, not everything.
			return &searchv1.SearchResponse{Mode: mode}, nil
		}
	}
	sort.Strings(cats)
	cats = dedupStrings(cats)

	nq := cache.NormalizeQuery(q)
	key := mode.String() + "\x00" + strings.Join(cats, "\x01") + "\x00" + nq
	epoch := s.cache.Epoch()
	var rk *ranked
	hit := false
	if !req.GetNoCache() {
		rk, hit = s.cache.Get(key)
		if hit {
			s.m.cache.WithLabelValues("hit").Inc()
		} else {
			s.m.cache.WithLabelValues("miss").Inc()
		}
	}
	var dbTime time.Duration
	if !hit {
		var err error
		rk, dbTime, err = s.rank(ctx, nq, mode, cats)
		if err != nil {
			return nil, err
		}
		if !req.GetNoCache() && !rk.degraded {
			s.cache.Put(key, epoch, rk)
		}
	}

	resp := &searchv1.SearchResponse{
		TotalAvailable: int32(len(rk.results)),
		CacheHit:       hit,
		Mode:           mode,
		QueryTerms:     rk.queryTerms,
	}
	off, lim := int(req.GetOffset()), int(req.GetLimit())
	if off < len(rk.results) {
		page := rk.results[off:min(off+lim, len(rk.results))]
		resp.Results = make([]*searchv1.SearchResult, len(page))
		for i := range page {
			resp.Results[i] = page[i].proto(off + i + 1)
		}
	}
	resp.SearchTimeMs = float64(time.Since(start).Microseconds()) / 1000
	resp.DatabaseTimeMs = float64(dbTime.Microseconds()) / 1000
	return resp, nil
}

// rank computes the whole ranked candidate list of a query. The vector
// side (query embedding + HNSW query, which also returns its hits'
// vectors for duplicate detection) runs concurrently with BM25.
func (s *Server) rank(ctx context.Context, q string, mode searchv1.RetrievalMode, cats []string) (*ranked, time.Duration, error) {
	qts := s.ix.Analyzer().QueryTerms(q)
	var terms, distinct []string
	for _, t := range qts {
		distinct = append(distinct, t.Term)
		for i := 0; i < t.Count; i++ {
			terms = append(terms, t.Term)
		}
	}
	k := s.cfg.Candidates
	useBM25 := mode != searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR
	useVec := mode != searchv1.RetrievalMode_RETRIEVAL_MODE_BM25
	haveModel := s.emb.Current() != nil

	type vecOut struct {
		hits     []store.VectorHit
		provider string
		dbTime   time.Duration
		err      error
		degraded bool
	}
	vecCh := make(chan vecOut, 1)
	if useVec {
		go func() {
			var out vecOut
			t0 := time.Now()
			vec, active, err := s.emb.EmbedQuery(ctx, q)
			s.m.stage.WithLabelValues("embed").Observe(time.Since(t0).Seconds())
			if active != nil {
				out.provider = active.Provider
			}
			if err != nil {
				// The embedder's own text may name internal endpoints: log it,
				// tell the caller less.
				logging.FromContext(ctx).Warn("query embedding failed", "error", err.Error())
				if mode == searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR {
					out.err = status.Error(codes.Unavailable, "the embedding provider is unavailable; retry shortly or use bm25 mode")
				} else {
					// Hybrid degrades to keyword ranking rather than failing.
					out.degraded = true
				}
				vecCh <- out
				return
			}
			if active == nil && mode == searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR {
				out.err = status.Error(codes.FailedPrecondition,
					"no embedding model is active yet (ingest documents, or run `bmcisctl reindex`); use bm25 or hybrid mode")
				vecCh <- out
				return
			}
			if vec != nil {
				dctx, cancel := s.dbCtx(ctx)
				t1 := time.Now()
				out.hits, err = s.st.VectorSearch(dctx, store.VectorQuery{Vector: vec, K: k, Categories: cats,
					EfSearch: s.cfg.EfSearch, MaxScanTuples: s.cfg.MaxScanTuples, WithVectors: true})
				out.dbTime = time.Since(t1)
				s.m.stage.WithLabelValues("vector").Observe(out.dbTime.Seconds())
				out.err = dbError(ctx, err)
				cancel()
			}
			vecCh <- out
		}()
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
		bmHits = s.ix.SearchBM25(terms, cats, k)
		s.m.stage.WithLabelValues("bm25").Observe(time.Since(t0).Seconds())
		// Vectors of the top BM25 hits, for near-duplicate detection, in
		// keyword mode only: in hybrid mode the HNSW query returns the
		// vectors of its hits, and a second concurrent query would slow it
		// down more than the extra duplicates it could find are worth.
		w := min(len(bmHits), s.cfg.DedupWindow)
		if haveModel && w > 1 && !useVec {
			ids := make([]int64, w)
			for i := range ids {
				ids[i] = bmHits[i].ChunkID
			}
			go func() {
				dctx, cancel := s.dbCtx(ctx)
				defer cancel()
				t1 := time.Now()
				vecs, err := s.st.Embeddings(dctx, ids)
				d := time.Since(t1)
				s.m.stage.WithLabelValues("dedup_vectors").Observe(d.Seconds())
				embCh <- embOut{vecs: vecs, dbTime: d, err: dbError(ctx, err)}
			}()
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
	matched := make(map[int64][]string, len(bmHits))
	for _, h := range bmHits {
		bmC = append(bmC, fusion.Candidate{ChunkID: h.ChunkID, Score: h.Score})
		matched[h.ChunkID] = h.MatchedTerms
	}
	vectors := eo.vecs
	if vectors == nil {
		vectors = map[int64][]float32{}
	}
	vecC := make([]fusion.Candidate, 0, len(vo.hits))
	for i, h := range vo.hits {
		vecC = append(vecC, fusion.Candidate{ChunkID: h.ChunkID, Score: h.Cosine})
		if i < s.cfg.DedupWindow && h.Vector != nil {
			vectors[h.ChunkID] = h.Vector
		}
	}
	var fused []fusion.Result
	switch mode {
	case searchv1.RetrievalMode_RETRIEVAL_MODE_BM25:
		fused = fusion.FromBM25(bmC)
	case searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR:
		fused = fusion.FromVector(vecC)
	default:
		provider := vo.provider
		if provider == "" {
			provider = s.cfg.Embedding.Provider
		}
		fused = fusion.RRF(bmC, vecC, s.cfg.fusionFor(provider))
	}
	// Keep what this replica has loaded: a vector hit committed after the
	// last feed poll is left out until the poll brings it in.
	ids := make([]int64, len(fused))
	for i, r := range fused {
		ids[i] = r.ChunkID
	}
	recs := s.ix.Chunks(ids)
	kept := fused[:0]
	keptRecs := recs[:0]
	for i, r := range fused {
		if recs[i] != nil {
			kept = append(kept, r)
			keptRecs = append(keptRecs, recs[i])
		}
	}
	fused, recs = kept, keptRecs

	t0 := time.Now()
	s.markDuplicates(fused, recs, vectors)
	s.m.stage.WithLabelValues("dedup").Observe(time.Since(t0).Seconds())

	rk := &ranked{queryTerms: lowerAll(analysis.OriginalWords(qts, distinct)), results: make([]rankedResult, len(fused)),
		degraded: vo.degraded}
	for i, r := range fused {
		m, ok := matched[r.ChunkID]
		if !ok {
			m = s.ix.MatchedTerms(r.ChunkID, distinct)
		}
		rk.results[i] = rankedResult{chunk: recs[i], r: r, matched: analysis.OriginalWords(qts, m)}
	}
	return rk, dbTime, nil
}

// markDuplicates flags near-duplicates (fusion.MarkDuplicates): identical
// content hashes over the whole list, and embedding cosine > 0.95 among the
// top DedupWindow results whose vectors are at hand: in hybrid and vector
// mode those the HNSW query returned (the top DedupWindow of the vector
// list), in keyword mode the top DedupWindow BM25 hits.
func (s *Server) markDuplicates(rs []fusion.Result, recs []*index.Chunk, vectors map[int64][]float32) {
	w := min(len(rs), s.cfg.DedupWindow)
	info := make(map[int64]fusion.DupInfo, w)
	for i := 0; i < w; i++ {
		info[rs[i].ChunkID] = fusion.DupInfo{ContentHash: hashKey(recs[i].Hash), Vector: vectors[rs[i].ChunkID]}
	}
	fusion.MarkDuplicates(rs[:w], info, fusion.DefaultDuplicateCosine)
	// Beyond the window: identical content only, against every higher result.
	seen := make(map[uint64][]int64, len(rs))
	for i := range rs {
		h := recs[i].Hash
		if i >= w && h != 0 {
			if prev := seen[h]; len(prev) > 0 {
				rs[i].IsDuplicate = true
				rs[i].SimilarChunkIDs = append(rs[i].SimilarChunkIDs, prev...)
			}
		}
		if h != 0 {
			seen[h] = append(seen[h], rs[i].ChunkID)
		}
	}
}

func hashKey(h uint64) string {
	if h == 0 {
		return ""
	}
	var b [8]byte
	for i := range b {
		b[i] = byte(h >> (56 - 8*i))
	}
	return string(b[:])
}

func (r *rankedResult) proto(rank int) *searchv1.SearchResult {
	st := searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
	switch r.r.ScoreType {
	case fusion.ScoreBM25:
		st = searchv1.RetrievalMode_RETRIEVAL_MODE_BM25
	case fusion.ScoreVector:
		st = searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR
	}
	return &searchv1.SearchResult{
		Chunk:           chunkProto(r.chunk),
		Rank:            int32(rank),
		HybridScore:     r.r.HybridScore,
		SimilarityScore: r.r.SimilarityScore,
		Bm25Score:       r.r.BM25Score,
		ScoreType:       st,
		MatchedTerms:    r.matched,
		Bm25Rank:        int32(r.r.BM25Rank),
		VectorRank:      int32(r.r.VectorRank),
		IsDuplicate:     r.r.IsDuplicate,
		SimilarChunkIds: r.r.SimilarChunkIDs,
	}
}

func chunkProto(c *index.Chunk) *searchv1.Chunk {
	return &searchv1.Chunk{
		ChunkId:         c.ID,
		DocumentId:      c.Doc.ExternalID,
		SourceFile:      c.Doc.SourceFile,
		SourceCategory:  c.Doc.Category,
		Title:           c.Doc.Title,
		ContextHeader:   c.Header,
		ChunkText:       c.Text,
		ChunkIndex:      c.Index,
		TotalChunks:     c.Total,
		ChunkTokenCount: c.Tokens,
		UpdatedAt:       timestamppb.New(c.Doc.UpdatedAt),
	}
}

func dedupStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func lowerAll(s []string) []string {
	for i := range s {
		s[i] = strings.ToLower(s[i])
	}
	return s
}
