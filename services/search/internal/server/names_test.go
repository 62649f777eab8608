package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

const zyxwvID = "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"

func syncNames(t *testing.T, c searchv1.SearchServiceClient, batches ...[]*searchv1.EntityName) (*searchv1.SyncEntityNamesResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.SyncEntityNames(ctx)
	require.NoError(t, err)
	for _, b := range batches {
		if err := st.Send(&searchv1.SyncEntityNamesRequest{Names: b}); err != nil {
			if errors.Is(err, io.EOF) {
				break // answered early; CloseAndRecv has the status
			}
			require.NoError(t, err)
		}
	}
	return st.CloseAndRecv()
}

// The names vendorgraph sends link the chunks search already holds and
// re-link as they change (a new alias); the evidence search answers comes
// from those links, ranked, with snippets, inside the categories asked.
func TestSyncEntityNamesRelinksAndAnswersEvidence(t *testing.T) {
	r, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustIngest(t, r.client,
		md("contracts", "legal", "Contracts", "The Zyxwv Holdings contract was signed by Qrstu Group; Qrstu Group renews it."),
		md("minutes", "hr", "Minutes", "Nothing about any vendor here."))

	vendor := &searchv1.EntityName{EntityId: zyxwvID, Name: "Zyxwv Holdings", EntityType: "COMPANY", IsVendor: true}
	resp, err := syncNames(t, r.client, []*searchv1.EntityName{vendor})
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.GetNamesStored())
	require.EqualValues(t, 1, resp.GetChunksRelinked(), "only the chunk holding the name's words")
	require.Positive(t, resp.GetChunksIndexed())

	ev, err := r.client.GetEntityEvidence(ctx, &searchv1.GetEntityEvidenceRequest{EntityId: zyxwvID, Limit: 5})
	require.NoError(t, err)
	require.EqualValues(t, 1, ev.GetChunkCount())
	require.Len(t, ev.GetChunks(), 1)
	require.Contains(t, ev.GetChunks()[0].GetSnippet(), "Zyxwv Holdings")
	require.Equal(t, "contracts", ev.GetDocuments()[0].GetDocumentId())
	require.EqualValues(t, 1, ev.GetDocuments()[0].GetMentionCount())

	// A new alias, sent in a second message of the stream: the same chunk
	// now names the vendor three times.
	vendor.Aliases = []string{"Qrstu Group"}
	second, err := syncNames(t, r.client, nil, []*searchv1.EntityName{vendor})
	require.NoError(t, err)
	require.Greater(t, second.GetGraphVersion(), resp.GetGraphVersion())
	ev, err = r.client.GetEntityEvidence(ctx, &searchv1.GetEntityEvidenceRequest{EntityId: zyxwvID, Limit: 5})
	require.NoError(t, err)
	require.EqualValues(t, 3, ev.GetDocuments()[0].GetMentionCount())

	// Search's results name the vendor from its own copy of the names.
	res := search(t, r.client, &searchv1.SearchRequest{Query: "Zyxwv Holdings contract", Limit: 5})
	require.NotEmpty(t, res.GetResults())
	require.Equal(t, "Zyxwv Holdings", res.GetResults()[0].GetMentions()[0].GetName())

	// Outside the caller's categories there is no evidence.
	ev, err = r.client.GetEntityEvidence(ctx, &searchv1.GetEntityEvidenceRequest{EntityId: zyxwvID, Limit: 5, Categories: []string{"hr"}})
	require.NoError(t, err)
	require.Zero(t, ev.GetChunkCount())
	require.Empty(t, ev.GetChunks())

	// An entity search holds no names of has no evidence.
	ev, err = r.client.GetEntityEvidence(ctx, &searchv1.GetEntityEvidenceRequest{EntityId: "1b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b", Limit: 5})
	require.NoError(t, err)
	require.Zero(t, ev.GetChunkCount())
}

func TestSyncEntityNamesRefusesBadNames(t *testing.T) {
	r, _ := start(t)
	_, err := syncNames(t, r.client, []*searchv1.EntityName{{EntityId: "not-a-uuid", Name: "Acme"}})
	requireCode(t, err, codes.InvalidArgument)
	_, err = syncNames(t, r.client, []*searchv1.EntityName{{EntityId: zyxwvID, Name: ""}})
	requireCode(t, err, codes.InvalidArgument)
	_, err = r.client.GetEntityEvidence(context.Background(), &searchv1.GetEntityEvidenceRequest{EntityId: zyxwvID, Limit: 0})
	requireCode(t, err, codes.InvalidArgument)
}
