package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/access"
	"github.com/bmcis/knowledge/platform/limits"
)

func init() {
	commands["search"] = command{
		summary: `search: search [-mode M] [-limit N] [-category C] "text" | search -queries FILE -top-k 100 -json [-mode M]`,
		run:     runSearch,
	}
}

// searchStrings is a repeatable string flag.
type searchStrings []string

func (s *searchStrings) String() string     { return strings.Join(*s, ",") }
func (s *searchStrings) Set(v string) error { *s = append(*s, v); return nil }

func parseSearchMode(s string) (searchv1.RetrievalMode, error) {
	switch strings.ToLower(s) {
	case "", "hybrid":
		return searchv1.RetrievalMode_RETRIEVAL_MODE_HYBRID, nil
	case "bm25", "keyword":
		return searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, nil
	case "vector", "semantic":
		return searchv1.RetrievalMode_RETRIEVAL_MODE_VECTOR, nil
	}
	return 0, usageErrorf("-mode must be hybrid, bm25 or vector, got %q", s)
}

// parseSearchModes reads a -modes list: comma-separated, none empty.
func parseSearchModes(list string) ([]searchv1.RetrievalMode, error) {
	var out []searchv1.RetrievalMode
	for _, m := range strings.Split(list, ",") {
		mode, err := parseSearchMode(strings.TrimSpace(m))
		if err != nil || strings.TrimSpace(m) == "" {
			return nil, usageErrorf("bad -modes %q: a comma-separated list of hybrid, bm25, vector", list)
		}
		out = append(out, mode)
	}
	return out, nil
}

func searchModeName(m searchv1.RetrievalMode) string {
	return strings.ToLower(strings.TrimPrefix(m.String(), "RETRIEVAL_MODE_"))
}

func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("search", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	modeName := fs.String("mode", "hybrid", "hybrid, bm25 or vector")
	limit := fs.Int("limit", limits.DefaultPageSize, fmt.Sprintf("results to show (human mode), %d..%d", limits.SearchPageSize.Min, limits.SearchPageSize.Max))
	offset := fs.Int("offset", 0, "first result to show (human mode)")
	var cats searchStrings
	fs.Var(&cats, "category", "restrict to a category (repeatable)")
	noCache := fs.Bool("no-cache", false, "bypass the result cache")
	as := fs.String("as", "", "search as a caller with these principals, e.g. group:hr,user:alice (default: everyone's documents only: bmcisctl holds the read credential)")
	queries := fs.String("queries", "", "BEIR queries.jsonl to run (batch mode)")
	topK := fs.Int("top-k", 100, fmt.Sprintf("results per query in batch mode (paged %d at a time)", limits.SearchPageSize.Max))
	asJSON := fs.Bool("json", false, "batch mode: one JSON object per query on stdout (as --output json)")
	output := outputFlag(fs)
	parallel := fs.Int("parallel", 4, "queries in flight in batch mode")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if *output == outputJSON {
		*asJSON = true
	} else if *asJSON && *output == outputTable {
		*output = outputJSON
	}
	switch {
	case !limits.SearchPageSize.Allows(*limit):
		return usageErrorf("-limit must be between %d and %d, got %d", limits.SearchPageSize.Min, limits.SearchPageSize.Max, *limit)
	case *offset < 0:
		return usageErrorf("-offset must be 0 or more, got %d", *offset)
	case *topK < 1:
		return usageErrorf("-top-k must be at least 1, got %d", *topK)
	case *parallel < 1:
		return usageErrorf("-parallel must be at least 1, got %d", *parallel)
	}
	mode, err := parseSearchMode(*modeName)
	if err != nil {
		return err
	}
	var scope *searchv1.ReadScope
	if *as != "" {
		set, err := access.SplitList(*as)
		if err != nil {
			return usageErrorf("--as: %v", err)
		}
		scope = &searchv1.ReadScope{Access: append(set, access.Everyone)}
	}
	c, closeConn, err := searchDial(*addr, envReadToken)
	if err != nil {
		return err
	}
	defer closeConn()

	if *queries != "" {
		if fs.NArg() != 0 {
			return usageErrorf("give either -queries FILE or a query text, not both")
		}
		if !*asJSON {
			return usageErrorf("--queries needs --output json (or --json): one JSON object per query")
		}
		qs, err := readSearchQueries(*queries)
		if err != nil {
			return err
		}
		return runSearchBatch(ctx, c, qs, mode, cats, *topK, *noCache, *parallel, stdout)
	}
	if fs.NArg() == 0 {
		return usageErrorf(`give a query: bmcisctl search "text", or -queries FILE -json`)
	}
	query := strings.Join(fs.Args(), " ")
	resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: query, Mode: mode, Offset: int32(*offset), Limit: int32(*limit),
		Categories: cats, NoCache: *noCache, Scope: scope})
	if err != nil {
		return fmt.Errorf("search via %s: %w", *addr, err)
	}
	if *output != outputTable {
		return writeRecord(stdout, *output, resp)
	}
	fmt.Fprintf(stdout, "%d results (%s, %.2f ms, database %.2f ms, cache hit %t); terms: %s\n\n", resp.TotalAvailable,
		searchModeName(resp.Mode), resp.SearchTimeMs, resp.DatabaseTimeMs, resp.CacheHit, strings.Join(resp.QueryTerms, " "))
	for _, r := range resp.Results {
		ch := r.Chunk
		dup := ""
		if r.IsDuplicate {
			dup = fmt.Sprintf("  [duplicate of %v]", r.SimilarChunkIds)
		}
		fmt.Fprintf(stdout, "%2d. %s  (%s)  score %.3f  bm25 %.3f #%d  vector %.3f #%d%s\n", r.Rank, ch.Title, ch.SourceFile,
			r.HybridScore, r.Bm25Score, r.Bm25Rank, r.SimilarityScore, r.VectorRank, dup)
		fmt.Fprintf(stdout, "    %s  [chunk %d, %d/%d, %d tokens, %s, updated %s]\n", ch.ContextHeader, ch.ChunkId, ch.ChunkIndex+1,
			ch.TotalChunks, ch.ChunkTokenCount, ch.SourceCategory, ch.UpdatedAt.AsTime().Format("2006-01-02"))
		fmt.Fprintf(stdout, "    matched: %s\n    %s\n\n", strings.Join(r.MatchedTerms, ", "), searchSnippet(ch.ChunkText, 200))
	}
	return nil
}

func searchSnippet(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

type searchQuery struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
}

func readSearchQueries(path string) ([]searchQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []searchQuery
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var raw struct {
			UID  json.RawMessage `json:"_id"`
			ID   json.RawMessage `json:"id"`
			Text string          `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		id := searchRawID(raw.UID)
		if id == "" {
			id = searchRawID(raw.ID)
		}
		if id == "" {
			return nil, fmt.Errorf("%s:%d: missing _id", path, n)
		}
		out = append(out, searchQuery{ID: id, Text: raw.Text})
	}
	return out, sc.Err()
}

func searchRawID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// batchReadMask asks for what a batch line holds (searchBatchResult):
// no text, mentions or vendors are read, sent or decoded.
var batchReadMask = &fieldmaskpb.FieldMask{Paths: []string{"results.chunk.document_id", "results.chunk.chunk_id", "results.hybrid_score"}}

// searchTopK pages through a query's ranked list, a page of the most the
// service allows at a time.
func searchTopK(ctx context.Context, c searchv1.SearchServiceClient, query string, mode searchv1.RetrievalMode, cats []string, k int, noCache bool) ([]*searchv1.SearchResult, error) {
	var out []*searchv1.SearchResult
	for len(out) < k {
		lim := min(limits.SearchPageSize.Max, k-len(out))
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: query, Mode: mode, Offset: int32(len(out)), Limit: int32(lim),
			Categories: cats, NoCache: noCache, ReadMask: batchReadMask})
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Results...)
		if len(resp.Results) < lim || len(out) >= int(resp.TotalAvailable) {
			break
		}
	}
	return out, nil
}

type searchBatchLine struct {
	QueryID string              `json:"query_id"`
	Results []searchBatchResult `json:"results"`
}

type searchBatchResult struct {
	DocumentID string  `json:"document_id"`
	ChunkID    int64   `json:"chunk_id"`
	Score      float64 `json:"score"`
}

// searchRunQueries runs every query (parallel at a time) and returns the
// results in query order.
func searchRunQueries(ctx context.Context, c searchv1.SearchServiceClient, qs []searchQuery, mode searchv1.RetrievalMode, cats []string, k int, noCache bool, parallel int) ([][]*searchv1.SearchResult, error) {
	out := make([][]*searchv1.SearchResult, len(qs))
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if strings.TrimSpace(qs[i].Text) == "" {
					continue
				}
				out[i], errs[i] = searchTopK(ctx, c, qs[i].Text, mode, cats, k, noCache)
			}
		}()
	}
	for i := range qs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", qs[i].ID, err)
		}
	}
	return out, nil
}

func runSearchBatch(ctx context.Context, c searchv1.SearchServiceClient, qs []searchQuery, mode searchv1.RetrievalMode, cats []string, k int, noCache bool, parallel int, stdout io.Writer) error {
	res, err := searchRunQueries(ctx, c, qs, mode, cats, k, noCache, parallel)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for i, q := range qs {
		line := searchBatchLine{QueryID: q.ID, Results: make([]searchBatchResult, 0, len(res[i]))}
		for _, r := range res[i] {
			line.Results = append(line.Results, searchBatchResult{DocumentID: r.Chunk.DocumentId, ChunkID: r.Chunk.ChunkId, Score: r.HybridScore})
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return w.Flush()
}
