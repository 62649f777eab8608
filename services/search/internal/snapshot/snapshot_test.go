package snapshot_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/platform/chunker"
	"github.com/bmcis/knowledge/platform/syntheticdocs"
	"github.com/bmcis/knowledge/platform/testdb"
	"github.com/bmcis/knowledge/services/search/internal/analysis"
	"github.com/bmcis/knowledge/services/search/internal/bm25"
	"github.com/bmcis/knowledge/services/search/internal/embedding"
	"github.com/bmcis/knowledge/services/search/internal/follower"
	"github.com/bmcis/knowledge/services/search/internal/index"
	"github.com/bmcis/knowledge/services/search/internal/snapshot"
	"github.com/bmcis/knowledge/services/search/internal/store"
)

type env struct {
	pool *pgxpool.Pool
	st   *store.Store
	an   *analysis.Analyzer
	ck   *chunker.Chunker
	gen  *syntheticdocs.Generator
	log  *slog.Logger
}

func newEnv(t *testing.T) *env {
	pool, _ := testdb.New(t)
	ck, err := chunker.NewDefault()
	require.NoError(t, err)
	return &env{pool: pool, st: store.New(pool), an: analysis.NewEnglish(), ck: ck, gen: syntheticdocs.New(3, 2000),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// write stores synthetic document i (variant v changes its content).
func (e *env) write(t *testing.T, i int, v string) {
	d := e.gen.Document(i)
	content := string(d.Content) + v
	cs, err := e.ck.Split(t.Context(), chunker.Markdown, d.Title, content)
	require.NoError(t, err)
	row := store.DocumentRow{ExternalID: d.ExternalId, SourceFile: d.SourceFile, Category: d.Category, Title: d.Title}
	h := sha256.Sum256([]byte(content))
	row.ContentHash = h[:]
	for _, c := range cs {
		ch := sha256.Sum256([]byte(c.ChunkText))
		row.Chunks = append(row.Chunks, store.Chunk{ChunkIndex: c.ChunkIndex, ContextHeader: c.ContextHeader, ChunkText: c.ChunkText, ChunkTokenCount: c.ChunkTokenCount, Hash: ch[:], Page: i % 3})
	}
	_, err = e.st.WriteDocument(context.Background(), row)
	require.NoError(t, err)
}

// replica is an index with its follower, as a search process has them.
func (e *env) replica(t *testing.T, ix *index.Index, textInDB bool) (*index.Index, *follower.Follower) {
	if ix == nil {
		ix = index.NewWithOptions(e.an, bm25.DefaultParams(), index.Options{TextInDatabase: textInDB})
	}
	emb, err := embedding.New(e.st, embedding.DefaultConfig(), e.an, e.log)
	require.NoError(t, err)
	f := follower.New(follower.Config{Index: ix, Store: e.st, Embedding: emb, Log: e.log, PollInterval: time.Second,
		Applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "applied"}), Changed: func(index.Stats) {}})
	_, err = f.Sync(context.Background())
	require.NoError(t, err)
	return ix, f
}

func (e *env) keeper(ix *index.Index, f *follower.Follower, cfg snapshot.Config) *snapshot.Keeper {
	return snapshot.NewKeeper(cfg, e.st, ix, f.Freeze, e.log, snapshot.Metrics{
		Writes:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "w"}, []string{"result"}),
		LastBytes:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "b"}),
		LastSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "s"}),
	})
}

func (e *env) load(t *testing.T, textInDB bool) (*index.Index, snapshot.Started) {
	return snapshot.Load(context.Background(), e.st, e.an, bm25.DefaultParams(), index.Options{TextInDatabase: textInDB}, snapshot.DefaultConfig())
}

// requireSame asserts two replicas' indexes hold the same records and rank
// probe queries identically.
func (e *env) requireSame(t *testing.T, want, got *index.Index) {
	t.Helper()
	ws, gs := want.Stats(), got.Stats()
	require.Equal(t, ws.Documents, gs.Documents)
	require.Equal(t, ws.Chunks, gs.Chunks)
	require.Equal(t, ws.Terms, gs.Terms)
	require.Equal(t, ws.Generation, gs.Generation)
	require.Equal(t, ws.TextBytes, gs.TextBytes)
	require.True(t, ws.LastChange.Equal(gs.LastChange))
	require.Equal(t, want.Categories(nil), got.Categories(nil))
	dfs := func(ix *index.Index) map[string]int {
		m := map[string]int{}
		ix.EachTerm(func(term string, df int) { m[term] = df })
		return m
	}
	require.Equal(t, dfs(want), dfs(got))
	rows, err := e.pool.Query(context.Background(), "SELECT id FROM chunks ORDER BY id")
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, ids, ws.Chunks)
	for _, id := range ids {
		w, g := want.Chunk(id), got.Chunk(id)
		require.NotNil(t, w, "chunk %d", id)
		require.NotNil(t, g, "chunk %d", id)
		require.Equal(t, flat(w), flat(g))
	}
	var queries [][]string
	for _, q := range []string{"security audit", "network", "vendor contract renewal", "policy", e.gen.Document(1).Title} {
		queries = append(queries, e.an.Terms(q))
	}
	for _, q := range queries {
		require.Equal(t, want.SearchBM25(q, nil, nil, 50), got.SearchBM25(q, nil, nil, 50), "query %v", q)
		cats := want.ResolveCategory(e.gen.Document(2).Category)
		require.Equal(t, want.SearchBM25(q, cats, nil, 10), got.SearchBM25(q, cats, nil, 10), "query %v in %v", q, cats)
	}
}

// flat is a chunk record with its document's, comparable with Equal
// (times as instants).
type flatChunk struct {
	Chunk     index.Chunk
	Doc       index.Document
	UpdatedAt int64
}

func flat(c *index.Chunk) flatChunk {
	f := flatChunk{Chunk: *c, Doc: *c.Doc, UpdatedAt: c.Doc.UpdatedAt.UnixNano()}
	f.Chunk.Doc, f.Doc.UpdatedAt = nil, time.Time{}
	return f
}

func snapshotConfig() snapshot.Config {
	return snapshot.Config{Mode: snapshot.ModeReadWrite, ChangeFraction: 0.1, Quiet: 0, CheckInterval: time.Second}
}

// A snapshot read back gives the replica a full load would: same records
// (text filled from PostgreSQL, or left there), same BM25 rankings.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, textInDB := range []bool{false, true} {
		t.Run(fmt.Sprintf("text in database %t", textInDB), func(t *testing.T) {
			e := newEnv(t)
			for i := 0; i < 30; i++ {
				e.write(t, i, "")
			}
			full, f := e.replica(t, nil, textInDB)
			k := e.keeper(full, f, snapshotConfig())
			w, err := k.MaybeWrite(context.Background())
			require.NoError(t, err)
			require.NotNil(t, w, "no usable snapshot: one is due")
			require.Equal(t, int64(full.Stats().Chunks), w.Snapshot.Chunks)
			require.Positive(t, w.Snapshot.Bytes)

			loaded, started := e.load(t, textInDB)
			require.True(t, started.FromSnapshot, started.Reason)
			require.Equal(t, w.Snapshot.Generation, started.Snapshot.Generation)
			e.requireSame(t, full, loaded)

			due, why, err := k.Due(context.Background())
			require.NoError(t, err)
			require.False(t, due, why)
		})
	}
}

// A replica started from a snapshot and caught up on the changes after it
// (a document added, one replaced, one deleted) equals a full load; a new
// snapshot becomes due once the feed moved by the configured share.
func TestStartFromSnapshotThenChanges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		e.write(t, i, "")
	}
	first, f := e.replica(t, nil, false)
	_, err := e.keeper(first, f, snapshotConfig()).Write(ctx)
	require.NoError(t, err)

	e.write(t, 30, "")
	e.write(t, 3, "\n\nA zebra crossing replaced this section.")
	_, err = e.st.DeleteDocument(ctx, e.gen.Document(5).ExternalId)
	require.NoError(t, err)

	loaded, started := e.load(t, false)
	require.True(t, started.FromSnapshot, started.Reason)
	require.Less(t, loaded.Generation(), first.Generation()+3)
	caught, f2 := e.replica(t, loaded, false)
	full, _ := e.replica(t, nil, false)
	e.requireSame(t, full, caught)
	require.NotEmpty(t, caught.SearchBM25(e.an.Terms("zebra"), nil, nil, 5))

	tests := []struct {
		name string
		cfg  func(*snapshot.Config)
		due  bool
	}{
		{"moved less than the share", func(c *snapshot.Config) { c.ChangeFraction = 0.5 }, false},
		{"moved more than the share", func(c *snapshot.Config) { c.ChangeFraction = 0.05 }, true},
		{"feed not quiet", func(c *snapshot.Config) { c.ChangeFraction, c.Quiet = 0.05, time.Hour }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := snapshotConfig()
			tc.cfg(&cfg)
			due, why, err := e.keeper(caught, f2, cfg).Due(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.due, due, why)
		})
	}

	// A database restored from an older backup leaves the snapshot ahead of
	// the feed: it is replaced at once, quiet feed or not.
	_, err = e.pool.Exec(ctx, `UPDATE search_index_snapshots SET generation = generation + 1000`)
	require.NoError(t, err)
	cfg := snapshotConfig()
	cfg.Quiet = time.Hour
	due, why, err := e.keeper(caught, f2, cfg).Due(ctx)
	require.NoError(t, err)
	require.True(t, due, why)
	require.Contains(t, why, "ahead of the feed")
}

// A snapshot that is missing, made by other analysis or format, damaged or
// truncated is not used, with the reason; never a wrong index.
func TestSnapshotFallback(t *testing.T) {
	// rewrite replaces the snapshot's one part by edit(data), with the
	// row's size and checksum matching: only the decoder can tell.
	rewrite := func(edit func([]byte) []byte) func(t *testing.T, pool *pgxpool.Pool) {
		return func(t *testing.T, pool *pgxpool.Pool) {
			ctx := context.Background()
			var data []byte
			require.NoError(t, pool.QueryRow(ctx, `SELECT data FROM search_index_snapshot_parts WHERE seq = 0`).Scan(&data))
			data = edit(data)
			crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
			_, err := pool.Exec(ctx, `UPDATE search_index_snapshot_parts SET data = $1`, data)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `UPDATE search_index_snapshots SET bytes = $1, crc32c = $2`, len(data), int64(crc))
			require.NoError(t, err)
		}
	}
	sql := func(q string) func(t *testing.T, pool *pgxpool.Pool) {
		return func(t *testing.T, pool *pgxpool.Pool) {
			_, err := pool.Exec(context.Background(), q)
			require.NoError(t, err)
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, pool *pgxpool.Pool)
		reason string
	}{
		{"none stored", sql(`DELETE FROM search_index_snapshots`), "no snapshot stored"},
		{"other analysis", sql(`UPDATE search_index_snapshots SET fingerprint = 'older-stemmer'`), "no snapshot matches"},
		{"other format", sql(`UPDATE search_index_snapshots SET format_version = 99`), "no snapshot matches"},
		{"part missing", sql(`UPDATE search_index_snapshots SET parts = parts + 1, bytes = bytes + 10`), "parts missing or damaged"},
		{"byte flipped", sql(`UPDATE search_index_snapshot_parts SET data = set_byte(data, 40, get_byte(data, 40) # 1)`), "snapshot"},
		{"other generation", sql(`UPDATE search_index_snapshots SET generation = generation - 1`), "stored as"},
		{"feed behind the snapshot", sql(`UPDATE search_index_snapshots SET generation = generation + 1`), "is behind the snapshot"},
		{"feed moved too far since", sql(`UPDATE search_index_snapshots SET generation = generation - 20000`), "a full load streams them"},
		{"truncated", rewrite(func(b []byte) []byte { return b[:len(b)-9] }), "corrupt snapshot"},
		{"cut in the middle", rewrite(func(b []byte) []byte { return b[:len(b)/2] }), "corrupt snapshot"},
		{"bytes after the end", rewrite(func(b []byte) []byte { return append(b, 1, 2, 3) }), "corrupt snapshot"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for i := 0; i < 8; i++ {
				e.write(t, i, "")
			}
			ix, f := e.replica(t, nil, false)
			w, err := e.keeper(ix, f, snapshotConfig()).Write(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, w.Snapshot.Parts)
			got, _ := e.load(t, false)
			require.NotNil(t, got, "the undamaged snapshot loads")

			tc.damage(t, e.pool)
			got, started := e.load(t, false)
			require.Nil(t, got)
			require.False(t, started.FromSnapshot)
			require.Contains(t, started.Reason, tc.reason)
		})
	}
}
