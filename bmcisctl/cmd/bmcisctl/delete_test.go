package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeleteRemovesDocumentsByID(t *testing.T) {
	ctlServer(t)
	docs := t.TempDir()
	ctlWrite(t, docs, "security/a.md", "# Incident\n\nReport a suspected incident to the security desk at once.\n")
	ctlWrite(t, docs, "security/b.md", "# Phishing\n\nForward a phishing mail to the security desk, then delete it.\n")
	ctlWrite(t, docs, "cloud/c.md", "# Landing zone\n\nEach team gets an account in the landing zone.\n")
	code, _, errOut := ctlRun(t, "ingest", "-quiet", docs)
	require.Equal(t, 0, code, errOut)
	code, out, errOut := ctlRun(t, "search", "-mode", "bm25", "security desk")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "security/a.md")

	code, out, errOut = ctlRun(t, "delete", "security/a.md", "security/b.md")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "deleted security/a.md (1 chunks)")
	require.Contains(t, out, "deleted security/b.md (1 chunks)")
	code, out, errOut = ctlRun(t, "search", "-mode", "bm25", "security desk")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "security/a.md")
	require.NotContains(t, out, "security/b.md")

	// An unknown id is named; the known ones given with it are still deleted.
	code, out, errOut = ctlRun(t, "delete", "no/such.md", "cloud/c.md")
	require.Equal(t, exitPartial, code)
	require.Contains(t, errOut, `no document with id "no/such.md"`)
	require.Contains(t, errOut, "1 of 2 not found or refused")
	require.Contains(t, out, "deleted cloud/c.md")

	// Bad input is a usage error (exit 2), before anything is sent.
	code, _, errOut = ctlRun(t, "delete")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "give at least one document ID")
	code, _, errOut = ctlRun(t, "delete", " ")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "an empty document ID")
}
