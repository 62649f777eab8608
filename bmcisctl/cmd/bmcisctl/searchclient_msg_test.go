package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
)

// An interrupted stream is worth re-running; one the service refused is
// not, and the message says which.
func TestIngestErrorAdvice(t *testing.T) {
	acked := &searchv1.IngestDocumentsProgress{DocumentsWritten: 3, DocumentsUnchanged: 1}
	for _, tc := range []struct {
		name        string
		err         error
		unconfirmed bool
		want        []string
	}{
		{"connection lost", status.Error(codes.Unavailable, "connection reset"), false,
			[]string{"interrupted after 5 document(s) sent: 4 committed", "re-run the same command to finish"}},
		{"refused", status.Error(codes.InvalidArgument, `keep_folders: "./a" is not a clean folder path`), false,
			[]string{"refused after 5 document(s) sent: 4 committed", "deleted nothing", "refused the same way"}},
		{"refused by an older service", status.Error(codes.PermissionDenied, "not allowed"), true,
			[]string{"refused after 5 document(s) sent: how many were committed is unconfirmed", "refused the same way"}},
		{"not a status", errors.New("the service ended the stream without a summary"), false,
			[]string{"interrupted", "re-run the same command to finish"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ingestInterruptedError{Sent: 5, Err: tc.err, Unconfirmed: tc.unconfirmed}
			if !tc.unconfirmed {
				e.Acked = acked
			}
			for _, w := range tc.want {
				require.Contains(t, e.Error(), w)
			}
			if refused(tc.err) {
				require.NotContains(t, e.Error(), "re-run the same command to finish")
			}
		})
	}
}
