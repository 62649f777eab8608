package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
)

// The real search binary writes an index snapshot once its feed is quiet,
// and a restart starts from it, catches up on a document ingested after
// it, and answers exactly as the replica did before the restart.
func TestRestartFromSnapshot(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{Services: []string{stacktest.Search},
		ServiceEnv: map[string]map[string]string{stacktest.Search: {
			"BMCIS_SEARCH_SNAPSHOT_QUIET": "0s", "BMCIS_SEARCH_SNAPSHOT_CHECK_INTERVAL": "1s",
			"BMCIS_SEARCH_SNAPSHOT_CHANGE_FRACTION": "0.5",
		}}})
	svc := s.Service(stacktest.Search)
	s.IngestDemoDocs(t)
	svc.WaitLog(t, `"msg":"index snapshot written"`, 30*time.Second)

	conn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.ServiceToken)
	require.NoError(t, err)
	defer conn.Close()
	c := searchv1.NewSearchServiceClient(conn)
	ctx := context.Background()
	queries := []string{"security audit", "vendor contract renewal", "incident response", "network"}
	ranked := func() map[string][]*searchv1.SearchResult {
		out := map[string][]*searchv1.SearchResult{}
		for _, q := range queries {
			require.Eventually(t, func() bool {
				resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: q, Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, NoCache: true, Limit: 20})
				if err == nil {
					out[q] = resp.GetResults()
				}
				return err == nil
			}, 30*time.Second, 50*time.Millisecond)
		}
		return out
	}
	status := func() *searchv1.GetIndexStatusResponse {
		st, err := c.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
		require.NoError(t, err)
		return st
	}
	// After the snapshot: one more document, which the restart catches up on.
	s.IngestDocs(t, map[string]string{"late.md": "# Late arrival\n\nThe quokka inventory was counted after the snapshot."})
	before := ranked()
	stBefore := status()
	svc.Restart(t)
	svc.WaitLog(t, `"source":"snapshot"`, 60*time.Second)
	after := ranked()
	for _, q := range queries {
		require.Equal(t, len(before[q]), len(after[q]), q)
		for i := range before[q] {
			require.True(t, proto.Equal(before[q][i], after[q][i]), "%s #%d: %v vs %v", q, i, before[q][i], after[q][i])
		}
	}
	resp, err := c.Search(ctx, &searchv1.SearchRequest{Query: "quokka inventory", Mode: searchv1.RetrievalMode_RETRIEVAL_MODE_BM25, NoCache: true, Limit: 5})
	require.NoError(t, err)
	require.NotEmpty(t, resp.GetResults())
	require.Equal(t, "late.md", resp.GetResults()[0].GetChunk().GetDocumentId())
	require.Contains(t, resp.GetResults()[0].GetChunk().GetChunkText(), "quokka inventory")
	stAfter := status()
	require.Equal(t, stBefore.Documents, stAfter.Documents)
	require.Equal(t, stBefore.Chunks, stAfter.Chunks)
	require.Equal(t, stBefore.IndexGeneration, stAfter.IndexGeneration)

	// The metrics say which snapshot it started from.
	mr, err := http.Get(svc.MetricsURL())
	require.NoError(t, err)
	body, err := io.ReadAll(mr.Body)
	require.NoError(t, mr.Body.Close())
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^bmcis_search_index_start_snapshot_generation (\d+)`).FindSubmatch(body)
	require.NotNil(t, m, "no start generation metric")
	gen, err := strconv.ParseInt(string(m[1]), 10, 64)
	require.NoError(t, err)
	require.Positive(t, gen)
	require.Less(t, gen, stAfter.IndexGeneration)
	require.Regexp(t, `bmcis_search_index_start_seconds\{source="snapshot"\}`, string(body))
}
