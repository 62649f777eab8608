package rpcauth

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	readCred   = "read-credential-0123456789abcdef0123456789"
	ingestCred = "ingest-credential-0123456789abcdef012345678"
	adminCred  = "admin-credential-0123456789abcdef0123456789"
	graphCred  = "vendorgraph-credential-0123456789abcdef0123"
	// adapterCred is the MCP adapter's.
	adapterCred = "adapter-credential-0123456789abcdef01234567"
)

func TestAuthorize(t *testing.T) {
	v := NewVerifier(Credentials{Read: DigestOf(readCred), Adapter: DigestOf(adapterCred), Ingest: DigestOf(ingestCred), Admin: DigestOf(adminCred),
		VendorGraph: DigestOf(graphCred)})
	tests := []struct {
		name   string
		method string
		cred   string
		want   error
	}{
		{"read searches", "/bmcis.search.v1.SearchService/Search", readCred, nil},
		{"read checks keys", "/bmcis.auth.v1.AuthService/Check", readCred, nil},
		{"read may not ingest", "/bmcis.search.v1.SearchService/IngestDocuments", readCred, &ForbiddenError{}},
		{"read may not delete", "/bmcis.search.v1.SearchService/DeleteDocument", readCred, &ForbiddenError{}},
		{"read may not import", "/bmcis.vendorgraph.v1.VendorGraphService/ImportGraph", readCred, &ForbiddenError{}},
		{"read may not create keys", "/bmcis.auth.v1.AuthService/CreateKey", readCred, &ForbiddenError{}},
		{"ingest ingests", "/bmcis.search.v1.SearchService/IngestDocuments", ingestCred, nil},
		{"ingest reads status", "/bmcis.search.v1.SearchService/GetIndexStatus", ingestCred, nil},
		{"the adapter watches the index (its answer cache follows it)", "/bmcis.search.v1.SearchService/WatchIndex", adapterCred, nil},
		{"the adapter may not read the index status", "/bmcis.search.v1.SearchService/GetIndexStatus", adapterCred, &ForbiddenError{}},
		{"read may not watch the index", "/bmcis.search.v1.SearchService/WatchIndex", readCred, &ForbiddenError{}},
		{"ingest may not watch the index", "/bmcis.search.v1.SearchService/WatchIndex", ingestCred, &ForbiddenError{}},
		{"ingest may not search", "/bmcis.search.v1.SearchService/Search", ingestCred, &ForbiddenError{}},
		{"ingest may not list keys", "/bmcis.auth.v1.AuthService/ListKeys", ingestCred, &ForbiddenError{}},
		{"ingest (the operator) reindexes", "/bmcis.search.v1.SearchService/Reindex", ingestCred, nil},
		{"read may not reindex", "/bmcis.search.v1.SearchService/Reindex", readCred, &ForbiddenError{}},
		{"admin may not reindex", "/bmcis.search.v1.SearchService/Reindex", adminCred, &ForbiddenError{}},
		{"vendorgraph sends search the names an import changed", "/bmcis.search.v1.SearchService/SyncEntityNames", graphCred, nil},
		{"ingest may not send entity names", "/bmcis.search.v1.SearchService/SyncEntityNames", ingestCred, &ForbiddenError{}},
		{"read may not send entity names", "/bmcis.search.v1.SearchService/SyncEntityNames", readCred, &ForbiddenError{}},
		{"vendorgraph asks search for a vendor's evidence", "/bmcis.search.v1.SearchService/GetEntityEvidence", graphCred, nil},
		{"read may not ask for evidence directly", "/bmcis.search.v1.SearchService/GetEntityEvidence", readCred, &ForbiddenError{}},
		{"vendorgraph may not search", "/bmcis.search.v1.SearchService/Search", graphCred, &ForbiddenError{}},
		{"vendorgraph may not ingest", "/bmcis.search.v1.SearchService/IngestDocuments", graphCred, &ForbiddenError{}},
		{"admin lists keys", "/bmcis.auth.v1.AuthService/ListKeys", adminCred, nil},
		{"admin may not check keys", "/bmcis.auth.v1.AuthService/Check", adminCred, &ForbiddenError{}},
		{"admin may not delete documents", "/bmcis.search.v1.SearchService/DeleteDocument", adminCred, &ForbiddenError{}},
		{"no credential", "/bmcis.search.v1.SearchService/Search", "", ErrMissing},
		{"unknown credential", "/bmcis.search.v1.SearchService/Search", "something-else-entirely-0123456789", ErrUnknown},
		{"a prefix of a credential", "/bmcis.search.v1.SearchService/Search", readCred[:10], ErrUnknown},
		{"method without a rule", "/bmcis.search.v1.SearchService/DropEverything", adminCred, ErrNoRule},
		{"health is exempt", "/grpc.health.v1.Health/Check", "", nil},
		{"reflection is exempt", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Authorize(tc.method, tc.cred)
			switch want := tc.want.(type) {
			case nil:
				require.NoError(t, err)
			case *ForbiddenError:
				var fe *ForbiddenError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, tc.method, fe.Method)
			default:
				require.True(t, errors.Is(err, want), "got %v, want %v", err, want)
			}
		})
	}
}

func TestOneCredentialMayHoldSeveralRoles(t *testing.T) {
	// Test harnesses give one credential every role; production settings refuse it.
	v := NewVerifier(Credentials{Read: DigestOf(readCred), Ingest: DigestOf(readCred)})
	require.ElementsMatch(t, []Role{Read, Ingest}, v.RolesOf(readCred))
	require.NoError(t, v.Authorize("/bmcis.search.v1.SearchService/IngestDocuments", readCred))
	require.NoError(t, v.Authorize("/bmcis.search.v1.SearchService/Search", readCred))
}

func TestParseDigest(t *testing.T) {
	d := DigestOf(readCred)
	got, err := ParseDigest(d.String())
	require.NoError(t, err)
	require.Equal(t, d, got)
	for _, bad := range []string{"", "xyz", d.String()[:62], d.String() + "00"} {
		_, err := ParseDigest(bad)
		require.Error(t, err, bad)
	}
}

func TestEveryRuleNamesKnownRoles(t *testing.T) {
	for _, m := range Methods() {
		roles, ok := Rule(m)
		require.True(t, ok)
		require.NotEmpty(t, roles, m)
		for _, r := range roles {
			require.Contains(t, Roles, r, m)
		}
	}
}

func TestClaims(t *testing.T) {
	v := NewVerifier(Credentials{Read: DigestOf(readCred), Adapter: DigestOf(adapterCred), Ingest: DigestOf(ingestCred), Admin: DigestOf(adminCred)})
	for _, tc := range []struct {
		name string
		cred string
		may  bool
	}{
		{"the adapter may present an OAuth subject", adapterCred, true},
		{"the read credential (the gateway) may not", readCred, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roles, err := v.AuthorizeRoles("/bmcis.auth.v1.AuthService/Check", tc.cred)
			require.NoError(t, err, "both may call Check")
			require.Equal(t, tc.may, MayClaim(WithRoles(context.Background(), roles), OAuthSubject))
		})
	}
	require.False(t, MayClaim(context.Background(), OAuthSubject), "roles not verified: no claim")
	for c, roles := range claims {
		require.NotEmpty(t, roles, c)
		for _, r := range roles {
			require.Contains(t, Roles, r, c)
		}
	}
}
