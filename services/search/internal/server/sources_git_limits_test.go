package server_test

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// A git repository grown past the run's byte limit (a huge binary file
// committed) fails the run as too large while the clone downloads; the
// documents the source synced before stay searchable and counted.
func TestGitSourceOverTheByteLimitKeepsDocuments(t *testing.T) {
	repo := newGitRepo(t)
	gitCommitFiles(t, repo, map[string]string{"oncall.md": "# On call\n\nPage the narwhal team when the queue backs up."})
	cfg := sourcesConfig()
	cfg.Sources.Limits.MaxTotalBytes = 256 << 10
	pool, _ := newDB(t)
	c := startReplica(t, pool, cfg).client

	_, err := c.AddSource(callCtx(t), &searchv1.AddSourceRequest{Name: "handbook", Kind: "git",
		Settings: map[string]string{"url": "file://" + repo}})
	require.NoError(t, err)
	run, err := c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	require.NoError(t, err)
	require.EqualValues(t, 1, run.GetDocumentsWritten())

	huge := make([]byte, 1<<20) // random: its pack is as big as it is
	_, err = rand.Read(huge)
	require.NoError(t, err)
	gitCommitFiles(t, repo, map[string]string{"diagram.bin": string(huge),
		"oncall.md": "# On call\n\nPage the walrus team now."})
	_, err = c.SyncSource(callCtx(t), &searchv1.SyncSourceRequest{Name: "handbook"})
	requireCode(t, err, codes.ResourceExhausted)
	require.Equal(t, []string{"handbook:oncall.md"}, bm25IDs(t, c, "narwhal"), "a failed run changes nothing")
	require.Empty(t, bm25IDs(t, c, "walrus"))
	src := listedSource(t, c, "handbook")
	require.Equal(t, "failed", src.GetLastStatus())
	require.Contains(t, src.GetLastError(), "too_large")
	require.EqualValues(t, 1, src.GetDocumentCount())
}
