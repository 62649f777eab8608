package formats

import (
	"context"
	"testing"

	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// BenchmarkPDFEngineStart is the cost the first PDF pays: compiling PDFium
// and starting one instance, with an empty compilation cache (-benchtime=1x:
// one start takes seconds).
func BenchmarkPDFEngineStart(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		b.Setenv("BMCIS_PDF_CACHE_DIR", b.TempDir())
		b.StartTimer()
		pool, err := newPDFPool(pdfRuntimeConfig())
		if err != nil {
			b.Fatal(err)
		}
		inst, err := pool.GetInstanceWithContext(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		_ = inst.Close()
		_ = pool.Close()
	}
}

// BenchmarkPDFEngineStartCached is the same start with the on-disk
// compilation cache filled (every process after the first).
func BenchmarkPDFEngineStartCached(b *testing.B) {
	b.Setenv("BMCIS_PDF_CACHE_DIR", b.TempDir())
	warm, err := newPDFPool(pdfRuntimeConfig())
	if err != nil {
		b.Fatal(err)
	}
	_ = warm.Close()
	for b.Loop() {
		pool, err := newPDFPool(pdfRuntimeConfig())
		if err != nil {
			b.Fatal(err)
		}
		inst, err := pool.GetInstanceWithContext(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		_ = inst.Close()
		_ = pool.Close()
	}
}

// BenchmarkExtract is one document's extraction with the engine running.
func BenchmarkExtract(b *testing.B) {
	if err := WarmPDF(); err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"pdf", sample.PDF(sample.Handbook)},
		{"docx", sample.DOCX(sample.Handbook)},
		{"html", sample.HTML(sample.Handbook)},
	} {
		format, _ := ByName(f.name)
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			for b.Loop() {
				if _, err := format.Extract(context.Background(), f.data, "bench."+f.name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
