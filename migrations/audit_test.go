package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/testdb"
)

// TestAuditEventsAppendOnly connects as the auth service's login role and
// shows the audit trail is append-only for it: it appends and reads, its
// UPDATE, DELETE and TRUNCATE are refused, and the pruning function it may
// call deletes only rows older than the retention, never younger than a day.
func TestAuditEventsAppendOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	conn, err := pgx.Connect(ctx, testdb.ServiceURL(t, dbURL, string(migrations.Auth)))
	require.NoError(t, err)
	defer conn.Close(context.Background())

	_, err = conn.Exec(ctx, `INSERT INTO audit_events (occurred_at, edge, principal, tool, outcome)
		VALUES (now(), 'adapter', 'k1', 'semantic_search', 'ok')`)
	require.NoError(t, err, "the auth role appends")
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n))
	require.Equal(t, 1, n, "the auth role reads")

	for _, stmt := range []string{
		"UPDATE audit_events SET principal = 'someone-else'",
		"DELETE FROM audit_events",
		"TRUNCATE audit_events",
		"ALTER TABLE audit_events DISABLE TRIGGER ALL",
		"DROP TABLE audit_events",
		"SELECT setval('audit_events_id_seq', 1)",
	} {
		_, err := conn.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: want a refusal, got %v", stmt, err)
		require.Contains(t, []string{"42501", "42809"}, pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}

	// Old rows (written by the admin, back-dated) go; a day's are kept
	// whatever retention the service asks for.
	_, err = admin.Exec(ctx, `INSERT INTO auth.audit_events (occurred_at, recorded_at, edge, tool, outcome, principal)
		VALUES (now() - interval '500 days', now() - interval '500 days', 'gateway', 'GET /v1/search', 'ok', 'old'),
		       (now() - interval '2 days', now() - interval '2 days', 'gateway', 'GET /v1/search', 'ok', 'recent')`)
	require.NoError(t, err)
	var deleted int64
	require.NoError(t, conn.QueryRow(ctx, "SELECT auth.prune_audit_events(interval '400 days')").Scan(&deleted))
	require.Equal(t, int64(1), deleted)
	_, err = conn.Exec(ctx, "SELECT auth.prune_audit_events(interval '1 hour')")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "a retention under a day: want a refusal, got %v", err)
	require.Equal(t, "22023", pgErr.Code)
	var principals []string
	rows, err := conn.Query(ctx, "SELECT principal FROM audit_events ORDER BY recorded_at")
	require.NoError(t, err)
	principals, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"recent", "k1"}, principals)
}

// TestAuditDocumentIDsMigration takes 00021 down and up on a trail that
// holds entries: up adds document_ids (the existing entries get none, as
// the previous release's appends do), the GIN index serves the filter by
// document, and the auth role writes and reads the column with the grants
// it held (table-wide SELECT and INSERT, nothing more); down restores the
// table, its indexes and its grants exactly.
func TestAuditDocumentIDsMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	shape := func() string {
		var s string
		require.NoError(t, admin.QueryRow(ctx, `SELECT
			(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN ' not null' ELSE '' END
				|| COALESCE(' default ' || pg_get_expr(adbin, adrelid), ''), ', ' ORDER BY attnum)
			 FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum
			 WHERE attrelid = 'auth.audit_events'::regclass AND attnum > 0 AND NOT attisdropped)
			|| E'\n' || (SELECT string_agg(indexdef, E'\n' ORDER BY indexdef) FROM pg_indexes WHERE schemaname = 'auth' AND tablename = 'audit_events')
			|| E'\n' || (SELECT string_agg(privilege_type, ',' ORDER BY privilege_type) FROM information_schema.role_table_grants
				WHERE table_schema = 'auth' AND table_name = 'audit_events' AND grantee = 'bmcis_auth')`).Scan(&s))
		return s
	}
	current := shape()
	require.Contains(t, current, "document_ids text[] not null default '{}'::text[]")
	require.Contains(t, current, "USING gin (document_ids)")

	_, err := migrations.DownTo(ctx, admin, 20)
	require.NoError(t, err)
	admin.Reset()
	previous := shape()
	require.NotContains(t, previous, "document_ids")
	// An entry the previous release appended, naming its columns.
	_, err = admin.Exec(ctx, `INSERT INTO auth.audit_events (occurred_at, edge, principal, tool, chunk_ids, outcome)
		VALUES (now(), 'read', 'k1', 'GET /v1/chunks', '{7}', 'ok')`)
	require.NoError(t, err)

	_, err = migrations.Up(ctx, admin)
	require.NoError(t, err)
	admin.Reset()
	require.Equal(t, current, shape())
	var docs []string
	require.NoError(t, admin.QueryRow(ctx, "SELECT document_ids FROM auth.audit_events WHERE principal = 'k1'").Scan(&docs))
	require.Empty(t, docs, "an entry from before names no document")

	conn, err := pgx.Connect(ctx, testdb.ServiceURL(t, dbURL, string(migrations.Auth)))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `INSERT INTO audit_events (occurred_at, edge, principal, tool, chunk_ids, document_ids, outcome)
		SELECT now(), 'adapter', 'k2', 'get_chunks', ARRAY[i], ARRAY['doc-' || i, 'handbook:shared.md'], 'ok' FROM generate_series(1, 2000) i`)
	require.NoError(t, err, "the auth role writes the column")
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE document_ids @> ARRAY[$1::text]", "doc-42").Scan(&n))
	require.Equal(t, 1, n)
	// A few thousand rows are one sequential scan's worth: forbid it, so
	// the plan shows the index can serve the filter.
	_, err = conn.Exec(ctx, "SET enable_seqscan = off")
	require.NoError(t, err)
	rows, err := conn.Query(ctx, "EXPLAIN (FORMAT TEXT) SELECT id FROM audit_events WHERE document_ids @> ARRAY[$1::text]", "doc-42")
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, strings.Join(plan, "\n"), "Bitmap Index Scan on audit_events_document_ids", "the filter by document reads the GIN index")
	_, err = conn.Exec(ctx, "UPDATE audit_events SET document_ids = '{}'")
	require.Error(t, err, "still append-only")

	_, err = migrations.DownTo(ctx, admin, 20)
	require.NoError(t, err)
	admin.Reset()
	require.Equal(t, previous, shape(), "down restores the table exactly")
	_, err = migrations.Up(ctx, admin)
	require.NoError(t, err)
}
