package main

import (
	"context"
	"fmt"
	"io"
	"time"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

func init() {
	commands["reindex"] = command{
		summary: "retrain (builtin) or re-embed (openai, ollama) every chunk and activate the model, on the search service: reindex [-addr HOST:PORT] [-o FORMAT]",
		run:     runReindex,
	}
}

func runReindex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reindex", stderr)
	addr := fs.String("addr", searchAddrFlag(), "search gRPC address (BMCIS_SEARCH_ADDR)")
	output := outputFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl reindex [-addr HOST:PORT]")
		fmt.Fprintln(stderr, "  Asks the search service (with the ingest credential, BMCIS_INGEST_TOKEN) to reindex with its own")
		fmt.Fprintln(stderr, "  embedder settings (BMCIS_EMBEDDER, BMCIS_EMBEDDER_URL, BMCIS_EMBEDDER_MODEL, BMCIS_EMBEDDING_DIMENSIONS,")
		fmt.Fprintln(stderr, "  set on the service): it resizes the vector column if the dimension changed, trains a new builtin")
		fmt.Fprintln(stderr, "  model on every stored chunk (or uses the configured remote model), re-embeds every chunk, activates")
		fmt.Fprintln(stderr, "  the model in one transaction and rebuilds the HNSW index. The other replicas switch to the new")
		fmt.Fprintln(stderr, "  model through the change feed. Interrupting it leaves the previous model active.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("reindex takes no arguments")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	c, closeConn, err := searchDial(*addr, envIngestToken)
	if err != nil {
		return err
	}
	defer closeConn()
	t0 := time.Now()
	fmt.Fprintf(stderr, "reindexing on %s...\n", *addr)
	rep, err := c.Reindex(ctx, &searchv1.ReindexRequest{})
	if err != nil {
		return fmt.Errorf("reindex via %s: %w", *addr, err)
	}
	// The service's report, and the whole command's seconds.
	v, err := protoValue(rep)
	if err != nil {
		return err
	}
	res, _ := v.(map[string]any)
	res["seconds"] = time.Since(t0).Seconds()
	return writeResult(stdout, *output, res, func(w io.Writer) error {
		fmt.Fprintf(w, "model      %s (active; %s, %d dimensions)\n", rep.GetModel(), rep.GetEmbedderProvider(), rep.GetEmbedderDimensions())
		if rep.GetColumnResized() {
			fmt.Fprintf(w, "column     resized to vector(%d)\n", rep.GetEmbedderDimensions())
		}
		if rep.GetTrained() {
			fmt.Fprintf(w, "trained    on %d chunks in %.1f s\n", rep.GetTrainedChunks(), rep.GetTrainSeconds())
		}
		fmt.Fprintf(w, "embedded   %d of %d chunks (embed %.1f s, write %.1f s)\n", rep.GetEmbeddedChunks(), rep.GetTotalChunks(), rep.GetEmbedSeconds(), rep.GetWriteSeconds())
		if rep.GetIndexRebuilt() {
			fmt.Fprintf(w, "hnsw index rebuilt in %.1f s\n", rep.GetIndexSeconds())
		}
		fmt.Fprintf(w, "seconds    %.1f\n", res["seconds"])
		return nil
	})
}
