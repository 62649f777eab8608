package migrations_test

import (
	"context"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/testdb"
)

func tables(t *testing.T, ctx context.Context, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) []string {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT table_schema || '.' || table_name FROM information_schema.tables
		WHERE table_schema IN ('public', 'search', 'vendorgraph', 'auth') AND table_name <> 'goose_db_version'
		ORDER BY 1`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

func TestRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pg.ConnectRaw(ctx, testdb.NewEmpty(t))
	require.NoError(t, err)
	defer pool.Close()

	// Every embedded file is one version, applied in order.
	files, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	var versions []int64
	for _, f := range files {
		v, err := strconv.ParseInt(strings.SplitN(f, "_", 2)[0], 10, 64)
		require.NoError(t, err, "migration file %s must start with its version", f)
		versions = append(versions, v)
	}
	require.True(t, slices.IsSorted(versions))

	applied, err := migrations.Up(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, versions, applied)
	want := tables(t, ctx, pool)
	require.Subset(t, want, []string{"auth.api_keys", "search.chunks", "search.documents", "search.embedding_models",
		"vendorgraph.entities", "vendorgraph.relationships", "vendorgraph.vendor_aliases"})
	require.NoError(t, migrations.RequireCurrent(ctx, pool))

	again, err := migrations.Up(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, again, "a second up applies nothing")

	rolled, err := migrations.DownTo(ctx, pool, 0)
	require.NoError(t, err)
	require.Len(t, rolled, len(versions))
	require.Empty(t, tables(t, ctx, pool))
	err = migrations.RequireCurrent(ctx, pool)
	require.ErrorContains(t, err, "bmcisctl migrate up")

	applied, err = migrations.Up(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, versions, applied)
	require.Equal(t, want, tables(t, ctx, pool))
}

func TestDimensionsFromEnvironment(t *testing.T) {
	t.Setenv(migrations.DimensionsEnv, "")
	n, err := migrations.Dimensions()
	require.NoError(t, err)
	require.Equal(t, migrations.DefaultDimensions, n)

	for _, bad := range []string{"0", "-3", "abc", "2001"} {
		t.Setenv(migrations.DimensionsEnv, bad)
		_, err := migrations.Dimensions()
		require.ErrorContains(t, err, migrations.DimensionsEnv, bad)
	}
	t.Setenv(migrations.DimensionsEnv, "384")
	n, err = migrations.Dimensions()
	require.NoError(t, err)
	require.Equal(t, 384, n)
}

// TestHNSWNearestNeighbour proves the vector column and its HNSW index answer a
// nearest-neighbour query: the planner uses the index and the order is right.
func TestHNSWNearestNeighbour(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, _ := testdb.New(t)

	var docID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO documents (external_id, source_file, content_hash)
		VALUES ('d1', 'd1.md', '\x00') RETURNING id`).Scan(&docID))

	dims := migrations.DefaultDimensions
	basis := func(i int, w float32) pgvector.Vector {
		v := make([]float32, dims)
		v[i] = 1
		v[(i+1)%dims] = w
		return pgvector.NewVector(v)
	}
	// Chunk i points mostly along axis i.
	for i := 0; i < 50; i++ {
		_, err := pool.Exec(ctx, `INSERT INTO chunks (document_id, chunk_index, total_chunks, text, token_count, content_hash, embedding)
			VALUES ($1, $2, 50, $3, 1, '\x00', $4)`, docID, i, "chunk", basis(i, 0.1))
		require.NoError(t, err)
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// Tiny tables are cheaper to scan; make the planner show it can use the index.
	_, err = tx.Exec(ctx, "SET LOCAL enable_seqscan = off")
	require.NoError(t, err)

	query := basis(7, 0.05)
	rows, err := tx.Query(ctx, `EXPLAIN SELECT chunk_index FROM chunks ORDER BY embedding <=> $1 LIMIT 3`, query)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, strings.Join(plan, "\n"), "chunks_embedding_hnsw")

	rows, err = tx.Query(ctx, `SELECT chunk_index FROM chunks ORDER BY embedding <=> $1 LIMIT 3`, query)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	// Nearest is chunk 7; chunk 6 shares axis 7 (its secondary weight), then 8.
	require.Equal(t, []int32{7, 6, 8}, got)
}

// TestUpRunsAgainAMigrationThatLostToTheLiveLoad: a migration whose table
// a live service holds (here its lock wait runs out, 55P03; a deadlock's
// victim, 40P01, is treated alike) is run again once the lock is gone,
// instead of failing the release's migration step.
func TestUpRunsAgainAMigrationThatLostToTheLiveLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.NewEmpty(t)
	pool, err := pg.ConnectRaw(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	all, err := migrations.Up(ctx, pool)
	require.NoError(t, err)
	last := all[len(all)-1]
	_, err = migrations.DownTo(ctx, pool, all[len(all)-2])
	require.NoError(t, err)

	// A service's open transaction on the table the last migration alters.
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, "LOCK TABLE auth.audit_events IN ACCESS SHARE MODE")
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(500 * time.Millisecond)
		_ = holder.Rollback(context.Background())
	}()

	// The migration's session gives up a lock wait after 50 ms, so each
	// attempt while the lock is held fails with 55P03.
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "50ms"
	impatient, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer impatient.Close()
	applied, err := migrations.Up(ctx, impatient)
	<-released
	require.NoError(t, err)
	require.Equal(t, []int64{last}, applied)
	require.NoError(t, migrations.RequireCurrent(ctx, pool))
}
