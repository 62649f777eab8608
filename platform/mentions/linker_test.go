package mentions_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/mentions"
	"github.com/bmcis/knowledge/platform/testdb"
)

const (
	acme    = "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	initech = "1b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
)

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func chunk(t *testing.T, pool *pgxpool.Pool, doc, text string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(), `
		WITH d AS (INSERT INTO documents (external_id, source_file, content_hash) VALUES ($1, $1, '\x00')
		           ON CONFLICT (external_id) DO UPDATE SET title = '' RETURNING id)
		INSERT INTO chunks (document_id, chunk_index, total_chunks, text, token_count, content_hash)
		SELECT d.id, (SELECT count(*) FROM chunks c WHERE c.document_id = d.id), 1, $2, 1, '\x00' FROM d RETURNING id`,
		doc, text).Scan(&id))
	return id
}

func allLinks(t *testing.T, pool *pgxpool.Pool) map[int64]map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT chunk_id, entity_id::text, mention_count FROM entity_mentions")
	require.NoError(t, err)
	out := map[int64]map[string]int{}
	defer rows.Close()
	for rows.Next() {
		var c int64
		var e string
		var n int
		require.NoError(t, rows.Scan(&c, &e, &n))
		if out[c] == nil {
			out[c] = map[string]int{}
		}
		out[c][e] = n
	}
	return out
}

// vendor is a vendor entity as the vendor graph sends it.
func vendor(id, name string, aliases ...string) mentions.EntityName {
	return mentions.EntityName{EntityID: id, Name: name, EntityType: "COMPANY", IsVendor: true, Aliases: aliases}
}

// relink stores names and re-links them the way SyncEntityNames does.
func relink(t *testing.T, pool *pgxpool.Pool, names ...mentions.EntityName) int {
	t.Helper()
	return relinkStats(t, pool, names...).Relinked
}

func relinkStats(t *testing.T, pool *pgxpool.Pool, names ...mentions.EntityName) mentions.RelinkStats {
	t.Helper()
	ctx := context.Background()
	var n mentions.RelinkStats
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		n, _, err = mentions.SyncNames(ctx, tx, mentions.NewLinker(), names)
		return err
	}))
	return n
}

func TestRelinkEntitiesTouchesOnlyTheirChunks(t *testing.T) {
	pool, _ := testdb.New(t)
	c1 := chunk(t, pool, "a", "Acme Corp and ACME-Corporation signed.")
	c2 := chunk(t, pool, "a", "Initech, then Acme Cloud.")
	chunk(t, pool, "b", "Nothing about vendors.")

	st := relinkStats(t, pool, vendor(acme, "Acme Corp"))
	require.Equal(t, 3, st.Indexed, "the chunks written since the last re-link are indexed")
	require.Equal(t, 1, st.Relinked, "only the chunk holding the name's words is matched")
	require.Equal(t, map[int64]map[string]int{c1: {acme: 1}}, allLinks(t, pool))

	// A new alias links the chunks that already held it.
	relink(t, pool, vendor(acme, "Acme Corp", "Acme Corporation"))
	require.Equal(t, map[int64]map[string]int{c1: {acme: 2}}, allLinks(t, pool))

	relink(t, pool, vendor(initech, "Initech"))
	require.Equal(t, map[int64]map[string]int{c1: {acme: 2}, c2: {initech: 1}}, allLinks(t, pool))

	// A rename drops the old name's links.
	relink(t, pool, vendor(initech, "Initrode"))
	require.Equal(t, map[int64]map[string]int{c1: {acme: 2}}, allLinks(t, pool))

	// RelinkAll finds the same links as the incremental path.
	before := allLinks(t, pool)
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		m, _, err := mentions.NewLinker().Matcher(ctx, tx)
		require.NoError(t, err)
		n, err := mentions.RelinkAll(ctx, tx, m)
		require.Equal(t, 3, n)
		return err
	}))
	require.Equal(t, before, allLinks(t, pool))

	// Deleting a document drops its chunks' links.
	exec(t, pool, "DELETE FROM documents WHERE external_id = 'a'")
	require.Empty(t, allLinks(t, pool))
}

// The re-link reads only the chunks holding every word of a changed name
// (or linked to it before): a chunk with one word of it, or none, is never
// read, and a candidate holding the words apart is read but not linked.
func TestRelinkEntitiesReadsOnlyCandidates(t *testing.T) {
	pool, _ := testdb.New(t)
	both := chunk(t, pool, "a", "The ACME-corp contract was renewed.")
	apart := chunk(t, pool, "a", "Corp filings name Acme twice: acme.")
	chunk(t, pool, "b", "Acme Rockets only.")
	chunk(t, pool, "b", "Nothing about vendors.")
	// A chunk naming Acme Corp whose index entry says otherwise: a re-link
	// that read every chunk's text would link it; one that reads only the
	// candidates never sees it.
	hidden := chunk(t, pool, "c", "Acme Corp, unindexed.")
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, mentions.LockExclusive(ctx, tx))
		n, err := mentions.IndexNewChunks(ctx, tx)
		require.Equal(t, 5, n)
		return err
	}))
	exec(t, pool, "UPDATE chunk_terms SET terms = $2 WHERE chunk_id = $1", hidden, mentions.Terms("unindexed"))

	st := relinkStats(t, pool, vendor(acme, "Acme Corp"))
	require.Equal(t, mentions.RelinkStats{Read: 2, Relinked: 1}, st, "two chunks hold both words, the others are not read; one holds the name")
	require.Equal(t, map[int64]map[string]int{both: {acme: 1}}, allLinks(t, pool), "the words apart do not make a mention; the hidden chunk is never read")
	var apartTerms []int32
	require.NoError(t, pool.QueryRow(ctx, "SELECT terms FROM chunk_terms WHERE chunk_id = $1", apart).Scan(&apartTerms))
	require.Equal(t, mentions.Terms("corp filings name acme twice"), apartTerms)

	// Renamed: the chunk linked before is read again (and unlinked), with
	// the chunks holding the new name's words.
	st = relinkStats(t, pool, vendor(acme, "Acme Rockets"))
	require.Equal(t, mentions.RelinkStats{Read: 2, Relinked: 2}, st, "the old link's chunk and the one holding the new name")
	require.Len(t, allLinks(t, pool), 1)

	// A chunk written later is indexed by the next re-link, and only it.
	later := chunk(t, pool, "d", "Acme Rockets again.")
	st = relinkStats(t, pool, vendor(acme, "Acme Rockets"))
	require.Equal(t, mentions.RelinkStats{Indexed: 1, Read: 2, Relinked: 2}, st)
	require.Contains(t, allLinks(t, pool), later)
}
