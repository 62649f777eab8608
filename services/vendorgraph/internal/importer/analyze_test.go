package importer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/vendorgraph/internal/importer"
)

// Analyze refreshes the graph's statistics as the service's own role,
// which does not own the tables (00020_least_privilege.sql): a plain
// ANALYZE would be skipped with a warning and leave the planner blind.
func TestAnalyzeAsTheServiceRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	_, err := admin.Exec(ctx, `INSERT INTO vendorgraph.entities (id, name, normalized_name, entity_type, confidence, record_hash, is_vendor)
		VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'acme', 'vendor', 1, '\x00', true),
		       ('00000000-0000-0000-0000-000000000002', 'Initech', 'initech', 'vendor', 1, '\x00', true)`)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, testdb.ServiceURL(t, dbURL, "vendorgraph"))
	require.NoError(t, err)
	defer conn.Close(context.Background())

	tuples := func() float64 {
		var n float64
		require.NoError(t, admin.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'vendorgraph.entities'::regclass").Scan(&n))
		return n
	}
	before := tuples()
	for _, tc := range []struct {
		name   string
		counts importer.Counts
		ran    bool
		tuples float64
	}{
		{"small import: autovacuum's job", importer.Counts{EntitiesCreated: 2}, false, before},
		{"large import", importer.Counts{EntitiesCreated: 6000, RelationshipsUpdated: 4000}, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, err := importer.Analyze(ctx, conn, tc.counts)
			require.NoError(t, err)
			require.Equal(t, tc.ran, ran)
			require.Equal(t, tc.tuples, tuples())
		})
	}
}
