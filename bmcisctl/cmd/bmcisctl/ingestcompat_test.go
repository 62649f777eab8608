package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bmcisctl ingest and sync against a search service older than
// IngestDocumentsAcked (a real service registered without it, so gRPC
// answers Unimplemented) fall back to IngestDocuments: the documents are
// stored, and the output says the counts were not confirmed along the way.
// Against a current service nothing changes.
func TestIngestFallsBackWithoutAckedRPC(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
		args func(dir string) []string
		// first and again are what the first run and a second run of the
		// same command report (the second proves the first was stored).
		first, again string
	}{
		{"ingest, current service", false, func(dir string) []string { return []string{"ingest", "-quiet", dir} },
			"documents  3 (written 3, skipped 0 unchanged, failed 0)", "documents  3 (written 0, skipped 3 unchanged, failed 0)"},
		{"ingest, older service", true, func(dir string) []string { return []string{"ingest", "-quiet", dir} },
			"documents  3 (written 3, skipped 0 unchanged, failed 0)", "documents  3 (written 0, skipped 3 unchanged, failed 0)"},
		{"sync, current service", false, func(dir string) []string { return []string{"sync", "wiki", dir} },
			"sync wiki: 3 sent (3 written, 0 unchanged)", "sync wiki: 3 sent (0 written, 3 unchanged)"},
		{"sync, older service", true, func(dir string) []string { return []string{"sync", "wiki", dir} },
			"sync wiki: 3 sent (3 written, 0 unchanged)", "sync wiki: 3 sent (0 written, 3 unchanged)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctlServerOf(t, tc.old)
			dir := t.TempDir()
			ctlWrite(t, dir, "a.md", "# A\n\nThe first page about walruses.\n")
			ctlWrite(t, dir, "b.md", "# B\n\nThe second page about narwhals.\n")
			ctlWrite(t, dir, "sub/c.md", "# C\n\nThe nested page about belugas.\n")
			for _, want := range []string{tc.first, tc.again} {
				code, out, errOut := ctlRun(t, tc.args(dir)...)
				require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
				require.Contains(t, out, want)
				require.Equal(t, tc.old, strings.Contains(out, UnconfirmedNote), "the note only for the older service:\n%s", out)
			}
		})
	}
}
