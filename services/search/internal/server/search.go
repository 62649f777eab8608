package server

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/cacheowner"
	"github.com/bmcis/knowledge/platform/grpcserver"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/platform/logging"
	"github.com/bmcis/knowledge/platform/readmask"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/engine"
	"github.com/bmcis/knowledge/services/search/internal/fusion"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

// Search ranks chunks for a query and returns one page of the list.
func (s *Server) Search(ctx context.Context, req *searchv1.SearchRequest) (*searchv1.SearchResponse, error) {
	start := time.Now()
	s.labelAnswer(ctx)
	q := strings.TrimSpace(req.GetQuery())
	switch n := utf8.RuneCountInString(req.GetQuery()); {
	case q == "":
		return nil, grpcserver.InvalidArgument("query", "must not be empty")
	case n > limits.SearchQuery.Max:
		return nil, grpcserver.InvalidArgument("query", "must be at most %d characters, got %d", limits.SearchQuery.Max, n)
	}
	if l := req.GetLimit(); !limits.SearchPageSize.Allows(int(l)) {
		return nil, grpcserver.InvalidArgument("limit", "must be between %d and %d, got %d", limits.SearchPageSize.Min, limits.SearchPageSize.Max, l)
	}
	if !limits.SearchOffset.Allows(int(req.GetOffset())) {
		return nil, grpcserver.InvalidArgument("offset", "must not be negative, got %d", req.GetOffset())
	}
	mask, err := readmask.New(req.GetReadMask(), searchResponseDesc, searchAlways...)
	if err != nil {
		return nil, grpcserver.InvalidArgument("read_mask", "%v", err)
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
	set, err := callerAccess(ctx, req.GetScope().GetAccess())
	if err != nil {
		return nil, err
	}
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

	em := engine.Hybrid
	switch mode {
	case searchv1.RetrievalMode_RETRIEVAL_MODE_BM25:
		em = engine.BM25
	case searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR:
		em = engine.Vector
	}
	var unusable *engine.ModelUnusableError
	rk, hit, dbTime, err := s.engine.Search(ctx, engine.Query{Text: analysis.NormalizeQuery(q), Mode: em,
		Categories: cats, NoCache: req.GetNoCache(), Owner: cacheowner.FromIncoming(ctx), Access: set})
	switch {
	case errors.Is(err, engine.ErrEmbedderUnavailable):
		return nil, status.Error(codes.Unavailable, "the embedding provider is unavailable; retry shortly or use bm25 mode")
	case errors.Is(err, engine.ErrModelChanging):
		return nil, status.Error(codes.Unavailable, "the embedding model is being switched; retry shortly or use bm25 mode")
	case errors.As(err, &unusable):
		// This replica's state, not the caller's fault: another replica
		// may answer.
		return nil, status.Error(codes.Unavailable, unusable.Error()+"; use bm25 or hybrid mode")
	case errors.Is(err, engine.ErrNoModel):
		return nil, status.Error(codes.FailedPrecondition,
			"no embedding model is active yet (ingest documents, or run `bmcisctl reindex`); use bm25 or hybrid mode")
	case err != nil:
		return nil, dbError(ctx, err)
	}

	resp := &searchv1.SearchResponse{
		TotalAvailable: int32(len(rk.Results)),
		CacheHit:       hit,
		Mode:           mode,
		QueryTerms:     rk.QueryTerms,
	}
	off, lim := int(req.GetOffset()), int(req.GetLimit())
	if off < len(rk.Results) {
		page := rk.Results[off:min(off+lim, len(rk.Results))]
		shown := make([]*index.Chunk, len(page))
		for i := range page {
			shown[i] = page[i].Chunk
		}
		var texts map[int64]store.StoredText
		if mask.Wants("results.chunk.chunk_text") || mask.Wants("results.chunk.context_header") {
			var took time.Duration
			dctx, cancel := s.dbCtx(ctx)
			texts, took, err = s.texts.texts(dctx, shown)
			cancel()
			dbTime += took
			if err != nil {
				return nil, dbError(ctx, err)
			}
		}
		resp.Results = make([]*searchv1.SearchResult, len(page))
		matched := mask.Wants("results.matched_terms")
		dups := mask.Wants("results.is_duplicate") || mask.Wants("results.similar_chunk_ids")
		for i := range page {
			resp.Results[i] = resultProto(&page[i], off+i+1, texts)
			if dups {
				resp.Results[i].IsDuplicate, resp.Results[i].SimilarChunkIds = rk.Duplicates(off + i)
			}
			if matched {
				resp.Results[i].MatchedTerms = rk.MatchedWords(off + i)
			}
		}
	}
	s.addMentions(ctx, q, resp, mask)
	mask.Prune(resp)
	resp.SearchTimeMs = float64(time.Since(start).Microseconds()) / 1000
	resp.DatabaseTimeMs = float64(dbTime.Microseconds()) / 1000
	return resp, nil
}

// maxMentions bounds a result's mentions.
const maxMentions = 10

// searchResponseDesc is what a search's read mask names fields of.
var searchResponseDesc = (&searchv1.SearchResponse{}).ProtoReflect().Descriptor()

// searchAlways are the fields a search answer carries whatever its read
// mask: what identifies a result, and the page's own facts (none is read
// for the answer alone).
var searchAlways = []string{"results.chunk.chunk_id", "results.rank", "total_available", "cache_hit", "mode",
	"query_terms", "search_time_ms", "database_time_ms"}

// addMentions lists the entities each result's chunk mentions and the
// vendors the query names, each only when the read mask wants it. They
// enrich the answer: when the database cannot say, the results go out
// without them (and a log line says why).
func (s *Server) addMentions(ctx context.Context, query string, resp *searchv1.SearchResponse, mask readmask.Mask) {
	chunks, vendors := mask.Wants("results.mentions") && len(resp.Results) > 0, mask.Wants("query_vendors")
	if !chunks && !vendors {
		return
	}
	dctx, cancel := s.dbCtx(ctx)
	defer cancel()
	var err error
	if chunks {
		ids := make([]int64, len(resp.Results))
		for i, r := range resp.Results {
			ids[i] = r.GetChunk().GetChunkId()
		}
		var byChunk map[int64][]store.Mention
		if byChunk, err = s.st.ChunkMentions(dctx, ids, maxMentions); err == nil {
			for _, r := range resp.Results {
				r.Mentions = mentionProtos(byChunk[r.GetChunk().GetChunkId()])
			}
		}
	}
	if err == nil && vendors {
		var found []store.Mention
		found, err = s.st.QueryVendors(dctx, query)
		resp.QueryVendors = mentionProtos(found)
	}
	if err != nil {
		logging.FromContext(ctx).WarnContext(ctx, "search answered without mentions", "error", err.Error())
	}
}

func mentionProtos(ms []store.Mention) []*searchv1.EntityMention {
	out := make([]*searchv1.EntityMention, len(ms))
	for i, m := range ms {
		out[i] = &searchv1.EntityMention{EntityId: m.EntityID, Name: m.Name, EntityType: m.EntityType, IsVendor: m.IsVendor, Count: int32(m.Count)}
	}
	return out
}

func resultProto(r *engine.Result, rank int, texts map[int64]store.StoredText) *searchv1.SearchResult {
	st := searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID
	switch r.ScoreType {
	case fusion.ScoreBM25:
		st = searchv1.RetrievalMode_RETRIEVAL_MODE_BM25
	case fusion.ScoreVector:
		st = searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR
	}
	return &searchv1.SearchResult{
		Chunk:           chunkProto(r.Chunk, texts),
		Rank:            int32(rank),
		HybridScore:     r.HybridScore,
		SimilarityScore: r.SimilarityScore,
		Bm25Score:       r.BM25Score,
		ScoreType:       st,
		Bm25Rank:        int32(r.BM25Rank),
		VectorRank:      int32(r.VectorRank),
	}
}

// chunkProto maps a record; texts supplies header and text for records
// that left them in PostgreSQL.
func chunkProto(c *index.Chunk, texts map[int64]store.StoredText) *searchv1.Chunk {
	header, text := c.ContextHeader, c.ChunkText
	if c.TextInDatabase {
		t := texts[c.ChunkID]
		header, text = t.ContextHeader, t.ChunkText
	}
	return &searchv1.Chunk{
		ChunkId:         c.ChunkID,
		DocumentId:      c.Doc.ExternalID,
		SourceFile:      c.Doc.SourceFile,
		SourceCategory:  c.Doc.Category,
		Title:           c.Doc.Title,
		ContextHeader:   header,
		ChunkText:       text,
		ChunkIndex:      c.ChunkIndex,
		TotalChunks:     c.TotalChunks,
		ChunkTokenCount: c.ChunkTokenCount,
		Page:            c.Page,
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
