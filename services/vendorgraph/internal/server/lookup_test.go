package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
)

func TestGetVendorNameMatching(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	type want struct {
		vendor      string   // found: the stored name
		ambiguous   []string // FAILED_PRECONDITION with these candidates
		suggestions []string // NOT_FOUND with these suggestions (may be empty)
	}
	for _, tc := range []struct {
		name, query string
		want        want
	}{
		{"exact", "Acme Corp", want{vendor: "Acme Corp"}},
		{"case", "aCmE cOrP", want{vendor: "Acme Corp"}},
		{"punctuation", "Acme, Corp.", want{vendor: "Acme Corp"}},
		{"white space", "  Acme \t  Corp ", want{vendor: "Acme Corp"}},
		{"other close vendor", "ACME inc.", want{vendor: "ACME Inc"}},
		{"alias", "Acme Corporation", want{vendor: "Acme Corp"}},
		{"alias case and punctuation", "vandelay import/export", want{vendor: "Vandelay Industries"}},
		{"ambiguous prefix", "Acme", want{ambiguous: []string{"Acme Corp", "ACME Inc", "Acme Ltd"}}},
		{"did you mean", "Cyberdine Systems", want{suggestions: []string{"Cyberdyne Systems"}}},
		{"did you mean by prefix", "Wayne Ent", want{suggestions: []string{"Wayne Enterprises"}}},
		{"not found", "Zzyzx Qwerty", want{suggestions: []string{}}},
		{"a non-vendor entity is not a vendor", "Acme Cloud Platform", want{suggestions: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: tc.query})
			switch {
			case tc.want.vendor != "":
				require.NoError(t, err)
				require.Equal(t, tc.want.vendor, resp.GetVendorName())
			case tc.want.ambiguous != nil:
				requireCode(t, err, codes.FailedPrecondition)
				d := detail[*vendorgraphv1.VendorAmbiguousDetail](t, err)
				require.Equal(t, tc.query, d.GetName())
				require.ElementsMatch(t, tc.want.ambiguous, d.GetCandidates())
			default:
				requireCode(t, err, codes.NotFound)
				d := detail[*vendorgraphv1.VendorNotFoundDetail](t, err)
				require.Equal(t, tc.query, d.GetName())
				require.Equal(t, tc.want.suggestions, append([]string{}, d.GetSuggestions()...))
			}
		})
	}
}

func TestGetVendorExactAliasSharedIsAmbiguous(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, []string{
		`{"kind":"entity","id":"a","name":"Northwind Traders","entity_type":"COMPANY","confidence":1,"is_vendor":true,"aliases":["Northwind"]}`,
		`{"kind":"entity","id":"b","name":"Northwind Hosting","entity_type":"COMPANY","confidence":1,"is_vendor":true,"aliases":["Northwind"]}`,
	})
	_, err := rep.client.GetVendor(ctxT(t), &vendorgraphv1.GetVendorRequest{Name: "northwind"})
	requireCode(t, err, codes.FailedPrecondition)
	require.Equal(t, []string{"Northwind Hosting", "Northwind Traders"}, detail[*vendorgraphv1.VendorAmbiguousDetail](t, err).GetCandidates())
}

// neighbourhoodCounts computes a depth-1 neighbourhood's statistics with
// plain SQL, independently of the service's queries.
func neighbourhoodCounts(t *testing.T, pool *pgxpool.Pool, vendorID string) (*vendorgraphv1.VendorStatistics, []string, []string) {
	t.Helper()
	ctx := context.Background()
	st := &vendorgraphv1.VendorStatistics{EntityTypeDistribution: map[string]int32{}, RelationshipTypeDistribution: map[string]int32{}}
	const hood = `
		WITH nb AS (
			SELECT target_id AS id FROM relationships WHERE source_id = $1::uuid
			UNION SELECT source_id FROM relationships WHERE target_id = $1::uuid),
		members AS (SELECT id FROM nb UNION SELECT $1::uuid)`
	rows, err := pool.Query(ctx, hood+` SELECT e.entity_type, count(*) FROM entities e JOIN nb ON nb.id = e.id GROUP BY 1`, vendorID)
	require.NoError(t, err)
	for rows.Next() {
		var typ string
		var n int32
		require.NoError(t, rows.Scan(&typ, &n))
		st.EntityTypeDistribution[typ] = n
		st.EntityCount += n
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, hood+` SELECT r.relationship_type, count(*) FROM relationships r
		WHERE r.source_id IN (SELECT id FROM members) AND r.target_id IN (SELECT id FROM members) GROUP BY 1`, vendorID)
	require.NoError(t, err)
	for rows.Next() {
		var typ string
		var n int32
		require.NoError(t, rows.Scan(&typ, &n))
		st.RelationshipTypeDistribution[typ] = n
		st.RelationshipCount += n
	}
	require.NoError(t, rows.Err())
	var entIDs, relIDs []string
	require.NoError(t, pool.QueryRow(ctx, hood+` SELECT ARRAY(SELECT id::text FROM nb), ARRAY(SELECT r.id::text FROM relationships r
		WHERE r.source_id IN (SELECT id FROM members) AND r.target_id IN (SELECT id FROM members))`, vendorID).Scan(&entIDs, &relIDs))
	return st, entIDs, relIDs
}

func TestGetVendorStatisticsMatchSQL(t *testing.T) {
	rep, pool := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	for _, name := range []string{"Acme Corp", "ACME Inc", "Acme Ltd", "Globex Corporation", "Initech", "Umbrella Corporation",
		"Stark Industries", "Wayne Enterprises", "Cyberdyne Systems", "Hooli", "Soylent Corp", "Vandelay Industries"} {
		t.Run(name, func(t *testing.T) {
			resp, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: name, MaxEntities: 100, MaxRelationships: 500})
			require.NoError(t, err)
			want, entIDs, relIDs := neighbourhoodCounts(t, pool, resp.GetVendorId())
			require.True(t, proto.Equal(want, resp.GetStatistics()), "want %v\n got %v", want, resp.GetStatistics())
			require.Greater(t, want.GetEntityCount(), int32(0))
			// Caps above the neighbourhood: everything, nothing truncated.
			require.ElementsMatch(t, entIDs, resp.GetEntityIds())
			require.ElementsMatch(t, relIDs, resp.GetRelationshipIds())
			require.False(t, resp.GetEntitiesTruncated())
			require.False(t, resp.GetRelationshipsTruncated())
		})
	}
}

func TestGetVendorReplyShape(t *testing.T) {
	rep, pool := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	full, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Acme Corp", MaxEntities: 100, MaxRelationships: 500})
	require.NoError(t, err)
	require.Equal(t, "Acme Corp", full.GetVendorName())
	require.Equal(t, importer.FormatUUID(importer.EntityID("acme-corp")), full.GetVendorId())
	require.Equal(t, []string{"Acme Corporation"}, full.GetAliases())
	require.Len(t, full.GetTopEntities(), 5)
	for i, e := range full.GetTopEntities() {
		require.True(t, proto.Equal(e, full.GetEntities()[i]))
	}
	// Ranked by relevance = confidence × strength, highest first.
	for i := 1; i < len(full.GetEntities()); i++ {
		require.GreaterOrEqual(t, full.GetEntities()[i-1].GetRelevance(), full.GetEntities()[i].GetRelevance())
	}
	// Jane Doe (0.94) WORKS_FOR Acme Corp (0.96): the only tie, so strength 0.96.
	jane := findEntity(t, full.GetEntities(), "Jane Doe")
	require.InDelta(t, 0.94*0.96, jane.GetRelevance(), 1e-9)
	require.Equal(t, "PERSON", jane.GetEntityType())
	require.Equal(t, 0.94, jane.GetConfidence(), "confidence reads back as written")
	require.Equal(t, "Chief Executive Officer of Acme Corp since 2017.", jane.GetSnippet())
	require.Equal(t, "CEO", jane.GetAttributes().GetFields()["title"].GetStringValue())
	// Globex (0.96) is a vendor tied by one PARTNERS_WITH (0.8).
	globex := findEntity(t, full.GetEntities(), "Globex Corporation")
	require.True(t, globex.GetIsVendor())
	require.InDelta(t, 0.96*0.8, globex.GetRelevance(), 1e-6)
	var produces *vendorgraphv1.Relationship
	for _, r := range full.GetRelationships() {
		if r.GetRelationshipId() == importer.FormatUUID(importer.RelationshipID("r-acme-corp-acme-cloud")) {
			produces = r
		}
	}
	require.NotNil(t, produces)
	require.Equal(t, "PRODUCES", produces.GetRelationshipType())
	require.Equal(t, full.GetVendorId(), produces.GetSourceId())
	require.Equal(t, "2019", produces.GetMetadata().GetFields()["since"].GetStringValue())
	var newest string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_char(max(updated_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
		FROM (SELECT updated_at FROM entities UNION ALL SELECT updated_at FROM relationships) u`).Scan(&newest))
	require.True(t, strings.HasPrefix(full.GetLastUpdated().AsTime().UTC().Format("2006-01-02T15:04:05.000000"), newest))
}

func findEntity(t *testing.T, es []*vendorgraphv1.Entity, name string) *vendorgraphv1.Entity {
	t.Helper()
	for _, e := range es {
		if e.GetName() == name {
			return e
		}
	}
	t.Fatalf("no entity %q", name)
	return nil
}

func TestGetVendorCapsAndTruncation(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	all, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Acme Corp", MaxEntities: 100, MaxRelationships: 500})
	require.NoError(t, err)
	nEnt, nRel := len(all.GetEntities()), len(all.GetRelationships())
	require.Greater(t, nEnt, 5)
	require.Greater(t, nRel, 5)
	no := false
	for _, tc := range []struct {
		name               string
		req                *vendorgraphv1.GetVendorRequest
		ents, rels         int
		entTrunc, relTrunc bool
	}{
		{"defaults are 5/5", &vendorgraphv1.GetVendorRequest{}, 5, 5, true, true},
		{"preview 5/5", &vendorgraphv1.GetVendorRequest{MaxEntities: 5, MaxRelationships: 5}, 5, 5, true, true},
		{"exactly the neighbourhood", &vendorgraphv1.GetVendorRequest{MaxEntities: int32(nEnt), MaxRelationships: int32(nRel)}, nEnt, nRel, false, false},
		{"one short", &vendorgraphv1.GetVendorRequest{MaxEntities: int32(nEnt - 1), MaxRelationships: int32(nRel - 1)}, nEnt - 1, nRel - 1, true, true},
		{"full 100/500", &vendorgraphv1.GetVendorRequest{MaxEntities: 100, MaxRelationships: 500}, nEnt, nRel, false, false},
		{"without relationships", &vendorgraphv1.GetVendorRequest{MaxEntities: 3, MaxRelationships: 3, IncludeRelationships: &no}, 3, 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Name = "Acme Corp"
			resp, err := rep.client.GetVendor(ctx, tc.req)
			require.NoError(t, err)
			require.Len(t, resp.GetEntities(), tc.ents)
			require.Len(t, resp.GetEntityIds(), tc.ents)
			require.Len(t, resp.GetRelationships(), tc.rels)
			require.Len(t, resp.GetRelationshipIds(), tc.rels)
			require.Equal(t, tc.entTrunc, resp.GetEntitiesTruncated())
			require.Equal(t, tc.relTrunc, resp.GetRelationshipsTruncated())
			require.Len(t, resp.GetTopEntities(), 5, "top entities do not depend on the caps")
			require.True(t, proto.Equal(all.GetStatistics(), resp.GetStatistics()), "statistics cover the whole neighbourhood")
			// The page is the head of the full ranking.
			require.Equal(t, all.GetEntityIds()[:tc.ents], resp.GetEntityIds())
			if tc.rels > 0 {
				require.Equal(t, all.GetRelationshipIds()[:tc.rels], resp.GetRelationshipIds())
			}
		})
	}
}

func TestGetVendorDepth2(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	d1, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Initech", MaxEntities: 100, MaxRelationships: 500})
	require.NoError(t, err)
	d2, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "Initech", MaxEntities: 100, MaxRelationships: 500, Depth: 2})
	require.NoError(t, err)
	require.Greater(t, d2.GetStatistics().GetEntityCount(), d1.GetStatistics().GetEntityCount())
	require.Subset(t, d2.GetEntityIds(), d1.GetEntityIds())
	// Globex's CEO is two hops from Initech (Initech SUPPLIES Globex):
	// 0.5 × strength(Globex) × 0.97 × his confidence.
	scorpio := findEntity(t, d2.GetEntities(), "Hank Scorpio")
	globex := findEntity(t, d2.GetEntities(), "Globex Corporation")
	require.InDelta(t, 0.95*0.5*(globex.GetRelevance()/globex.GetConfidence())*0.97, scorpio.GetRelevance(), 1e-6)
	require.Less(t, scorpio.GetRelevance(), globex.GetRelevance())
}

func TestGetVendorBadInput(t *testing.T) {
	rep, _ := start(t)
	ctx := ctxT(t)
	for _, tc := range []struct {
		name  string
		req   *vendorgraphv1.GetVendorRequest
		field string
	}{
		{"empty name", &vendorgraphv1.GetVendorRequest{}, "name"},
		{"name too long", &vendorgraphv1.GetVendorRequest{Name: strings.Repeat("é", 201)}, "name"},
		{"punctuation only", &vendorgraphv1.GetVendorRequest{Name: "?!"}, "name"},
		{"negative max_entities", &vendorgraphv1.GetVendorRequest{Name: "x", MaxEntities: -1}, "max_entities"},
		{"max_entities above 100", &vendorgraphv1.GetVendorRequest{Name: "x", MaxEntities: 101}, "max_entities"},
		{"max_relationships above 500", &vendorgraphv1.GetVendorRequest{Name: "x", MaxRelationships: 501}, "max_relationships"},
		{"depth 3", &vendorgraphv1.GetVendorRequest{Name: "x", Depth: 3}, "depth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rep.client.GetVendor(ctx, tc.req)
			requireCode(t, err, codes.InvalidArgument)
			br := detail[*errdetails.BadRequest](t, err)
			require.Equal(t, tc.field, br.GetFieldViolations()[0].GetField())
		})
	}
	// 200 characters is allowed (and simply not found).
	_, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: strings.Repeat("é", 200)})
	requireCode(t, err, codes.NotFound)
}

func TestSuggestVendors(t *testing.T) {
	rep, _ := start(t)
	mustImport(t, rep.client, readLines(t, demoFile))
	ctx := ctxT(t)
	resp, err := rep.client.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "acme"})
	require.NoError(t, err)
	var got []string
	for _, s := range resp.GetSuggestions() {
		got = append(got, s.GetName())
		require.GreaterOrEqual(t, s.GetScore(), 0.0)
		require.LessOrEqual(t, s.GetScore(), 1.0)
		require.NotEmpty(t, s.GetVendorId())
	}
	require.ElementsMatch(t, []string{"Acme Corp", "ACME Inc", "Acme Ltd"}, got)

	resp, err = rep.client.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "Acme", Limit: 2})
	require.NoError(t, err)
	require.Len(t, resp.GetSuggestions(), 2)

	resp, err = rep.client.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "hooli x"})
	require.NoError(t, err)
	require.Equal(t, "Hooli", resp.GetSuggestions()[0].GetName(), "found through the alias Hooli XYZ")

	resp, err = rep.client.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "Umbrela Corporation"})
	require.NoError(t, err)
	require.Equal(t, "Umbrella Corporation", resp.GetSuggestions()[0].GetName(), "a typo still ranks the vendor first")

	resp, err = rep.client.SuggestVendors(ctx, &vendorgraphv1.SuggestVendorsRequest{Text: "Zzyzx"})
	require.NoError(t, err)
	require.Empty(t, resp.GetSuggestions())

	for _, bad := range []*vendorgraphv1.SuggestVendorsRequest{{}, {Text: "acme", Limit: 51}, {Text: "acme", Limit: -1}, {Text: "--"}} {
		_, err := rep.client.SuggestVendors(ctx, bad)
		requireCode(t, err, codes.InvalidArgument)
	}
}

func TestGetGraphStatus(t *testing.T) {
	rep, _ := start(t)
	ctx := ctxT(t)
	empty, err := rep.client.GetGraphStatus(ctx, &vendorgraphv1.GetGraphStatusRequest{})
	require.NoError(t, err)
	require.Zero(t, empty.GetEntities())
	require.Nil(t, empty.GetLastUpdated())

	lines := readLines(t, demoFile)
	resp := mustImport(t, rep.client, lines)
	st, err := rep.client.GetGraphStatus(ctx, &vendorgraphv1.GetGraphStatusRequest{})
	require.NoError(t, err)
	require.Equal(t, int64(12), st.GetVendors())
	require.Equal(t, int64(resp.GetEntitiesCreated()), st.GetEntities())
	require.Equal(t, int64(resp.GetRelationshipsCreated()), st.GetRelationships())
	require.NotNil(t, st.GetLastUpdated())
}
