package chunker

import (
	"fmt"
	"strings"
	"testing"
)

func benchMarkdown() string {
	var b strings.Builder
	for s := 0; s < 40; s++ {
		fmt.Fprintf(&b, "## Section %d\n\n", s)
		for p := 0; p < 6; p++ {
			b.WriteString(sentences(fmt.Sprintf("s%dp%d", s, p), 8))
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "### Example %d\n\n```go\n", s)
		for l := 0; l < 15; l++ {
			fmt.Fprintf(&b, "x%d := compute(%d, \"arg\")\n", l, l)
		}
		b.WriteString("```\n\n")
	}
	return b.String()
}

// BenchmarkChunkMarkdown reports chunks/s for a ~100k-token markdown guide
// with default options (512-token chunks, 50-token overlap).
func BenchmarkChunkMarkdown(b *testing.B) {
	doc := benchMarkdown()
	c := newTestChunker(b, DefaultOptions())
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		chunks, err := c.Split(b.Context(), Markdown, "Bench", doc)
		if err != nil {
			b.Fatal(err)
		}
		n += len(chunks)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "chunks/s")
	b.ReportMetric(float64(c.Tokenizer().Count(doc))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
