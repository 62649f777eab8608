package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/services/search/internal/formats/sample"
)

// peakRSS is a process's peak resident set (VmHWM), in MiB.
func peakRSS(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			require.NoError(t, err)
			return kb / 1024
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// A 20 MiB PDF, five times gRPC's 4 MiB message limit, goes in through
// `bmcisctl sync` in 1 MiB parts and is searchable by page; the service's
// peak memory stays within a bound (recorded in docs/BENCHMARKS.md:
// go test -count=1 -v -run TestBigPDF ./services/search/e2e/).
func TestBigPDF(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search}})
	addr := s.Addr(stacktest.Search)
	doc := sample.Doc{Title: "Plant Manual"}
	for p := 1; p <= 40; p++ {
		doc.Pages = append(doc.Pages, []sample.Block{
			{Level: 1, Text: fmt.Sprintf("Section %d", p)},
			{Text: fmt.Sprintf("Page %d covers valve%d maintenance, the pressure checks of line%d and the shutdown steps for pump%d.", p, p, p, p)},
		})
	}
	pdf := sample.BigPDF(doc, 20<<20)
	require.Greater(t, len(pdf), 20<<20-(64<<10))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manual.pdf"), pdf, 0o644))

	// Warm the PDF engine (its WebAssembly compile is a one-off cost) with
	// a small PDF, so the growth measured is the big document's.
	pid := s.Service(stacktest.Search).PID()
	start := peakRSS(t, pid)
	small := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(small, "handbook.pdf"), sample.PDF(sample.Handbook), 0o644))
	s.Ctl(t, "sync", "-addr", addr, "small", small)
	before := peakRSS(t, pid)
	out := s.Ctl(t, "sync", "-addr", addr, "plant", dir)
	require.Contains(t, out, "1 sent (1 written")
	after := peakRSS(t, pid)
	t.Logf("BENCH big-pdf: %d bytes; search peak RSS %.0f MiB at start, %.0f MiB after a small PDF, %.0f MiB after the 20 MiB PDF (+%.0f MiB)",
		len(pdf), start, before, after, after-before)

	got := s.Ctl(t, "search", "-addr", addr, "-mode", "bm25", "-limit", "1", "valve37")
	require.Contains(t, got, "(manual.pdf)")
	require.Contains(t, got, "Plant Manual > p. 37 > Section 37")
	// Bounded: the document is held about once in transit and once in the
	// PDF engine's memory, not once per message or per worker.
	require.Less(t, after-before, 8*20.0, "peak RSS grew by %.0f MiB for a 20 MiB document", after-before)
}
