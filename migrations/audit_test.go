package migrations_test

import (
	"context"
	"errors"
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
