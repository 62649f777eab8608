package formats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klippa-app/go-pdfium"
	pdfiumerrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/responses"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/bmcis/knowledge/platform/chunker"
)

func init() {
	register("pdf", extractPDF)
}

// PDFium runs as WebAssembly inside the process (wazero, no cgo), so the
// service stays one static binary. Compiling the module costs seconds of
// CPU, so it happens once, on the first PDF, never at start-up.
var pdfEngine struct {
	sync.Mutex
	pool pdfium.Pool
}

// pdfWorkers bounds concurrent PDF extractions (each worker is a PDFium
// instance with its own linear memory).
const pdfWorkers = 2

// pdfInstance waits for a free worker (pdfWorkers bound them) until ctx
// ends.
func pdfInstance(ctx context.Context) (pdfium.Pdfium, error) {
	pdfEngine.Lock()
	if pdfEngine.pool == nil {
		pool, err := newPDFPool(pdfRuntimeConfig())
		if err != nil {
			pdfEngine.Unlock()
			return nil, fmt.Errorf("start PDF engine: %w", err)
		}
		pdfEngine.pool = pool
	}
	pool := pdfEngine.pool
	pdfEngine.Unlock()
	return pool.GetInstanceWithContext(ctx)
}

func newPDFPool(rc wazero.RuntimeConfig) (pdfium.Pool, error) {
	return webassembly.Init(webassembly.Config{
		MinIdle: 0, MaxIdle: pdfWorkers, MaxTotal: pdfWorkers, ReuseWorkers: true,
		RuntimeConfig: rc,
		// No file system at all: documents arrive as bytes, and a parser of
		// untrusted input has no business seeing the disk.
		FSConfig: wazero.NewFSConfig(),
		Stdout:   io.Discard, Stderr: io.Discard,
	})
}

// pdfRuntimeConfig is go-pdfium's runtime configuration (PDFium needs the
// exception-handling feature) plus an on-disk compilation cache, so only
// the first process on a machine pays the compile: BMCIS_PDF_CACHE_DIR, else
// the user's cache directory; none when neither is writable (a read-only
// container then compiles once per process).
func pdfRuntimeConfig() wazero.RuntimeConfig {
	rc := wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		WithCloseOnContextDone(true) // lets a timed-out extraction be interrupted
	dir := os.Getenv("BMCIS_PDF_CACHE_DIR")
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "bmcis", "pdfium")
		}
	}
	if dir == "" || os.MkdirAll(dir, 0o700) != nil {
		return rc
	}
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return rc
	}
	return rc.WithCompilationCache(cache)
}

// WarmPDF starts the PDF engine now instead of on the first PDF (for
// benchmarks and tests that time extraction alone).
func WarmPDF() error {
	inst, err := pdfInstance(context.Background())
	if err != nil {
		return err
	}
	return inst.Close()
}

// pdfPage is one page's lines with their font sizes.
type pdfLine struct {
	text string
	size float64
}

// extractPDF reads a PDF with PDFium, checking the Input between pages;
// when the caller's context ends (or pdfTimeout passes) during one page,
// the engine is interrupted.
func extractPDF(in *Input) (Extracted, error) {
	data := in.Data
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r\f "), []byte("%PDF-")) {
		return Extracted{}, errors.New("not a PDF (no %PDF- header)")
	}
	inst, err := pdfInstance(in.ctx)
	if err != nil {
		if cerr := in.Check(); cerr != nil {
			return Extracted{}, cerr
		}
		return Extracted{}, err
	}
	type result struct {
		ex  Extracted
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			// A killed instance may panic inside go-pdfium; the timeout
			// below has already answered for this document.
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("PDF engine failed: %v", p)}
			}
		}()
		ex, err := readPDF(inst, in)
		done <- result{ex, err}
	}()
	timer := time.NewTimer(pdfTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		_ = inst.Close()
		return r.ex, r.err
	case <-timer.C:
		// Interrupts the running WebAssembly (CloseOnContextDone) and
		// replaces the worker, so one hostile file cannot hold it.
		_ = inst.Kill()
		return Extracted{}, fmt.Errorf("PDF not read within %s (too complex or malformed)", pdfTimeout)
	case <-in.ctx.Done():
		// The caller is gone in the middle of a page: the same interrupt.
		_ = inst.Kill()
		return Extracted{}, in.Check()
	}
}

// pdfTimeout bounds reading one PDF: PDFium parses untrusted input.
var pdfTimeout = 60 * time.Second

func readPDF(inst pdfium.Pdfium, in *Input) (Extracted, error) {
	data, name := in.Data, in.Name
	doc, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
	if err != nil {
		switch {
		case errors.Is(err, pdfiumerrors.ErrPassword), errors.Is(err, pdfiumerrors.ErrSecurity):
			return Extracted{}, errors.New("encrypted PDF (needs a password)")
		case errors.Is(err, pdfiumerrors.ErrFormat), errors.Is(err, pdfiumerrors.ErrFile):
			return Extracted{}, errors.New("corrupt PDF (cannot be parsed)")
		}
		return Extracted{}, fmt.Errorf("unreadable PDF: %v", err)
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	count, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
	if err != nil {
		return Extracted{}, fmt.Errorf("unreadable PDF: %v", err)
	}
	pages := make([][]pdfLine, count.PageCount)
	var sizes []float64 // one per character, to find the body size
	for i := range pages {
		if err := in.Check(); err != nil {
			return Extracted{}, err
		}
		st, err := inst.GetPageTextStructured(&requests.GetPageTextStructured{
			Page:                   requests.Page{ByIndex: &requests.PageByIndex{Document: doc.Document, Index: i}},
			Mode:                   requests.GetPageTextStructuredModeRects,
			CollectFontInformation: true,
		})
		if err != nil {
			return Extracted{}, fmt.Errorf("page %d unreadable: %v", i+1, err)
		}
		pages[i] = pdfLines(st.Rects)
		for _, l := range pages[i] {
			for range len(l.text) {
				sizes = append(sizes, l.size)
			}
		}
	}
	if len(strings.Join(strings.Fields(joinPDF(pages)), "")) == 0 {
		return Extracted{}, errors.New("no text in PDF (scanned pages without a text layer?)")
	}
	title := ""
	if meta, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: doc.Document, Tag: "Title"}); err == nil {
		title = strings.Join(strings.Fields(meta.Value), " ")
	}
	if title == "" {
		title = path.Base(name) // "Handbook.pdf > p. 4 > ..."
	}
	return Extracted{Text: pdfMarkdown(pages, bodySize(sizes)), Layout: chunker.PagedMarkdown, Title: title}, nil
}

func joinPDF(pages [][]pdfLine) string {
	var b strings.Builder
	for _, p := range pages {
		for _, l := range p {
			b.WriteString(l.text)
		}
	}
	return b.String()
}

// pdfLines groups text runs into lines by their vertical position, in
// reading order (top to bottom, left to right).
func pdfLines(rects []*responses.GetPageTextStructuredRect) []pdfLine {
	type run struct {
		text              string
		top, left, bottom float64
		size              float64
	}
	runs := make([]run, 0, len(rects))
	for _, r := range rects {
		if strings.TrimSpace(r.Text) == "" {
			continue
		}
		size := 0.0
		if r.FontInformation != nil {
			size = r.FontInformation.RenderedSize
			if size == 0 {
				size = r.FontInformation.Size
			}
		}
		p := r.PointPosition
		runs = append(runs, run{text: r.Text, top: math.Max(p.Top, p.Bottom), bottom: math.Min(p.Top, p.Bottom), left: p.Left, size: size})
	}
	// PDF y grows upwards: the highest top comes first.
	sort.SliceStable(runs, func(i, j int) bool {
		if math.Abs(runs[i].top-runs[j].top) > 2 {
			return runs[i].top > runs[j].top
		}
		return runs[i].left < runs[j].left
	})
	var lines []pdfLine
	// The current line's runs, joined once it ends: += per run would copy
	// the line once per run, quadratic in a line of many runs.
	var parts []string
	endLine := func() {
		if len(lines) > 0 {
			lines[len(lines)-1].text = strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
		}
		parts = parts[:0]
	}
	lastTop := math.Inf(1)
	for _, r := range runs {
		if len(lines) > 0 && math.Abs(r.top-lastTop) <= 2 {
			l := &lines[len(lines)-1]
			parts = append(parts, r.text)
			l.size = math.Max(l.size, r.size)
			continue
		}
		endLine()
		lines = append(lines, pdfLine{size: r.size})
		parts = append(parts, r.text)
		lastTop = r.top
	}
	endLine()
	return lines
}

// bodySize is the font size most characters are set in.
func bodySize(sizes []float64) float64 {
	counts := map[float64]int{}
	best, bestN := 0.0, 0
	for _, s := range sizes {
		s = math.Round(s*2) / 2
		counts[s]++
		if counts[s] > bestN || (counts[s] == bestN && s < best) {
			best, bestN = s, counts[s]
		}
	}
	return best
}

// pdfMarkdown writes pages as markdown: lines set clearly larger than the
// body are headings (the largest sizes the highest levels), consecutive
// body lines join into paragraphs, and a form feed line separates pages
// (chunker.PagedMarkdown).
func pdfMarkdown(pages [][]pdfLine, body float64) string {
	var headingSizes []float64
	seen := map[float64]bool{}
	isHeading := func(l pdfLine) bool { return body > 0 && l.size >= body*1.15 && len(l.text) <= 200 }
	for _, p := range pages {
		for _, l := range p {
			if s := math.Round(l.size*2) / 2; isHeading(l) && !seen[s] {
				seen[s] = true
				headingSizes = append(headingSizes, s)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(headingSizes)))
	level := func(size float64) int {
		s := math.Round(size*2) / 2
		for i, h := range headingSizes {
			if h == s {
				return min(i+1, 6)
			}
		}
		return 6
	}
	var b strings.Builder
	for i, p := range pages {
		if i > 0 {
			b.WriteString("\f\n\n")
		}
		para := false
		for _, l := range p {
			if l.text == "" {
				continue
			}
			if isHeading(l) {
				if para {
					b.WriteString("\n\n")
					para = false
				}
				b.WriteString(strings.Repeat("#", level(l.size)) + " " + l.text + "\n\n")
				continue
			}
			if para {
				b.WriteString("\n")
			}
			b.WriteString(escapeMarkdownLine(l.text))
			para = true
		}
		if para {
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// escapeMarkdownLine keeps body text from being read as markdown
// structure (a line starting with "#" or a code fence).
func escapeMarkdownLine(s string) string {
	t := strings.TrimLeft(s, " ")
	if strings.HasPrefix(t, "#") || strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
		return `\` + t
	}
	return s
}
