package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad input to eval -tokens is refused with a clear message before any
// work; the end-to-end run is mcp-adapter/e2e TestEvalTokens.
func TestEvalTokensBadInput(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "qrels"), 0o755))
	for name, body := range map[string]string{
		"corpus.jsonl":    `{"_id":"d1","title":"t","text":"glaciers retreat"}` + "\n",
		"queries.jsonl":   `{"_id":"q1","text":"why do glaciers retreat"}` + "\n",
		"qrels/train.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	t.Setenv(envReadToken, ctlToken)
	for name, tc := range map[string]struct {
		args []string
		code int
		msg  string
	}{
		"negative -queries": {[]string{"-queries", "-1"}, 2, "-queries must be 0 (all) or more, not -1"},
		"no adapter binary": {[]string{"-no-ingest", "-adapter", filepath.Join(dir, "no-such-adapter")}, 1, "start " + filepath.Join(dir, "no-such-adapter")},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"eval", "-tokens", "-beir", dir, "-addr", "127.0.0.1:1"}, tc.args...)
			require.Equal(t, tc.code, run(context.Background(), args, &stdout, &stderr), stderr.String())
			require.Contains(t, stderr.String(), tc.msg)
		})
	}
}
