package chunker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/retrievaleval"
)

// BenchmarkChunkSciFact chunks 1,000 SciFact abstracts (one chunk each,
// mostly) — the per-document overhead case. The corpus is
// $BMCIS_SCIFACT_DIR or <repo>/../shared/data/scifact.
func BenchmarkChunkSciFact(b *testing.B) {
	dir := os.Getenv("BMCIS_SCIFACT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "data", "scifact")
	}
	ds, err := retrievaleval.LoadBEIR(dir, "train")
	if err != nil {
		b.Skipf("SciFact not available: %v", err)
	}
	texts := make([]string, 0, 1000)
	for _, d := range ds.Corpus[:min(1000, len(ds.Corpus))] {
		texts = append(texts, d.Title+"\n\n"+d.Text)
	}
	c, err := chunker.NewDefault()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, t := range texts {
			chunks, err := c.Split(b.Context(), chunker.Abstract, "", t)
			if err != nil {
				b.Fatal(err)
			}
			n += len(chunks)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
}
