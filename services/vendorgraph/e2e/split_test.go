// Package e2e runs vendorgraph as deployed, next to a real search.
package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	searchv1 "github.com/bmcis/knowledge/gen/go/bmcis/search/v1"
	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/platform/grpcclient"
	"github.com/bmcis/knowledge/platform/stacktest"
	"github.com/bmcis/knowledge/platform/testdb"
)

func TestMain(m *testing.M) { stacktest.Main(m) }

// Vendorgraph runs on a PostgreSQL server of its own, search on another:
// nothing crosses but gRPC. An import links the chunks search already
// holds (the names go to search, which re-links), GetVendor's evidence
// comes from search, search's results name the vendor, and a new alias
// re-links incrementally. Neither database holds the other's data.
func TestVendorGraphOnItsOwnDatabase(t *testing.T) {
	graphDB := stacktest.StartPostgres(t) // a second PostgreSQL instance
	_, searchURL := testdb.New(t)
	s := stacktest.Start(t, stacktest.Options{
		DatabaseURL: searchURL,
		Services:    []string{stacktest.Search, stacktest.VendorGraph},
		ServiceEnv: map[string]map[string]string{
			stacktest.VendorGraph: {"DATABASE_URL": testdb.ServiceURL(t, graphDB.URL(), stacktest.VendorGraph)},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s.IngestDocs(t, map[string]string{"split/zyxwv.md": "# Zyxwv\n\nThe Zyxwv Holdings contract was signed by Qrstu Group in March; Qrstu Group renews it yearly.\n"})
	s.ImportGraphLines(t, []string{`{"kind":"entity","id":"split-zyxwv","name":"Zyxwv Holdings","entity_type":"COMPANY","confidence":0.9,"is_vendor":true}`})

	vconn, err := grpcclient.Dial(s.Addr(stacktest.VendorGraph), stacktest.ServiceToken)
	require.NoError(t, err)
	defer vconn.Close()
	vendors := vendorgraphv1.NewVendorGraphServiceClient(vconn)
	evidence := func() *vendorgraphv1.GetVendorResponse {
		resp, err := vendors.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Zyxwv Holdings", MaxEvidence: 5})
		require.NoError(t, err)
		return resp
	}
	first := evidence()
	require.EqualValues(t, 1, first.GetEvidenceChunkCount(), "importing a vendor links the chunk already naming it")
	require.Len(t, first.GetEvidenceDocuments(), 1)
	require.Equal(t, "split/zyxwv.md", first.GetEvidenceDocuments()[0].GetDocumentId())
	require.EqualValues(t, 1, first.GetEvidenceDocuments()[0].GetMentionCount())
	require.Contains(t, first.GetEvidence()[0].GetSnippet(), "Zyxwv Holdings")

	// A new alias: search re-links through its words index.
	s.ImportGraphLines(t, []string{`{"kind":"entity","id":"split-zyxwv","name":"Zyxwv Holdings","entity_type":"COMPANY","confidence":0.9,"is_vendor":true,"aliases":["Qrstu Group"]}`})
	again := evidence()
	require.False(t, again.GetCacheHit(), "the import dropped the cached graph")
	require.EqualValues(t, 3, again.GetEvidenceDocuments()[0].GetMentionCount(), "the new alias links the chunk that held it")

	sconn, err := grpcclient.Dial(s.Addr(stacktest.Search), stacktest.ServiceToken)
	require.NoError(t, err)
	defer sconn.Close()
	res, err := searchv1.NewSearchServiceClient(sconn).Search(ctx, &searchv1.SearchRequest{Query: "Zyxwv Holdings contract Qrstu Group", Limit: 5})
	require.NoError(t, err)
	require.NotEmpty(t, res.GetResults())
	var named []string
	for _, m := range res.GetResults()[0].GetMentions() {
		named = append(named, m.GetName())
	}
	require.Contains(t, named, "Zyxwv Holdings", "search's results name the vendor from its own copy of the names")
	var queryVendors []string
	for _, m := range res.GetQueryVendors() {
		queryVendors = append(queryVendors, m.GetName())
	}
	require.Contains(t, queryVendors, "Zyxwv Holdings")

	// Each database holds its own service's data only.
	count := func(url, sql string) int {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var n int
		require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	require.Equal(t, 1, count(graphDB.URL(), "SELECT count(*) FROM vendorgraph.entities"))
	require.Zero(t, count(graphDB.URL(), "SELECT count(*) FROM search.chunks"), "vendorgraph's database holds no documents")
	require.Zero(t, count(graphDB.URL(), "SELECT count(*) FROM search.entity_mentions"))
	require.Zero(t, count(searchURL, "SELECT count(*) FROM vendorgraph.entities"), "search's database holds no graph")
	require.Equal(t, 1, count(searchURL, "SELECT count(*) FROM search.entity_names"))
	require.Positive(t, count(searchURL, "SELECT count(*) FROM search.entity_mentions"))
}
