package audit_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/auth/internal/audit"
)

// TestRetention prunes as the auth service's own database role, as the
// service does: entries recorded longer ago than the retention go, the
// others stay, and a retention of 0 (keep forever) prunes nothing.
func TestRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	pool, err := pgxpool.New(ctx, testdb.ServiceURL(t, dbURL, "auth"))
	require.NoError(t, err)
	defer pool.Close()
	store := audit.NewStore(pool)
	require.NoError(t, store.Append(ctx, []audit.Event{{Time: time.Now(), Edge: "adapter", Tool: "get_chunks", Outcome: "ok", Principal: "new"}}))
	// Back-dated rows can only be written by the table's owner.
	_, err = admin.Exec(ctx, `INSERT INTO auth.audit_events (occurred_at, recorded_at, edge, tool, outcome, principal)
		VALUES (now() - interval '401 days', now() - interval '401 days', 'read', 'GET /v1/chunks', 'ok', 'old')`)
	require.NoError(t, err)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store.RunRetention(ctx, 0, time.Hour, log) // returns at once: keep forever
	left, err := store.List(ctx, audit.Filter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, left, 2)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); store.RunRetention(runCtx, 400*24*time.Hour, time.Hour, log) }()
	require.Eventually(t, func() bool {
		left, err = store.List(ctx, audit.Filter{Limit: 10})
		require.NoError(t, err)
		return len(left) == 1
	}, 20*time.Second, 20*time.Millisecond, "the first pass runs at start")
	stop()
	<-done
	require.Equal(t, "new", left[0].Principal)
}
