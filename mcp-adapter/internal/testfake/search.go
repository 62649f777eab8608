package testfake

import (
	"context"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/limits"
	"github.com/bmcis/knowledge/platform/readmask"
)

// Search is the stand-in search service.
type Search struct {
	searchv1.UnimplementedSearchServiceServer

	chunks []*searchv1.Chunk
	byID   map[int64]*searchv1.Chunk
	vecs   [][]float64
	terms  []map[string]int

	mu    sync.Mutex
	seen  map[string]bool
	errs  []error
	delay time.Duration
	calls int
}

// NewSearch indexes the corpus.
func NewSearch() *Search {
	s := &Search{byID: map[int64]*searchv1.Chunk{}, seen: map[string]bool{}}
	for _, c := range Corpus() {
		s.chunks = append(s.chunks, c)
		s.byID[c.GetChunkId()] = c
		s.vecs = append(s.vecs, trigramVector(c.GetChunkText()))
		tf := map[string]int{}
		for _, t := range words(c.GetChunkText()) {
			tf[t]++
		}
		s.terms = append(s.terms, tf)
	}
	return s
}

// Chunks returns the corpus.
func (s *Search) Chunks() []*searchv1.Chunk { return s.chunks }

// FailNext makes the next calls fail with errs, in order.
func (s *Search) FailNext(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, errs...)
}

// SetDelay delays every call.
func (s *Search) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Calls counts calls that reached the service.
func (s *Search) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Search) enter(ctx context.Context) error {
	s.mu.Lock()
	s.calls++
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	d := s.delay
	s.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return err
}

var stop = map[string]bool{"the": true, "a": true, "an": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "is": true, "for": true, "on": true, "with": true, "how": true, "what": true, "are": true, "do": true}

func words(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if !stop[w] {
			out = append(out, w)
		}
	}
	return out
}

func trigramVector(text string) []float64 {
	v := make([]float64, 512)
	t := " " + strings.ToLower(text) + " "
	rs := []rune(t)
	for i := 0; i+3 <= len(rs); i++ {
		h := fnv.New32a()
		h.Write([]byte(string(rs[i : i+3])))
		v[h.Sum32()%512]++
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	n = math.Sqrt(n)
	if n > 0 {
		for i := range v {
			v[i] /= n
		}
	}
	return v
}

func cosine(a, b []float64) float64 {
	var d float64
	for i := range a {
		d += a[i] * b[i]
	}
	return d
}

type cand struct {
	i                int
	bm25, sim, fused float64
	bRank, vRank     int
	matched          []string
}

// Search ranks chunks: a saturated term-frequency score stands in for BM25,
// trigram cosine for vector similarity, and the fused score averages them.
func (s *Search) Search(ctx context.Context, req *searchv1.SearchRequest) (*searchv1.SearchResponse, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	q := req.GetQuery()
	if n := utf8.RuneCountInString(q); !limits.SearchQuery.Allows(n) {
		return nil, status.Errorf(codes.InvalidArgument, "query: must be %d..%d characters", limits.SearchQuery.Min, limits.SearchQuery.Max)
	}
	if !limits.SearchPageSize.Allows(int(req.GetLimit())) {
		return nil, status.Errorf(codes.InvalidArgument, "limit: must be %d..%d", limits.SearchPageSize.Min, limits.SearchPageSize.Max)
	}
	if !limits.SearchOffset.Allows(int(req.GetOffset())) {
		return nil, status.Error(codes.InvalidArgument, "offset: must be >= 0")
	}
	mask, err := readmask.New(req.GetReadMask(), (&searchv1.SearchResponse{}).ProtoReflect().Descriptor(), searchAlways...)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "read_mask: "+err.Error())
	}
	qterms := []string{}
	seenT := map[string]bool{}
	for _, t := range words(q) {
		if !seenT[t] {
			seenT[t] = true
			qterms = append(qterms, t)
		}
	}
	qv := trigramVector(strings.Join(strings.Fields(q), " "))
	cands := make([]cand, len(s.chunks))
	for i := range s.chunks {
		c := cand{i: i, sim: math.Max(cosine(qv, s.vecs[i]), 0)}
		for _, t := range qterms {
			if tf := s.terms[i][t]; tf > 0 {
				c.bm25 += 1 + math.Log(float64(tf))
				c.matched = append(c.matched, t)
			}
		}
		cands[i] = c
	}
	// per-retriever ranks (top 60 each)
	byB := append([]cand(nil), cands...)
	sort.SliceStable(byB, func(a, b int) bool { return byB[a].bm25 > byB[b].bm25 })
	byV := append([]cand(nil), cands...)
	sort.SliceStable(byV, func(a, b int) bool { return byV[a].sim > byV[b].sim })
	in := map[int]bool{}
	for r, c := range byB {
		if r >= 60 || c.bm25 == 0 {
			break
		}
		cands[c.i].bRank = r + 1
		in[c.i] = true
	}
	for r, c := range byV {
		if r >= 60 {
			break
		}
		cands[c.i].vRank = r + 1
		in[c.i] = true
	}
	var list []cand
	for i := range cands {
		if !in[i] {
			continue
		}
		c := cands[i]
		bn := c.bm25 / (c.bm25 + 3)
		sim := c.sim
		if c.vRank == 0 {
			sim = 0
		}
		c.fused = 0.55*bn + 0.45*sim
		list = append(list, c)
	}
	sort.SliceStable(list, func(a, b int) bool {
		if list[a].fused != list[b].fused {
			return list[a].fused > list[b].fused
		}
		return s.chunks[list[a].i].GetChunkId() < s.chunks[list[b].i].GetChunkId()
	})
	key := strings.Join(strings.Fields(strings.ToLower(q)), " ")
	s.mu.Lock()
	hit := s.seen[key]
	s.seen[key] = true
	s.mu.Unlock()

	// near duplicates: identical texts
	byText := map[string][]int64{}
	for _, c := range list {
		ch := s.chunks[c.i]
		byText[ch.GetChunkText()] = append(byText[ch.GetChunkText()], ch.GetChunkId())
	}
	resp := &searchv1.SearchResponse{
		TotalAvailable: int32(len(list)),
		CacheHit:       hit,
		Mode:           searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
		QueryTerms:     qterms,
		SearchTimeMs:   1.5,
	}
	if !hit {
		resp.DatabaseTimeMs = 0.8
	}
	off, lim := int(req.GetOffset()), int(req.GetLimit())
	firstSeen := map[string]bool{}
	for r, c := range list {
		ch := s.chunks[c.i]
		dup := firstSeen[ch.GetChunkText()]
		firstSeen[ch.GetChunkText()] = true
		if r < off || r >= off+lim {
			continue
		}
		var similar []int64
		for _, id := range byText[ch.GetChunkText()] {
			if id != ch.GetChunkId() {
				similar = append(similar, id)
			}
		}
		resp.Results = append(resp.Results, &searchv1.SearchResult{
			Chunk:           toProto(ch),
			Rank:            int32(r + 1),
			HybridScore:     c.fused,
			SimilarityScore: c.sim,
			Bm25Score:       c.bm25 / (c.bm25 + 3),
			ScoreType:       searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID,
			MatchedTerms:    c.matched,
			Bm25Rank:        int32(c.bRank),
			VectorRank:      int32(c.vRank),
			IsDuplicate:     dup,
			SimilarChunkIds: similar,
		})
	}
	mask.Prune(resp)
	return resp, nil
}

// toProto copies a corpus chunk for an answer (which its read mask prunes).
func toProto(c *searchv1.Chunk) *searchv1.Chunk { return proto.Clone(c).(*searchv1.Chunk) }

// The read masks' always-sent fields, as the search service's
// (SearchRequest.read_mask, GetChunksRequest.read_mask).
var (
	searchAlways = []string{"results.chunk.chunk_id", "results.rank", "total_available", "cache_hit", "mode",
		"query_terms", "search_time_ms", "database_time_ms"}
	chunksAlways = []string{"chunks.chunk_id", "missing_ids"}
)

// GetChunks returns chunks by id.
func (s *Search) GetChunks(ctx context.Context, req *searchv1.GetChunksRequest) (*searchv1.GetChunksResponse, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if n := len(req.GetChunkIds()); !limits.ChunkIDs.Allows(n) {
		return nil, status.Errorf(codes.InvalidArgument, "chunk_ids: %d..%d ids", limits.ChunkIDs.Min, limits.ChunkIDs.Max)
	}
	mask, err := readmask.New(req.GetReadMask(), (&searchv1.GetChunksResponse{}).ProtoReflect().Descriptor(), chunksAlways...)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "read_mask: "+err.Error())
	}
	resp := &searchv1.GetChunksResponse{}
	for _, id := range req.GetChunkIds() {
		if c, ok := s.byID[id]; ok {
			resp.Chunks = append(resp.Chunks, toProto(c))
		} else {
			resp.MissingIds = append(resp.MissingIds, id)
		}
	}
	mask.Prune(resp)
	return resp, nil
}

// ListCategories lists the corpus categories.
func (s *Search) ListCategories(ctx context.Context, _ *searchv1.ListCategoriesRequest) (*searchv1.ListCategoriesResponse, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	counts := map[string]int32{}
	for _, c := range s.chunks {
		if c.GetSourceCategory() != "" {
			counts[c.GetSourceCategory()]++
		}
	}
	resp := &searchv1.ListCategoriesResponse{}
	for name, n := range counts {
		resp.Categories = append(resp.Categories, &searchv1.Category{Name: name, DocumentCount: n})
	}
	sort.Slice(resp.Categories, func(i, j int) bool { return resp.Categories[i].Name < resp.Categories[j].Name })
	return resp, nil
}
