package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	vendorgraphv1 "github.com/bmcis/knowledge/gen/go/bmcis/vendorgraph/v1"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/server"
)

// A small valid file the failure cases extend.
var baseLines = []string{
	`{"kind":"entity","id":"v1","name":"Vendor One","entity_type":"COMPANY","confidence":0.9,"is_vendor":true,"aliases":["V One"]}`,
	`{"kind":"entity","id":"p1","name":"Product One","entity_type":"PRODUCT","confidence":0.8,"snippet":"A product.","attributes":{"sku":"P1"}}`,
	`{"kind":"relationship","id":"r1","source_id":"v1","target_id":"p1","relationship_type":"PRODUCES","confidence":0.7,"metadata":{"since":2020}}`,
}

// graphDigest summarizes every stored row, to prove a rejected import wrote nothing.
func graphDigest(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var d string
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT coalesce((SELECT md5(string_agg(e::text, '|' ORDER BY id)) FROM entities e), '') || '/' ||
		       coalesce((SELECT md5(string_agg(a::text, '|' ORDER BY entity_id, normalized_alias)) FROM vendor_aliases a), '') || '/' ||
		       coalesce((SELECT md5(string_agg(r::text, '|' ORDER BY id)) FROM relationships r), '')`).Scan(&d))
	return d
}

func TestImportValidationWritesNothing(t *testing.T) {
	long := strings.Repeat("x", 201)
	cases := []struct {
		name  string
		lines []string // appended to baseLines (line 4 onwards)
		want  []string // "LINE: substring" for each expected problem
	}{
		{"malformed JSON", []string{`{"kind":"entity",`}, []string{"4: malformed JSON"}},
		{"not an object", []string{`[1,2]`}, []string{"4: malformed record"}},
		{"trailing data", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1} {}`}, []string{"4: malformed JSON: unexpected data after the object"}},
		{"unknown field", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"colour":"red"}`}, []string{`4: unknown field "colour"`}},
		{"field name in another case", []string{`{"kind":"entity","id":"x","Name":"X","entity_type":"ORG","confidence":1}`}, []string{`4: unknown field "Name" (field names are lower case: "name")`}},
		{"field given twice", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"name":"Y"}`}, []string{`4: field "name" is given twice`}},
		{"field given twice, once escaped", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"attributes":{"name":1,"n":{"name":2}},"n\u0061me":"Y"}`}, []string{`4: field "name" is given twice`}},
		{"field given twice in two cases", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"NAME":"Y"}`}, []string{`4: unknown field "NAME"`}},
		{"wrong field type", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":"high"}`}, []string{`4: field "confidence": expected a number, got string`}},
		{"wrong alias type", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"is_vendor":true,"aliases":"X Co"}`}, []string{`4: field "aliases": expected an array of strings`}},
		{"missing kind", []string{`{"id":"x","name":"X","entity_type":"ORG","confidence":1}`}, []string{`4: missing required field "kind"`}},
		{"unknown kind", []string{`{"kind":"edge","id":"x"}`}, []string{`4: field "kind": must be "entity" or "relationship"`}},
		{"missing name", []string{`{"kind":"entity","id":"x","entity_type":"ORG","confidence":1}`}, []string{`4: missing required field "name"`}},
		{"missing several", []string{`{"kind":"entity","id":"x"}`}, []string{`4: missing required field "name"`, `4: missing required field "entity_type"`, `4: missing required field "confidence"`}},
		{"missing relationship ends", []string{`{"kind":"relationship","relationship_type":"USES","confidence":0.5}`}, []string{`4: missing required field "source_id"`, `4: missing required field "target_id"`}},
		{"field of the other kind", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"source_id":"v1"}`}, []string{`4: field "source_id" does not belong in an entity record`}},
		{"bad type name", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"product","confidence":1}`}, []string{`4: field "entity_type": "product" must be upper case`}},
		{"duplicate entity id", []string{`{"kind":"entity","id":"p1","name":"Again","entity_type":"PRODUCT","confidence":0.5}`}, []string{`4: duplicate entity id "p1" (first on line 2)`}},
		{"duplicate relationship id", []string{`{"kind":"relationship","id":"r1","source_id":"p1","target_id":"v1","relationship_type":"MADE_BY","confidence":0.5}`}, []string{`4: duplicate relationship id "r1" (first on line 3)`}},
		{"duplicate derived relationship", []string{
			`{"kind":"relationship","source_id":"p1","target_id":"v1","relationship_type":"MADE_BY","confidence":0.5}`,
			`{"kind":"relationship","source_id":"p1","target_id":"v1","relationship_type":"MADE_BY","confidence":0.6}`,
		}, []string{`5: duplicate relationship id (derived`}},
		{"dangling source", []string{`{"kind":"relationship","id":"r2","source_id":"ghost","target_id":"p1","relationship_type":"USES","confidence":0.5}`}, []string{`4: field "source_id": "ghost" names no entity`}},
		{"dangling target", []string{`{"kind":"relationship","id":"r2","source_id":"p1","target_id":"ghost","relationship_type":"USES","confidence":0.5}`}, []string{`4: field "target_id": "ghost" names no entity`}},
		{"self loop", []string{`{"kind":"relationship","id":"r2","source_id":"p1","target_id":"p1","relationship_type":"USES","confidence":0.5}`}, []string{`4: source_id and target_id are the same entity`}},
		{"confidence above 1", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1.5}`}, []string{`4: field "confidence": must be between 0 and 1, got 1.5`}},
		{"confidence below 0", []string{`{"kind":"relationship","id":"r2","source_id":"p1","target_id":"v1","relationship_type":"USES","confidence":-0.1}`}, []string{`4: field "confidence": must be between 0 and 1`}},
		{"snippet too long", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"snippet":"` + long + `"}`}, []string{`4: field "snippet": 201 characters, at most 200`}},
		{"attributes not an object", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"attributes":[1]}`}, []string{`4: field "attributes": must be a JSON object`}},
		{"aliases on a non-vendor", []string{`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":1,"aliases":["Y"]}`}, []string{`4: field "aliases": only vendors`}},
		{"NUL in name", []string{`{"kind":"entity","id":"x","name":"X\u0000","entity_type":"ORG","confidence":1}`}, []string{`4: field "name": contains a NUL character`}},
		{"name of punctuation", []string{`{"kind":"entity","id":"x","name":"!!!","entity_type":"ORG","confidence":1}`}, []string{`4: field "name": must contain a letter or a digit`}},
		{"every problem reported", []string{
			`not json`,
			``,
			`{"kind":"entity","id":"x","name":"X","entity_type":"ORG","confidence":2}`,
			`{"kind":"relationship","id":"r9","source_id":"nobody","target_id":"v1","relationship_type":"USES","confidence":0.5}`,
		}, []string{"4: malformed JSON", `6: field "confidence"`, `7: field "source_id": "nobody"`}},
	}
	pool := newDB(t)
	rep := startReplica(t, pool, server.DefaultConfig())
	for _, withData := range []bool{false, true} {
		if withData {
			mustImport(t, rep.client, readLines(t, demoFile))
		}
		before := graphDigest(t, pool)
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/existing=%v", tc.name, withData), func(t *testing.T) {
				lines := append(append([]string{}, baseLines...), tc.lines...)
				// A change to an existing record in the same file must not land either.
				lines[1] = strings.Replace(lines[1], `"confidence":0.8`, `"confidence":0.81`, 1)
				_, err := importLines(t, rep.client, lines)
				requireCode(t, err, codes.InvalidArgument)
				failure := detail[*vendorgraphv1.ImportGraphFailure](t, err)
				var got []string
				for _, p := range failure.GetProblems() {
					got = append(got, fmt.Sprintf("%d: %s", p.GetLineNumber(), p.GetMessage()))
				}
				require.Len(t, got, len(tc.want), "problems: %q", got)
				for i, w := range tc.want {
					require.Contains(t, got[i], w)
				}
				require.Equal(t, before, graphDigest(t, pool), "a rejected import changed the graph")
			})
		}
	}
}

func TestImportTooManyProblemsIsSummarized(t *testing.T) {
	rep, pool := start(t)
	lines := make([]string, importer.MaxProblems+50)
	for i := range lines {
		lines[i] = "{"
	}
	_, err := importLines(t, rep.client, lines)
	requireCode(t, err, codes.InvalidArgument)
	problems := detail[*vendorgraphv1.ImportGraphFailure](t, err).GetProblems()
	require.Len(t, problems, importer.MaxProblems+1)
	require.Equal(t, "50 more problems not listed", problems[len(problems)-1].GetMessage())
	require.Equal(t, "//", graphDigest(t, pool))
}

func TestImportLineLimit(t *testing.T) {
	pool := newDB(t)
	cfg := server.DefaultConfig()
	cfg.MaxImportLines = 2
	rep := startReplica(t, pool, cfg)
	_, err := importLines(t, rep.client, baseLines)
	requireCode(t, err, codes.InvalidArgument)
	problems := detail[*vendorgraphv1.ImportGraphFailure](t, err).GetProblems()
	require.Equal(t, int64(3), problems[0].GetLineNumber())
	require.Contains(t, problems[0].GetMessage(), "more than 2 lines")
	require.Equal(t, "//", graphDigest(t, pool))
}

func TestImportIdempotentAndUpdates(t *testing.T) {
	rep, pool := start(t)
	ctx := ctxT(t)
	lines := readLines(t, demoFile)
	var nEnt, nRel int32
	for _, l := range lines {
		if strings.Contains(l, `"kind":"entity"`) {
			nEnt++
		} else if strings.Contains(l, `"kind":"relationship"`) {
			nRel++
		}
	}

	first := mustImport(t, rep.client, lines)
	require.Equal(t, int64(len(lines)), first.GetLines())
	require.Equal(t, nEnt, first.GetEntitiesCreated())
	require.Equal(t, nRel, first.GetRelationshipsCreated())
	require.Zero(t, first.GetEntitiesUpdated()+first.GetEntitiesUnchanged()+first.GetRelationshipsUpdated()+first.GetRelationshipsUnchanged())
	digest := graphDigest(t, pool)

	again := mustImport(t, rep.client, lines)
	require.Equal(t, nEnt, again.GetEntitiesUnchanged())
	require.Equal(t, nRel, again.GetRelationshipsUnchanged())
	require.Zero(t, again.GetEntitiesCreated()+again.GetEntitiesUpdated()+again.GetRelationshipsCreated()+again.GetRelationshipsUpdated())
	require.Equal(t, digest, graphDigest(t, pool), "re-import changed stored rows (updated_at included)")

	// Change one entity (confidence, aliases) and one relationship (type);
	// add one entity whose relationship points at an entity from the first import.
	changed := append([]string{}, lines...)
	for i, l := range changed {
		switch {
		case strings.Contains(l, `"id":"acme-corp"`):
			changed[i] = strings.Replace(strings.Replace(l, `"confidence":0.99`, `"confidence":0.5`, 1),
				`"aliases":["Acme Corporation"]`, `"aliases":["Acme Corporation","Acme Group"]`, 1)
		case strings.Contains(l, `"id":"r-acme-corp-acme-cloud"`):
			changed[i] = strings.Replace(l, `"relationship_type":"PRODUCES"`, `"relationship_type":"OPERATES"`, 1)
		}
	}
	upd := mustImport(t, rep.client, changed)
	require.Equal(t, int32(1), upd.GetEntitiesUpdated())
	require.Equal(t, nEnt-1, upd.GetEntitiesUnchanged())
	require.Equal(t, int32(1), upd.GetRelationshipsUpdated())
	require.Equal(t, nRel-1, upd.GetRelationshipsUnchanged())

	var conf float64
	var aliases []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT e.confidence, ARRAY(SELECT alias FROM vendor_aliases WHERE entity_id = e.id ORDER BY alias)
		FROM entities e WHERE id = $1`, importer.EntityID("acme-corp")).Scan(&conf, &aliases))
	require.InDelta(t, 0.5, conf, 1e-6)
	require.Equal(t, []string{"Acme Corporation", "Acme Group"}, aliases)
	var relType string
	require.NoError(t, pool.QueryRow(ctx, `SELECT relationship_type FROM relationships WHERE id = $1`,
		importer.RelationshipID("r-acme-corp-acme-cloud")).Scan(&relType))
	require.Equal(t, "OPERATES", relType)

	// A second file may point at entities already in the graph.
	extra := mustImport(t, rep.client, []string{
		`{"kind":"entity","id":"acme-edge","name":"Acme Edge Nodes","entity_type":"PRODUCT","confidence":0.8}`,
		`{"kind":"relationship","source_id":"acme-corp","target_id":"acme-edge","relationship_type":"PRODUCES","confidence":0.9}`,
	})
	require.Equal(t, int32(1), extra.GetEntitiesCreated())
	require.Equal(t, int32(1), extra.GetRelationshipsCreated())
}

func TestImportUUIDIdsAndEdgeIDs(t *testing.T) {
	rep, pool := start(t)
	ctx := ctxT(t)
	const vid = "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	mustImport(t, rep.client, []string{
		`{"kind":"entity","id":"` + strings.ToUpper(vid) + `","name":"Uuid Vendor","entity_type":"COMPANY","confidence":1,"is_vendor":true}`,
		`{"kind":"entity","id":"thing","name":"Thing","entity_type":"PRODUCT","confidence":1}`,
		`{"kind":"relationship","source_id":"` + vid + `","target_id":"thing","relationship_type":"PRODUCES","confidence":1}`,
	})
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM relationships WHERE source_id = $1::uuid`, vid).Scan(&n))
	require.Equal(t, 1, n)
	resp, err := rep.client.GetVendor(ctx, &vendorgraphv1.GetVendorRequest{Name: "uuid vendor"})
	require.NoError(t, err)
	require.Equal(t, vid, resp.GetVendorId())
	require.Equal(t, importer.FormatUUID(importer.EntityID("thing")), resp.GetEntityIds()[0])
}
