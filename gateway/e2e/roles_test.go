package e2e

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	authv1 "github.com/bmcis/knowledge/gen/go/bmcis/auth/v1"
	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/rpcauth"
)

// Every method of every generated BMCIS service has a rule in rpcauth's
// table, and the table names no method that does not exist: a new RPC
// cannot ship without someone deciding who may call it.
func TestEveryRPCHasAnAccessRule(t *testing.T) {
	// Importing the packages registers their files.
	_ = searchv1.File_bmcis_search_v1_search_proto
	_ = vendorgraphv1.File_bmcis_vendorgraph_v1_vendorgraph_proto
	_ = authv1.File_bmcis_auth_v1_auth_proto
	var generated []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package().Parent() != "bmcis" && !isBMCIS(fd.Package()) {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				generated = append(generated, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	require.NotEmpty(t, generated)
	for _, m := range generated {
		roles, ok := rpcauth.Rule(m)
		require.True(t, ok, "%s has no access rule in platform/rpcauth", m)
		require.NotEmpty(t, roles, m)
	}
	require.ElementsMatch(t, generated, rpcauth.Methods(), "the table and the generated services name the same methods")
}

func isBMCIS(p protoreflect.FullName) bool {
	for ; p != ""; p = p.Parent() {
		if p == "bmcis" {
			return true
		}
	}
	return false
}

// The credential the adapter and the gateway hold (read) writes nothing and
// administers nothing, on the real services; the ingest credential
// administers no keys; the admin one ingests nothing.
func TestReadCredentialCannotWrite(t *testing.T) {
	s := newStack(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	writes := map[string]func(context.Context) error{
		"IngestDocuments": func(ctx context.Context) error {
			st, err := s.search.IngestDocuments(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&searchv1.IngestDocumentsRequest{Document: &searchv1.Document{ExternalId: "x", Content: []byte("injected")}}); err != nil && err != io.EOF {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		},
		"DeleteDocument": func(ctx context.Context) error {
			_, err := s.search.DeleteDocument(ctx, &searchv1.DeleteDocumentRequest{ExternalId: "x"})
			return err
		},
		"Reindex": func(ctx context.Context) error {
			_, err := s.search.Reindex(ctx, &searchv1.ReindexRequest{})
			return err
		},
		"SyncEntityNames": func(ctx context.Context) error {
			st, err := s.search.SyncEntityNames(ctx)
			if err != nil {
				return err
			}
			if err := st.Send(&searchv1.SyncEntityNamesRequest{Names: []*searchv1.EntityName{{
				EntityId: "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b", Name: "Injected", IsVendor: true}}}); err != nil && err != io.EOF {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		},
		"ImportGraph": func(ctx context.Context) error {
			st, err := s.vendor.ImportGraph(ctx)
			if err != nil {
				return err
			}
			_, err = st.CloseAndRecv()
			return err
		},
	}
	admin := map[string]func(context.Context) error{
		"CreateKey": func(ctx context.Context) error {
			_, err := s.auth.CreateKey(ctx, &authv1.CreateKeyRequest{Name: "sneaky"})
			return err
		},
		"ListKeys": func(ctx context.Context) error {
			_, err := s.auth.ListKeys(ctx, &authv1.ListKeysRequest{})
			return err
		},
		"RevokeKey": func(ctx context.Context) error {
			_, err := s.auth.RevokeKey(ctx, &authv1.RevokeKeyRequest{KeyId: "nokey0000"})
			return err
		},
		"RotateKey": func(ctx context.Context) error {
			_, err := s.auth.RotateKey(ctx, &authv1.RotateKeyRequest{KeyId: "nokey0000"})
			return err
		},
		// The audit trail is the operators' to read (docs/AUDIT.md).
		"ListAuditEvents": func(ctx context.Context) error {
			_, err := s.auth.ListAuditEvents(ctx, &authv1.ListAuditEventsRequest{})
			return err
		},
	}
	refused := func(t *testing.T, cred string, calls map[string]func(context.Context) error) {
		for name, call := range calls {
			err := call(grpcclient.WithCredential(ctx, cred))
			require.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", name, err)
		}
	}
	t.Run("read credential", func(t *testing.T) {
		refused(t, serviceToken, writes)
		refused(t, serviceToken, admin)
	})
	t.Run("ingest credential", func(t *testing.T) { refused(t, ingestToken, admin) })
	t.Run("admin credential", func(t *testing.T) { refused(t, adminToken, writes) })

	// Nothing was written: the read credential's "ingestion" left no document.
	resp, err := s.search.GetChunks(ctx, &searchv1.GetChunksRequest{ChunkIds: []int64{1}})
	require.NoError(t, err)
	require.Empty(t, resp.GetChunks())
	st, err := s.search.GetIndexStatus(ctx, &searchv1.GetIndexStatusRequest{})
	require.NoError(t, err)
	require.Zero(t, st.GetDocuments())

	// And each role does its own job.
	_, err = s.auth.ListKeys(grpcclient.WithCredential(ctx, adminToken), &authv1.ListKeysRequest{})
	require.NoError(t, err)
	_, err = s.search.DeleteDocument(grpcclient.WithCredential(ctx, ingestToken), &searchv1.DeleteDocumentRequest{ExternalId: "x"})
	require.NotEqual(t, codes.PermissionDenied, status.Code(err), "%v", err)
}
