package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	"github.com/bmcis/knowledge/platform/docid"
)

// Every id ingestion stores (up to docid.MaxBytes bytes) can be shown by
// GetDocument and found by ListDocuments' id prefix: an operator asks
// "who may read this document?" of any document there is.
func TestDocumentsTakeEveryIngestedID(t *testing.T) {
	r, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, id := range map[string]string{
		"longest ASCII id":      strings.Repeat("a", docid.MaxBytes),
		"1001 characters":       strings.Repeat("b", 1001),
		"longest multi-byte id": strings.Repeat("é", docid.MaxBytes/2),
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, int32(1), mustIngest(t, r.client, md(id, "policy", "Long id", "The okapi policy.")).GetDocumentsWritten())
			got, err := r.client.GetDocument(ctx, &searchv1.GetDocumentRequest{ExternalId: id})
			require.NoError(t, err)
			require.Equal(t, id, got.GetDocument().GetExternalId())
			list, err := r.client.ListDocuments(ctx, &searchv1.ListDocumentsRequest{IdPrefix: id})
			require.NoError(t, err)
			require.Len(t, list.GetDocuments(), 1)
			require.Equal(t, id, list.GetDocuments()[0].GetExternalId())
		})
	}
}
