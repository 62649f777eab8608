package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/mentions"
	"github.com/bmcis/knowledge/platform/testdb"
)

const (
	acmeID    = "0b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	initechID = "1b6a2f1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
)

func addEntity(t *testing.T, s *Store, id, name string, aliases ...string) {
	t.Helper()
	ctx := context.Background()
	// Search's copy of the names, without the re-link SyncEntityNames runs:
	// these tests link as chunks are written.
	if aliases == nil {
		aliases = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO entity_names (entity_id, name, entity_type, is_vendor, aliases)
		VALUES ($1, $2, 'COMPANY', true, $3)`, id, name, aliases)
	require.NoError(t, err)
	_, err = mentions.BumpGraphVersion(ctx, s.pool)
	require.NoError(t, err)
}

// links returns entity id -> chunk index -> count for a document.
func links(t *testing.T, s *Store, externalID string) map[string]map[int]int {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT m.entity_id::text, c.chunk_index, m.mention_count
		FROM entity_mentions m JOIN chunks c ON c.id = m.chunk_id JOIN documents d ON d.id = c.document_id
		WHERE d.external_id = $1`, externalID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]map[int]int{}
	for rows.Next() {
		var e string
		var i, n int
		require.NoError(t, rows.Scan(&e, &i, &n))
		if out[e] == nil {
			out[e] = map[int]int{}
		}
		out[e][i] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func doc(id string, texts ...string) DocumentRow {
	d := DocumentRow{ExternalID: id, SourceFile: id + ".md", ContentHash: []byte(id + texts[0])}
	for i, tx := range texts {
		d.Chunks = append(d.Chunks, Chunk{ChunkIndex: i, ChunkText: tx, ChunkTokenCount: 5, Hash: []byte{byte(i)}})
	}
	return d
}

func TestWriteLinksMentionsAndDeleteDropsThem(t *testing.T) {
	pool, _ := testdb.New(t)
	s := New(pool)
	ctx := context.Background()
	addEntity(t, s, acmeID, "Acme Corp", "Acme Corporation")

	_, err := s.WriteDocument(ctx, doc("a", "Acme Corp signed. ACME corp renewed.", "Nothing here.", "The Acme Corporation board"))
	require.NoError(t, err)
	require.Equal(t, map[string]map[int]int{acmeID: {0: 2, 2: 1}}, links(t, s, "a"))

	// A rewrite replaces the links with the new chunks'.
	_, err = s.WriteDocument(ctx, doc("a", "Only one Acme Corp now."))
	require.NoError(t, err)
	require.Equal(t, map[string]map[int]int{acmeID: {0: 1}}, links(t, s, "a"))

	// A name added to the graph is seen by the next write.
	addEntity(t, s, initechID, "Initech")
	_, err = s.WriteDocument(ctx, doc("b", "Initech and Acme Corp"))
	require.NoError(t, err)
	require.Equal(t, map[string]map[int]int{acmeID: {0: 1}, initechID: {0: 1}}, links(t, s, "b"))

	_, err = s.DeleteDocument(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, links(t, s, "a"))
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM entity_mentions").Scan(&n))
	require.Equal(t, 2, n, "only document b's links are left")
}

func TestRelinkDocumentUsesTheCurrentGraph(t *testing.T) {
	pool, _ := testdb.New(t)
	s := New(pool)
	ctx := context.Background()
	res, err := s.WriteDocument(ctx, doc("a", "Initech ships."))
	require.NoError(t, err)
	require.Empty(t, links(t, s, "a"))

	// As when an import commits between a write's matching and its insert.
	addEntity(t, s, initechID, "Initech")
	require.NoError(t, s.relinkDocument(ctx, res.DocumentID))
	require.Equal(t, map[string]map[int]int{initechID: {0: 1}}, links(t, s, "a"))
}

// A page's mentions are read once per graph version: within a version the
// answer is served from memory (even if the rows change underneath, which
// only a graph change does in the product), and a new version reads again.
// A graph import's notification reaches GraphChanged.
func TestChunkMentionsAreKeptPerGraphVersion(t *testing.T) {
	pool, _ := testdb.New(t)
	s := New(pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addEntity(t, s, acmeID, "Acme Corp")
	res, err := s.WriteDocument(ctx, doc("a", "Acme Corp signed."))
	require.NoError(t, err)
	var chunkID int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT id FROM chunks WHERE document_id = $1", res.DocumentID).Scan(&chunkID))
	require.NoError(t, s.RefreshMatcher(ctx))

	names := func() []string {
		got, err := s.ChunkMentions(ctx, []int64{chunkID}, 10)
		require.NoError(t, err)
		var out []string
		for _, m := range got[chunkID] {
			out = append(out, m.Name)
		}
		return out
	}
	vendors := func(q string) []string {
		got, err := s.QueryVendors(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, m := range got {
			out = append(out, m.Name)
		}
		return out
	}
	require.Equal(t, []string{"Acme Corp"}, names())
	require.Equal(t, []string{"Acme Corp"}, vendors("acme corp pricing"))

	_, err = pool.Exec(ctx, "DELETE FROM entity_mentions")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE entity_names SET name = 'Acme Corporation' WHERE entity_id = $1", acmeID)
	require.NoError(t, err)
	require.Equal(t, []string{"Acme Corp"}, names(), "same graph version: served from memory")
	require.Equal(t, []string{"Acme Corp"}, vendors("acme corp pricing"), "same graph version: served from memory")

	go s.Listen(ctx, slog.New(slog.DiscardHandler), func() {}, func(bool) {})
	<-s.GraphChanged() // the listener's first connection
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = mentions.BumpGraphVersion(ctx, tx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT pg_notify($1, 'test')", mentions.GraphChannel)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	select {
	case <-s.GraphChanged():
	case <-time.After(5 * time.Second):
		t.Fatal("the graph's notification did not arrive")
	}
	require.NoError(t, s.RefreshMatcher(ctx))
	require.Empty(t, names(), "a new graph version reads the links again")
	require.Equal(t, []string{"Acme Corporation"}, vendors("acme corporation pricing"), "a new graph version reads the vendors again")
	require.Empty(t, vendors("acme corp pricing"), "the old name is gone with its version")

	// A document whose links were missing when a search kept its chunk's
	// mentions, and re-linked after its write (the graph moved meanwhile):
	// the re-link's notification makes replicas read them again.
	resB, err := s.WriteDocument(ctx, doc("b", "Acme Corporation rocks."))
	require.NoError(t, err)
	var chunkB int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT id FROM chunks WHERE document_id = $1", resB.DocumentID).Scan(&chunkB))
	_, err = pool.Exec(ctx, "DELETE FROM entity_mentions WHERE chunk_id = $1", chunkB)
	require.NoError(t, err)
	got, err := s.ChunkMentions(ctx, []int64{chunkB}, 10)
	require.NoError(t, err)
	require.Empty(t, got[chunkB])
	require.NoError(t, s.relinkDocument(ctx, resB.DocumentID))
	select {
	case <-s.GraphChanged():
	case <-time.After(5 * time.Second):
		t.Fatal("the re-link's notification did not arrive")
	}
	require.Eventually(t, func() bool {
		got, err := s.ChunkMentions(ctx, []int64{chunkB}, 10)
		return err == nil && len(got[chunkB]) == 1 && got[chunkB][0].Name == "Acme Corporation"
	}, 5*time.Second, 20*time.Millisecond)
}
