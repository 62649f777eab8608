package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

func init() {
	commands["reindex"] = command{
		summary: "retrain (builtin) or re-embed (openai, ollama) every chunk and activate the model; uses DATABASE_URL and BMCIS_EMBEDDER*",
		run:     runReindex,
	}
}

func runReindex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reindex", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bmcisctl reindex")
		fmt.Fprintln(stderr, "  Works on the database directly (DATABASE_URL, or the credentials file's) with the embedder configuration the search")
		fmt.Fprintln(stderr, "  service uses (BMCIS_EMBEDDER, BMCIS_EMBEDDER_URL, BMCIS_EMBEDDER_MODEL, BMCIS_EMBEDDER_API_KEY,")
		fmt.Fprintln(stderr, "  BMCIS_EMBEDDING_DIMENSIONS): resizes the vector column if the dimension changed, trains a new")
		fmt.Fprintln(stderr, "  builtin model on every stored chunk (or uses the configured remote model), re-embeds every")
		fmt.Fprintln(stderr, "  chunk, activates the model in one transaction and rebuilds the HNSW index. Running search")
		fmt.Fprintln(stderr, "  replicas switch to the new model through the change feed.")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("reindex takes no arguments")
	}
	env := cliEnv()
	db := pg.LoadConfig(env)
	cfg := embedding.LoadConfig(env)
	if err := env.Err(); err != nil {
		return usageErrorf("%v", err)
	}
	pool, err := migrations.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer pool.Close()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := embedding.New(store.New(pool), cfg, analysis.NewEnglish(), log)
	if err != nil {
		return err
	}
	t0 := time.Now()
	fmt.Fprintf(stderr, "reindexing with %s (%d dimensions)...\n", cfg.Provider, cfg.Dims)
	rep, err := m.Sweep(ctx, embedding.SweepOptions{Wait: true, Reindex: true, Bulk: true})
	if err != nil {
		return err
	}
	if rep.Model == "" {
		return fmt.Errorf("no model could be trained: %s", rep.NotTrainedOn)
	}
	fmt.Fprintf(stdout, "model      %s (active)\n", rep.Model)
	if rep.Resized {
		fmt.Fprintf(stdout, "column     resized to vector(%d)\n", cfg.Dims)
	}
	if rep.Trained {
		fmt.Fprintf(stdout, "trained    on %d chunks in %.1f s\n", rep.TrainedOn, rep.TrainTime.Seconds())
	}
	fmt.Fprintf(stdout, "embedded   %d of %d chunks (embed %.1f s, write %.1f s)\n", rep.Embedded, rep.TotalChunks, rep.EmbedTime.Seconds(), rep.WriteTime.Seconds())
	if rep.Rebuilt {
		fmt.Fprintf(stdout, "hnsw index rebuilt in %.1f s\n", rep.IndexTime.Seconds())
	}
	fmt.Fprintf(stdout, "seconds    %.1f\n", time.Since(t0).Seconds())
	return nil
}
