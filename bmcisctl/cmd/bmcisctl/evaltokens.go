package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/retrievaleval"
)

// tokenStrategy is one way a model may spend context on a question: the
// calls it makes and which results it ends up reading.
type tokenStrategy struct {
	name string
	// run makes the calls for query and returns the tokens the answers
	// cost (their tokens_used) and the chunk ids read.
	run func(ctx context.Context, c *mcpStdio, query string) (tokens int, read []int64, err error)
}

// progressiveRead is how many of the leading results the progressive
// strategies read in full with get_chunks.
const progressiveRead = 3

// tokenStrategies: naive reads the 10 results in full mode at once;
// progressive looks at 10 results in a light mode, then reads the top 3.
func tokenStrategies() []tokenStrategy {
	naive := tokenStrategy{name: "naive: full x10", run: func(ctx context.Context, c *mcpStdio, q string) (int, []int64, error) {
		res, err := c.CallTool(ctx, "semantic_search", map[string]any{"query": q, "response_mode": "full", "page_size": 10})
		if err != nil {
			return 0, nil, err
		}
		return res.StructuredContent.ExecutionContext.TokensUsed, resultIDs(res, 10), nil
	}}
	progressive := func(mode string) tokenStrategy {
		return tokenStrategy{name: "progressive: " + mode + " x10 + get_chunks x3", run: func(ctx context.Context, c *mcpStdio, q string) (int, []int64, error) {
			res, err := c.CallTool(ctx, "semantic_search", map[string]any{"query": q, "response_mode": mode, "page_size": 10})
			if err != nil {
				return 0, nil, err
			}
			ids := resultIDs(res, progressiveRead)
			spent := res.StructuredContent.ExecutionContext.TokensUsed
			if len(ids) == 0 {
				return spent, nil, nil
			}
			chunks, err := c.CallTool(ctx, "get_chunks", map[string]any{"chunk_ids": ids})
			if err != nil {
				return 0, nil, err
			}
			return spent + chunks.StructuredContent.ExecutionContext.TokensUsed, ids, nil
		}}
	}
	return []tokenStrategy{naive, progressive("ids_only"), progressive("metadata")}
}

// resultIDs are the chunk ids of the first n results.
func resultIDs(res *mcpToolResult, n int) []int64 {
	var ids []int64
	for _, r := range res.StructuredContent.Results {
		if len(ids) == n {
			break
		}
		if id, ok := r["chunk_id"].(float64); ok {
			ids = append(ids, int64(id))
		}
	}
	return ids
}

// tokenEvalOptions configure runTokenEval.
type tokenEvalOptions struct {
	adapter    string   // the adapter binary
	adapterEnv []string // added to its environment
	maxQueries int      // 0: every judged query
}

// runTokenEval asks every judged query of ds through the MCP adapter with
// each strategy and reports the tokens per query and success@10: whether a
// document judged relevant was among the chunks the strategy read. The
// search service (c) only maps the chunks read to their documents.
func runTokenEval(ctx context.Context, c searchv1.SearchServiceClient, ds *retrievaleval.Dataset, name, split string, o tokenEvalOptions, stdout, stderr io.Writer) error {
	qs := ds.Queries
	if o.maxQueries > 0 && o.maxQueries < len(qs) {
		qs = qs[:o.maxQueries]
	}
	if len(qs) == 0 {
		return fmt.Errorf("%s has no judged queries in the %s split", name, split)
	}
	m, err := startMCPStdio(ctx, o.adapter, o.adapterEnv, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	docOf := map[int64]string{}
	documents := func(ids []int64) ([]string, error) {
		var ask []int64
		for _, id := range ids {
			if _, ok := docOf[id]; !ok {
				ask = append(ask, id)
			}
		}
		if len(ask) > 0 {
			resp, err := c.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: ask})
			if err != nil {
				return nil, fmt.Errorf("map chunks to documents: %w", err)
			}
			for _, ch := range resp.GetChunks() {
				docOf[ch.GetChunkId()] = ch.GetDocumentId()
			}
		}
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			out = append(out, docOf[id])
		}
		return out, nil
	}

	// One untimed call per query first: every strategy then meets a warm
	// search cache, so none pays a CACHE_MISS_SLOW warning the others do
	// not.
	for _, q := range qs {
		if _, err := m.CallTool(ctx, "semantic_search", map[string]any{"query": q.Text, "response_mode": "ids_only", "page_size": 10}); err != nil {
			return fmt.Errorf("query %s: %w", q.ID, err)
		}
	}
	fmt.Fprintf(stdout, "%s (%s split): %d judged queries through the MCP adapter (%s, stdio), tokens = tokens_used of the answers (cl100k)\n\n",
		name, split, len(qs), filepath.Base(o.adapter))
	fmt.Fprintf(stdout, "%-44s %14s %12s %9s\n", "strategy", "tokens/query", "success@10", "seconds")
	for _, st := range tokenStrategies() {
		t0 := time.Now()
		total, hits := 0, 0
		for _, q := range qs {
			spent, read, err := st.run(ctx, m, q.Text)
			if err != nil {
				return fmt.Errorf("query %s (%s): %w", q.ID, st.name, err)
			}
			total += spent
			docs, err := documents(read)
			if err != nil {
				return err
			}
			for _, d := range docs {
				if ds.Qrels[q.ID][d] > 0 {
					hits++
					break
				}
			}
		}
		fmt.Fprintf(stdout, "%-44s %14.1f %12.4f %9.1f\n", st.name,
			float64(total)/float64(len(qs)), float64(hits)/float64(len(qs)), time.Since(t0).Seconds())
	}
	return nil
}
