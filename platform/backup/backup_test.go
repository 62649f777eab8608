package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/testdb"
)

var schemas = []string{"search", "vendorgraph", "auth"}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func one(pool *pgxpool.Pool) []Database { return []Database{{Pool: pool, Schemas: schemas}} }

// fill writes rows into every service's tables, with the values COPY TEXT
// must escape (new lines, tabs, backslashes), NULLs, bytea, jsonb, arrays,
// vectors, and a key rotated from another (a table referencing itself).
func fill(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := ctxT(t)
	var dims int
	require.NoError(t, pool.QueryRow(ctx, `SELECT atttypmod FROM pg_attribute
		WHERE attrelid = 'search.chunks'::regclass AND attname = 'embedding'`).Scan(&dims))
	for _, stmt := range []string{
		`INSERT INTO embedding_models (model_id, provider, dimensions, params, active) VALUES ('builtin-1', 'builtin', ` + fmt.Sprint(dims) + `, '\x00ff10'::bytea, true)`,
		`INSERT INTO sources (name, root, last_sync_at, last_written) VALUES ('handbook', '/srv/handbook', now(), 3)`,
		`INSERT INTO documents (external_id, source_file, category, title, content_hash, chunk_count, source)
			SELECT 'handbook:doc' || i || '.md', 'doc' || i || '.md', 'security', E'Title\twith tab ' || i, sha256(i::text::bytea), 2, 'handbook'
			FROM generate_series(1, 30) i`,
		`INSERT INTO chunks (document_id, category, chunk_index, total_chunks, context_header, text, token_count, content_hash, embedding, embedding_model_id)
			SELECT d.id, d.category, c, 2, 'Header', E'line one\nline two \\ back\\slash ' || d.id || ' ' || c, 7, sha256((d.id * 10 + c)::text::bytea),
				(SELECT array_agg(((d.id * 31 + c * 7 + k) % 97)::real / 97) FROM generate_series(1, ` + fmt.Sprint(dims) + `) k)::vector,
				(SELECT id FROM embedding_models)
			FROM documents d, generate_series(0, 1) c`,
		`INSERT INTO document_tombstones (document_id, external_id, generation) VALUES (999, 'handbook:gone.md', nextval('search_generation'))`,
		`UPDATE search_state SET vectors_generation = 7, vectors_changed_at = now()`,
		`INSERT INTO entities (id, name, normalized_name, entity_type, confidence, snippet, attributes, is_vendor, record_hash)
			VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'acme', 'vendor', 0.9, NULL, '{"tier": "gold", "q": "a\"b"}', true, '\x01'),
			       ('00000000-0000-0000-0000-000000000002', 'Globex', 'globex', 'vendor', 0.8, 'snip', '{}', true, '\x02')`,
		`INSERT INTO vendor_aliases (entity_id, alias, normalized_alias) VALUES ('00000000-0000-0000-0000-000000000001', 'ACME Corp', 'acme corp')`,
		`INSERT INTO relationships (id, source_id, target_id, relationship_type, confidence, record_hash)
			VALUES ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002', 'partner', 0.5, '\x03')`,
		`INSERT INTO entity_names (entity_id, name, entity_type, is_vendor, aliases)
			VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'vendor', true, ARRAY['ACME Corp', 'a,b "c"'])`,
		`INSERT INTO entity_mentions (entity_id, chunk_id, mention_count)
			SELECT '00000000-0000-0000-0000-000000000001', id, 1 FROM chunks WHERE chunk_index = 0`,
		`UPDATE mention_state SET graph_version = nextval('mention_graph_version')`,
		`INSERT INTO api_keys (key_id, secret_hash, name, owner) VALUES ('k1', sha256('one'), 'first', 'platform')`,
		`INSERT INTO api_keys (key_id, secret_hash, name, owner, rotated_from) VALUES ('k2', sha256('two'), 'second', 'platform', 'k1')`,
		`INSERT INTO rate_limit_tiers (name) VALUES ('week')`,
		`INSERT INTO api_key_limits (key_id, tier, limit_value) VALUES ('k2', 'minute', 60), ('k2', 'week', 5000)`,
		// The trail, with the documents a read returned (00021): a text
		// array whose ids COPY TEXT must quote and escape.
		`INSERT INTO auth.audit_events (occurred_at, edge, principal, principal_kind, tool, query, query_sha256, chunk_ids, document_ids, outcome)
			VALUES (now(), 'read', 'k2', 'api_key', 'POST /v1/search', E'who\tpays', 'ab12', '{1,2,3}', ARRAY['handbook:doc1.md', E'a,b "c" {d}\\e'], 'ok'),
			       (now(), 'adapter', '', '', 'get_chunks', NULL, '', '{}', '{}', 'AUTH_REQUIRED')`,
	} {
		_, err := pool.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
}

// contents is every table's rows and every sequence's state, for comparing
// two databases.
func contents(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	cat, err := readCatalog(ctx, tx, schemas)
	require.NoError(t, err)
	out := map[string]string{}
	for _, tb := range cat.tables {
		var digest string
		require.NoError(t, tx.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) || ':' || COALESCE(md5(string_agg(r::text, '|' ORDER BY r::text)), '')
			FROM (SELECT %s FROM %s) r`, columnList(tb.Columns), quoted(tb.Schema, tb.Name))).Scan(&digest))
		out[tb.QualifiedName()] = digest
	}
	// The indexes too: a restore drops and rebuilds them around the load.
	var indexes string
	require.NoError(t, tx.QueryRow(ctx, `SELECT string_agg(indexdef, E'\n' ORDER BY indexdef) FROM pg_indexes WHERE schemaname = ANY($1)`, schemas).Scan(&indexes))
	require.Contains(t, indexes, "USING hnsw")
	out["indexes"] = indexes
	for _, s := range cat.sequences {
		var last int64
		var called bool
		require.NoError(t, tx.QueryRow(ctx, "SELECT last_value, is_called FROM "+quoted(s.Schema, s.Name)).Scan(&last, &called))
		out["sequence "+s.Schema+"."+s.Name] = fmt.Sprint(last, called)
	}
	return out
}

func opener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func TestBackupRestoresEveryTableAndSequence(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	src, _ := testdb.New(t)
	fill(t, src)
	var buf bytes.Buffer
	h, err := Write(ctx, &buf, one(src), "test-release")
	require.NoError(t, err)

	// Every table of the three schemas, found in the catalog; none skipped.
	var tables int
	require.NoError(t, src.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p') AND NOT c.relispartition`, schemas).Scan(&tables))
	require.Len(t, h.Tables, tables)
	latest, err := migrations.LatestVersion()
	require.NoError(t, err)
	require.Equal(t, []SnapshotInfo{{Schemas: schemas, SchemaVersion: latest}}, h.Databases)
	require.Equal(t, FormatVersion, h.Format)
	require.Equal(t, "test-release", h.Release)
	// A table comes after those it references.
	pos := map[string]int{}
	for i, tb := range h.Tables {
		pos[tb.QualifiedName()] = i
	}
	for _, edge := range [][2]string{
		{"search.chunks", "search.documents"}, {"search.chunks", "search.embedding_models"},
		{"search.entity_mentions", "search.chunks"}, {"search.entity_mentions", "search.entity_names"},
		{"auth.api_key_limits", "auth.api_keys"}, {"auth.api_key_limits", "auth.rate_limit_tiers"},
		{"vendorgraph.relationships", "vendorgraph.entities"}, {"search.search_index_snapshot_parts", "search.search_index_snapshots"},
	} {
		require.Greater(t, pos[edge[0]], pos[edge[1]], "%s after %s", edge[0], edge[1])
	}

	dst, _ := testdb.New(t)
	got, err := Restore(ctx, opener(buf.Bytes()), one(dst))
	require.NoError(t, err)
	require.Equal(t, h.Rows(), got.Rows())
	require.Equal(t, contents(t, src), contents(t, dst))

	// The restored stack goes on: a sequence hands out a new value, never a
	// restored one.
	var maxID, next int64
	require.NoError(t, dst.QueryRow(ctx, "SELECT max(id) FROM documents").Scan(&maxID))
	require.NoError(t, dst.QueryRow(ctx, `INSERT INTO documents (external_id, source_file, content_hash) VALUES ('new', 'new.md', '\x00') RETURNING id`).Scan(&next))
	require.Greater(t, next, maxID)
}

// TestBackupIsOneSnapshot commits writes between the tables of a backup:
// none of them is in the file, which restores whole (a document's chunks
// with it, counts that match).
// It is not parallel: the hook is the package's.
func TestBackupIsOneSnapshot(t *testing.T) {
	ctx := ctxT(t)
	src, _ := testdb.New(t)
	fill(t, src)
	before := contents(t, src)
	n := 0
	afterTableHook = func(Table) {
		n++
		stmt := fmt.Sprintf(`WITH d AS (INSERT INTO documents (external_id, source_file, content_hash, chunk_count)
			VALUES ('late%d', 'late.md', '\x00', 1) RETURNING id)
			INSERT INTO chunks (document_id, chunk_index, total_chunks, text, token_count, content_hash)
			SELECT id, 0, 1, 'late', 1, '\x00' FROM d`, n)
		_, err := src.Exec(ctx, stmt)
		require.NoError(t, err)
		_, err = src.Exec(ctx, `INSERT INTO api_keys (key_id, secret_hash, name, owner) VALUES ($1, sha256('x'), 'late', 'x')`, fmt.Sprint("late", n))
		require.NoError(t, err)
	}
	t.Cleanup(func() { afterTableHook = nil })
	var buf bytes.Buffer
	_, err := Write(ctx, &buf, one(src), "test")
	require.NoError(t, err)
	afterTableHook = nil
	require.Positive(t, n)
	require.NotEqual(t, before, contents(t, src), "the writes went on")

	dst, _ := testdb.New(t)
	_, err = Restore(ctx, opener(buf.Bytes()), one(dst))
	require.NoError(t, err)
	after := contents(t, dst)
	for k, v := range before {
		if strings.HasPrefix(k, "sequence ") {
			continue // sequences are read after the snapshot: at least as far
		}
		require.Equal(t, v, after[k], k)
	}
}

// frames splits a backup (gunzipped) into its magic, header, body (the
// table segments) and trailer, for tests that alter one.
func frames(t *testing.T, file []byte) (h *Header, body []byte) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	raw, err := io.ReadAll(gz)
	require.NoError(t, err)
	raw = raw[len(Magic):]
	l := binary.BigEndian.Uint32(raw)
	h = &Header{}
	require.NoError(t, json.Unmarshal(raw[4:4+l], h))
	raw = raw[4+l:]
	// The trailer is the last frame: a JSON object of known shape.
	tl := len(`{"sha256":""}`) + 64
	return h, raw[:len(raw)-4-tl]
}

// assemble writes a file from a header and body with a correct checksum,
// as a release that wrote them would.
func assemble(t *testing.T, h *Header, body []byte) []byte {
	return assembleSummed(t, h, body, body)
}

// assembleSummed writes a file whose trailer holds the checksum of
// summedBody in place of body's: body was damaged after it was written.
func assembleSummed(t *testing.T, h *Header, body, summedBody []byte) []byte {
	t.Helper()
	hb, err := json.Marshal(h)
	require.NoError(t, err)
	var plain bytes.Buffer
	plain.WriteString(Magic)
	require.NoError(t, binary.Write(&plain, binary.BigEndian, uint32(len(hb))))
	plain.Write(hb)
	plain.Write(summedBody)
	sum := sha256.Sum256(plain.Bytes())
	plain.Truncate(plain.Len() - len(summedBody))
	plain.Write(body)
	tb, err := json.Marshal(trailer{SHA256: hex.EncodeToString(sum[:])})
	require.NoError(t, err)
	require.NoError(t, binary.Write(&plain, binary.BigEndian, uint32(len(tb))))
	plain.Write(tb)
	var out bytes.Buffer
	gz, err := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	require.NoError(t, err)
	_, err = gz.Write(plain.Bytes())
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return out.Bytes()
}

func TestRestoreRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	src, _ := testdb.New(t)
	fill(t, src)
	var buf bytes.Buffer
	_, err := Write(ctx, &buf, one(src), "test")
	require.NoError(t, err)
	good := buf.Bytes()
	h, body := frames(t, good)
	require.Equal(t, good, assemble(t, h, body), "the test's reassembly is byte for byte the package's")

	dst, _ := testdb.New(t)
	fresh := contents(t, dst)

	flipped := bytes.Clone(body)
	flipped[len(flipped)/2] ^= 0x01
	newerFormat := *h
	newerFormat.Format = FormatVersion + 1
	latest, err := migrations.LatestVersion()
	require.NoError(t, err)
	newerSchema := *h
	newerSchema.Databases = []SnapshotInfo{{Schemas: schemas, SchemaVersion: latest + 1}}
	olderSchema := *h
	olderSchema.Databases = []SnapshotInfo{{Schemas: schemas, SchemaVersion: latest - 1}}
	compressedFlip := bytes.Clone(good)
	compressedFlip[len(compressedFlip)/2] ^= 0x40

	for _, tc := range []struct {
		name string
		file []byte
		want error
		msg  string
	}{
		{"truncated in the middle", good[:len(good)/2], ErrDamaged, "ends early"},
		{"truncated before the trailer", assemble(t, h, body)[:len(good)-8], ErrDamaged, ""},
		{"a flipped byte in the data", assembleSummed(t, h, flipped, body), ErrDamaged, "checksum mismatch"},
		{"a flipped byte in the compressed file", compressedFlip, ErrDamaged, ""},
		{"not a backup", []byte("hello"), ErrDamaged, "gzip"},
		{"a newer format", assemble(t, &newerFormat, body), ErrNewerFormat, "newer release"},
		{"a newer schema", assemble(t, &newerSchema, body), ErrNewerRelease, "newer release"},
		{"an older schema", assemble(t, &olderSchema, body), ErrOlderRelease, "upgrade path is: restore into that release, then migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Restore(ctx, opener(tc.file), one(dst))
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, fresh, contents(t, dst), "nothing written")
		})
	}

	t.Run("a non-empty target", func(t *testing.T) {
		_, err := Restore(ctx, opener(good), one(src))
		require.ErrorIs(t, err, ErrNotEmpty)
		require.ErrorContains(t, err, "search.documents")
		_, err = dst.Exec(ctx, `INSERT INTO api_keys (key_id, secret_hash, name, owner) VALUES ('only', sha256('x'), 'one key', 'x')`)
		require.NoError(t, err)
		held := contents(t, dst)
		_, err = Restore(ctx, opener(good), one(dst))
		require.ErrorIs(t, err, ErrNotEmpty)
		require.ErrorContains(t, err, "auth.api_keys")
		require.Equal(t, held, contents(t, dst), "nothing written")
	})
}

// TestSeededTablesAreTheMigrationsOwn keeps seeded equal to the tables a
// fresh migration fills: a migration that seeds a new table must add it, or
// every restore would call a fresh stack non-empty.
func TestSeededTablesAreTheMigrationsOwn(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var filled []string
	for name, digest := range contents(t, pool) {
		if strings.HasPrefix(name, "sequence ") || name == "indexes" {
			continue
		}
		if !strings.HasPrefix(digest, "0:") {
			filled = append(filled, name)
		}
	}
	sort.Strings(filled)
	require.Equal(t, sortedKeys(seeded), filled)
}

// TestBackupRoleReadsAndWritesNothing backs up as a login of the read-only
// backup role (00018), which is refused every write.
func TestBackupRoleReadsAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	src, adminURL := testdb.New(t)
	fill(t, src)
	u, err := url.Parse(adminURL)
	require.NoError(t, err)
	adminPassword, _ := u.User.Password()
	sum := sha256.Sum256([]byte("bmcis-test-backup\x00" + adminPassword))
	password := hex.EncodeToString(sum[:16])
	// Roles are per server: every test database shares this one.
	require.NoError(t, migrations.EnsureBackupLogin(ctx, src, "bmcis_test_backup", password))
	u.User = url.UserPassword("bmcis_test_backup", password)
	ro, err := pg.ConnectRaw(ctx, u.String())
	require.NoError(t, err)
	defer ro.Close()

	var buf bytes.Buffer
	_, err = Write(ctx, &buf, one(ro), "test")
	require.NoError(t, err)
	dst, _ := testdb.New(t)
	_, err = Restore(ctx, opener(buf.Bytes()), one(dst))
	require.NoError(t, err)
	require.Equal(t, contents(t, src), contents(t, dst))

	for _, stmt := range []string{
		"DELETE FROM search.documents", "INSERT INTO auth.rate_limit_tiers VALUES ('year')",
		"UPDATE vendorgraph.entities SET name = 'x'", "SELECT nextval('search.search_generation')",
		"CREATE TABLE search.intruder (i int)",
	} {
		_, err := ro.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
}

// TestSplitDatabases backs up services on two databases (a snapshot each)
// and restores them onto two others.
func TestSplitDatabases(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	a, _ := testdb.New(t)
	b, _ := testdb.New(t)
	fill(t, a)
	// auth's data lives on b; a's auth schema is unused there.
	_, err := b.Exec(ctx, `INSERT INTO api_keys (key_id, secret_hash, name, owner) VALUES ('split', sha256('s'), 'split', 'x')`)
	require.NoError(t, err)
	split := func(x, y *pgxpool.Pool) []Database {
		return []Database{{Pool: x, Schemas: []string{"search", "vendorgraph"}}, {Pool: y, Schemas: []string{"auth"}}}
	}
	var buf bytes.Buffer
	h, err := Write(ctx, &buf, split(a, b), "test")
	require.NoError(t, err)
	require.Len(t, h.Databases, 2)

	c, _ := testdb.New(t)
	d, _ := testdb.New(t)
	// A refusal on one database writes nothing on the other.
	_, err = d.Exec(ctx, `INSERT INTO api_keys (key_id, secret_hash, name, owner) VALUES ('in-the-way', sha256('w'), 'w', 'x')`)
	require.NoError(t, err)
	freshC := contents(t, c)
	_, err = Restore(ctx, opener(buf.Bytes()), split(c, d))
	require.ErrorIs(t, err, ErrNotEmpty)
	require.Equal(t, freshC, contents(t, c))
	_, err = d.Exec(ctx, `DELETE FROM api_keys`)
	require.NoError(t, err)

	_, err = Restore(ctx, opener(buf.Bytes()), split(c, d))
	require.NoError(t, err)
	ca, cc := contents(t, a), contents(t, c)
	cb, cd := contents(t, b), contents(t, d)
	for k := range ca {
		if k == "indexes" {
			require.Equal(t, ca[k], cc[k])
			continue
		}
		if schemaOf(k) == "auth" {
			require.Equal(t, cb[k], cd[k], k)
		} else {
			require.Equal(t, ca[k], cc[k], k)
		}
	}
}

// schemaOf is the schema of a contents key ("search.chunks", "sequence auth.x").
func schemaOf(key string) string {
	schema, _, _ := strings.Cut(strings.TrimPrefix(key, "sequence "), ".")
	return schema
}

// TestTableAddedLaterIsIncluded adds a table the package has never heard
// of (as a later migration would: an identity key, a generated column, a
// reference to another table) on both sides: it is found, ordered after
// the table it references, and restored, the generated column computed
// again and the identity going on from the restored value.
func TestTableAddedLaterIsIncluded(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	src, _ := testdb.New(t)
	dst, _ := testdb.New(t)
	const ddl = `CREATE TABLE auth.zz_audit_probe (
		id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		key_id text NOT NULL REFERENCES auth.api_keys (key_id),
		note text NOT NULL,
		shout text GENERATED ALWAYS AS (upper(note)) STORED)`
	for _, p := range []*pgxpool.Pool{src, dst} {
		_, err := p.Exec(ctx, ddl)
		require.NoError(t, err)
	}
	fill(t, src)
	_, err := src.Exec(ctx, `INSERT INTO auth.zz_audit_probe (key_id, note) VALUES ('k1', E'created\tkey'), ('k2', 'rotated')`)
	require.NoError(t, err)
	var buf bytes.Buffer
	h, err := Write(ctx, &buf, one(src), "test")
	require.NoError(t, err)
	pos := map[string]int{}
	for i, tb := range h.Tables {
		pos[tb.QualifiedName()] = i
	}
	require.Contains(t, pos, "auth.zz_audit_probe")
	require.Greater(t, pos["auth.zz_audit_probe"], pos["auth.api_keys"])
	require.Equal(t, []string{"id", "key_id", "note"}, h.Tables[pos["auth.zz_audit_probe"]].Columns, "the generated column is computed, not copied")

	_, err = Restore(ctx, opener(buf.Bytes()), one(dst))
	require.NoError(t, err)
	require.Equal(t, contents(t, src), contents(t, dst))
	var id int64
	require.NoError(t, dst.QueryRow(ctx, `INSERT INTO auth.zz_audit_probe (key_id, note) VALUES ('k1', 'after') RETURNING id`).Scan(&id))
	require.Equal(t, int64(3), id)
}

// TestUnmigratedDatabaseIsNamedAsSuch: a database migrate up never ran on
// (no goose version table) is at schema version 0, so backup and restore say
// what to do about it rather than pass on PostgreSQL's missing relation.
func TestUnmigratedDatabaseIsNamedAsSuch(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	src, _ := testdb.New(t)
	fill(t, src)
	var buf bytes.Buffer
	_, err := Write(ctx, &buf, one(src), "test")
	require.NoError(t, err)

	bare, err := pgxpool.New(ctx, testdb.NewEmpty(t))
	require.NoError(t, err)
	t.Cleanup(bare.Close)

	for _, tc := range []struct {
		name string
		run  func() error
		want error
		msg  string
	}{
		{"restore into it", func() error { _, err := Restore(ctx, opener(buf.Bytes()), one(bare)); return err },
			ErrTargetBehind, "is at schema version 0, the backup at"},
		{"back it up", func() error { _, err := Write(ctx, io.Discard, one(bare), "test"); return err },
			nil, "the database is not migrated (schema version 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.ErrorContains(t, err, tc.msg)
			require.ErrorContains(t, err, "migrate")
			require.NotContains(t, err.Error(), "goose_db_version")
		})
	}
}
