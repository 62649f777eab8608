package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/bmcis/knowledge/platform/retrievaleval"
)

func init() {
	commands["eval"] = command{
		summary: "measure retrieval quality through the service: eval -beir DIR [-split train] [-modes bm25,vector,hybrid]; with -tokens, tokens-to-answer through the MCP adapter",
		run:     runEval,
	}
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	dir := fs.String("beir", "", "BEIR data set folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)")
	split := fs.String("split", "train", "qrels split")
	modes := fs.String("modes", "bm25,vector,hybrid", "modes to measure")
	noIngest := fs.Bool("no-ingest", false, "do not (re-)ingest the corpus first")
	parallel := fs.Int("parallel", 4, "queries in flight")
	quiet := fs.Bool("quiet", false, "no progress bar while ingesting")
	tokens := fs.Bool("tokens", false, "measure tokens per query and success@10 through the MCP adapter (naive full-mode search vs progressive search + get_chunks of the top 3) instead of retrieval quality")
	adapter := fs.String("adapter", envOr("BMCIS_MCP_ADAPTER_BIN", "mcp-adapter"), "with -tokens: the MCP adapter binary, started over stdio with this environment (BMCIS_API_KEY and the service addresses, or BMCIS_MCP_URL; BMCIS_MCP_ADAPTER_BIN)")
	maxQueries := fs.Int("queries", 0, "with -tokens: only the first N judged queries (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageErrorf("-beir DIR is required")
	}
	if *maxQueries < 0 {
		return usageErrorf("-queries must be 0 (all) or more, not %d", *maxQueries)
	}
	if *parallel < 1 {
		return usageErrorf("-parallel must be at least 1, got %d", *parallel)
	}
	ms, err := parseSearchModes(*modes)
	if err != nil {
		return err
	}
	ds, err := retrievaleval.LoadBEIR(*dir, *split)
	if err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envReadToken)
	if err != nil {
		return err
	}
	defer closeConn()

	if !*noIngest {
		// Ingestion is idempotent: an already ingested corpus is a fast no-op.
		corpus := filepath.Join(*dir, "corpus.jsonl")
		bar := newSearchProgressBar(stderr, len(ds.Corpus), *quiet)
		sum, err := searchIngest(ctx, c, []string{corpus}, func(sent, problems int) { bar.update(sent + problems) })
		bar.done()
		if err != nil {
			return fmt.Errorf("ingest %s: %w", corpus, err)
		}
		fmt.Fprintf(stderr, "corpus: %d documents (%d written, %d unchanged, %d failed), %d chunks written, %.1f s\n",
			sum.Resp.DocumentsReceived, sum.Resp.DocumentsWritten, sum.Resp.DocumentsUnchanged,
			int(sum.Resp.DocumentsFailed)+len(sum.Problems), sum.Resp.ChunksWritten, sum.Seconds)
	}
	if *tokens {
		return runTokenEval(ctx, c, ds, filepath.Base(filepath.Clean(*dir)), *split,
			tokenEvalOptions{adapter: *adapter, maxQueries: *maxQueries,
				adapterEnv: []string{"BMCIS_LOG_LEVEL=" + envOr("BMCIS_LOG_LEVEL", "warn")}}, stdout, stderr)
	}
	qs := make([]searchQuery, len(ds.Queries))
	for i, q := range ds.Queries {
		qs[i] = searchQuery{ID: q.ID, Text: q.Text}
	}
	fmt.Fprintf(stdout, "%s (%s split): %d documents, %d judged queries, top 100 per query through %s\n\n",
		filepath.Base(filepath.Clean(*dir)), *split, len(ds.Corpus), len(qs), *addr)
	fmt.Fprintf(stdout, "%-8s %9s %11s %9s\n", "mode", "nDCG@10", "Recall@100", "seconds")
	for _, mode := range ms {
		t0 := time.Now()
		res, err := searchRunQueries(ctx, c, qs, mode, nil, 100, false, *parallel)
		if err != nil {
			return err
		}
		run := retrievaleval.Run{}
		for i, q := range qs {
			ids := make([]string, len(res[i]))
			for j, r := range res[i] {
				ids[j] = r.Chunk.DocumentId
			}
			run[q.ID] = ids
		}
		m := retrievaleval.Evaluate(run, ds.Qrels)
		fmt.Fprintf(stdout, "%-8s %9.4f %11.4f %9.1f\n", searchModeName(mode), m.NDCG10, m.Recall100, time.Since(t0).Seconds())
	}
	return nil
}
