// Package e2e drives the real search service (platform/stacktest) with
// the real bmcisctl.
package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// PDF, DOCX and HTML files go in through `bmcisctl ingest` and the ingest
// RPC, are found by search with their structure in the context header, and
// broken files are reported one by one while the others go in.
func TestIngestPDFDOCXAndHTML(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	dir := t.TempDir()
	put := func(rel string, data []byte) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	pdf := sample.PDF(sample.Handbook)
	put("hr/handbook.pdf", pdf)
	// Longer sections, so each gets chunks of its own at the default size.
	long := sample.Doc{Title: sample.Handbook.Title}
	for _, page := range sample.Handbook.Pages {
		var p []sample.Block
		for _, b := range page {
			if b.Level == 0 {
				b.Text = strings.TrimSpace(strings.Repeat(b.Text+" ", 6))
			}
			p = append(p, b)
		}
		long.Pages = append(long.Pages, p)
	}
	put("it/handbook.docx", sample.DOCX(long))
	put("web/handbook.html", sample.HTML(long))
	put("notes/readme.md", []byte("# Readme\n\nThe markdown still goes in.\n"))
	put("broken/truncated.pdf", pdf[:len(pdf)/3])
	put("broken/renamed.pdf", []byte("a text file with the wrong extension"))
	put("broken/truncated.docx", sample.DOCX(sample.Handbook)[:200])
	put("broken/image.html", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 64)...))

	out, err := s.TryCtl("ingest", "-quiet", "-addr", s.Addr(stacktest.Search), dir)
	require.Error(t, err, "failures make the exit status 5 (partial)")
	require.Contains(t, out, "documents  8 (written 4, skipped 0 unchanged, failed 4)")
	for _, want := range []string{
		"broken/truncated.pdf: corrupt PDF",
		"broken/renamed.pdf: not a PDF (no %PDF- header)",
		"broken/truncated.docx: not a DOCX (not a zip archive)",
		"broken/image.html: not HTML (binary content)",
	} {
		require.Contains(t, out, want)
	}

	search := func(query, category string) string {
		return s.Ctl(t, "search", "-addr", s.Addr(stacktest.Search), "-mode", "bm25", "-limit", "1", "-category", category, query)
	}
	tests := []struct {
		category, query, file, header string
	}{
		{"hr", "phishing report button", "hr/handbook.pdf", "Employee Handbook > p. 3 > Security"},
		{"hr", "receipts thirty days", "hr/handbook.pdf", "Employee Handbook > p. 2 > Expenses"},
		{"it", "per diem boarding passes", "it/handbook.docx", "Employee Handbook > Expenses"},
		{"web", "phishing report button", "web/handbook.html", "Employee Handbook > Security"},
	}
	for _, tc := range tests {
		t.Run(tc.file+" "+tc.query, func(t *testing.T) {
			got := search(tc.query, tc.category)
			require.Contains(t, got, "("+tc.file+")")
			// The chunk's heading path starts at its section (a chunk may
			// go on into a subsection).
			require.Regexp(t, regexp.MustCompile(`(?m)^\s+`+regexp.QuoteMeta(tc.header)+`( > [^\[]+)?\s+\[chunk`), got)
		})
	}
	// Boilerplate never reached the index.
	for _, bp := range sample.Boilerplate {
		got := s.Ctl(t, "search", "-addr", s.Addr(stacktest.Search), "-mode", "bm25", bp)
		require.True(t, strings.HasPrefix(got, "0 results"), "%s found:\n%s", bp, got)
	}
	// Nothing half-written: the failed files left no documents behind.
	require.NotContains(t, s.Ctl(t, "search", "-addr", s.Addr(stacktest.Search), "-mode", "bm25", "-limit", "50", "handbook security expenses"), "broken/")
}
