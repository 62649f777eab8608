package migrations_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/bmcis/knowledge/migrations"
	"github.com/bmcis/knowledge/platform/config"
	"github.com/bmcis/knowledge/platform/pg"
	"github.com/bmcis/knowledge/platform/testdb"
)

// discard takes the logs of ConnectService where a test does not read them.
var discard = slog.New(slog.DiscardHandler)

var privileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"}

// TestServiceRolesOwnOnlyTheirSchema connects as each service's login role
// and shows it is no superuser, is distinct from the others, reads and
// writes its own tables, and is refused on every other service's tables
// and schemas (no crossings: data crosses over gRPC,
// docs/DATA-OWNERSHIP.md), on creating tables anywhere, and on running
// programs on the server.
func TestServiceRolesOwnOnlyTheirSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)

	rows, err := admin.Query(ctx, `SELECT n.nspname, n.nspname || '.' || c.relname, c.oid FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('search', 'vendorgraph', 'auth') ORDER BY 2`)
	require.NoError(t, err)
	type table struct {
		Schema, Name string
		OID          uint32
	}
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(tables), 18)
	for _, tb := range tables {
		// Each table is its own service's group's, never another's; one
		// the service only holds grants on (migrations.NotOwned) is the
		// migration role's (no group's).
		var owner string
		require.NoError(t, admin.QueryRow(ctx, "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = $1", tb.OID).Scan(&owner))
		if _, granted := migrations.NotOwned[tb.Name]; granted {
			for _, svc := range migrations.Services {
				require.NotEqual(t, svc.GroupRole(), owner, tb.Name)
			}
			continue
		}
		require.Equal(t, "bmcis_"+tb.Schema, owner, tb.Name)
	}

	// A service refuses the admin's (a superuser's) credential:
	// TestPrivilegedLoginNeedsItsOwnSwitch.

	users := map[string]bool{}
	for _, svc := range migrations.Services {
		t.Run(string(svc), func(t *testing.T) {
			svcURL := testdb.ServiceURL(t, dbURL, string(svc))
			conn, err := pgx.Connect(ctx, svcURL)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			// The service's own start-up checks pass: the schema version,
			// and a role that reaches no further than its schema.
			pool, err := migrations.ConnectService(ctx, pg.Config{URL: svcURL, MaxConns: 2, ConnectTimeout: 5 * time.Second}, svc, discard)
			require.NoError(t, err)
			pool.Close()

			var user string
			var super, createRole, createDB bool
			require.NoError(t, conn.QueryRow(ctx, `SELECT current_user, rolsuper, rolcreaterole, rolcreatedb
				FROM pg_roles WHERE rolname = current_user`).Scan(&user, &super, &createRole, &createDB))
			require.False(t, super || createRole || createDB, "%s: superuser %v, createrole %v, createdb %v", user, super, createRole, createDB)
			require.False(t, users[user], "two services share the role %s", user)
			users[user] = true
			for _, other := range migrations.Services {
				var member bool
				require.NoError(t, conn.QueryRow(ctx, "SELECT pg_has_role(current_user, $1, 'USAGE')", other.GroupRole()).Scan(&member))
				require.Equal(t, other == svc, member, "member of %s", other.GroupRole())
			}
			var path string
			require.NoError(t, conn.QueryRow(ctx, "SHOW search_path").Scan(&path))
			require.Equal(t, svc.SearchPath(), path)

			for _, tb := range tables {
				if tb.Schema == svc.Schema() {
					if _, granted := migrations.NotOwned[tb.Name]; granted {
						continue // TestServiceRolesHoldOnlyWhatTheirSQLUses
					}
					_, err := conn.Exec(ctx, "SELECT 1 FROM "+tb.Name+" LIMIT 1")
					require.NoError(t, err, "read own table %s", tb.Name)
					_, err = conn.Exec(ctx, "DELETE FROM "+tb.Name+" WHERE false")
					require.NoError(t, err, "write own table %s", tb.Name)
					continue
				}
				for _, p := range privileges {
					var has bool
					require.NoError(t, conn.QueryRow(ctx, "SELECT has_table_privilege($1::oid, $2)", tb.OID, p).Scan(&has))
					require.False(t, has, "%s %s on %s", user, p, tb.Name)
				}
				_, err := conn.Exec(ctx, "SELECT 1 FROM "+tb.Name+" LIMIT 1")
				requireRefused(t, err, "read "+tb.Name)
				_, err = conn.Exec(ctx, "DELETE FROM "+tb.Name+" WHERE false")
				requireRefused(t, err, "write "+tb.Name)
			}
			for _, other := range migrations.Services {
				var usage bool
				require.NoError(t, conn.QueryRow(ctx, "SELECT has_schema_privilege($1, 'USAGE')", other.Schema()).Scan(&usage))
				require.Equal(t, other == svc, usage, "%s USAGE on schema %s", user, other.Schema())
			}
			if svc == migrations.Search {
				// Search maintains its own tables as their owner: it drops and
				// rebuilds its vector index around a bulk load, then VACUUMs
				// (store.EmbedSession; a non-owner's VACUUM would skip them).
				for _, stmt := range []string{
					"DROP INDEX search.chunks_embedding_hnsw",
					"CREATE INDEX chunks_embedding_hnsw ON search.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
					"VACUUM (ANALYZE) search.chunks",
				} {
					_, err := conn.Exec(ctx, stmt)
					require.NoError(t, err, stmt)
				}
			}
			// No table in public or another's schema (search alone creates
			// in its own: it rebuilds its vector indexes); no COPY ... PROGRAM.
			refused := []string{"CREATE TABLE public.intruder (i int)", "COPY (SELECT 1) TO PROGRAM 'true'"}
			for _, other := range migrations.Services {
				if other != svc || svc != migrations.Search {
					refused = append(refused, "CREATE TABLE "+other.Schema()+".intruder (i int)")
				}
			}
			for _, ddl := range refused {
				_, err := conn.Exec(ctx, ddl)
				requireRefused(t, err, ddl)
			}
		})
	}
}

// TestServiceRolesHoldOnlyWhatTheirSQLUses connects as each service's
// login role and checks every table of its schema it does not own
// (migrations.NotOwned): it holds exactly the privileges listed, UPDATE of
// the listed columns only, and what an owner could do (drop, truncate,
// alter, delete where the service never deletes, rewrite a key's digest
// or groups) is refused. A table a later migration adds to auth's or
// vendorgraph's schema grants nothing until the migration says what.
func TestServiceRolesHoldOnlyWhatTheirSQLUses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	conns := map[migrations.Service]*pgx.Conn{}
	for _, svc := range migrations.Services {
		conn, err := pgx.Connect(ctx, testdb.ServiceURL(t, dbURL, string(svc)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		conns[svc] = conn
	}
	serviceOf := func(t *testing.T, table string) *pgx.Conn {
		schema, _, _ := strings.Cut(table, ".")
		svc, err := migrations.ParseService(schema)
		require.NoError(t, err)
		return conns[svc]
	}

	for table, grant := range migrations.NotOwned {
		t.Run(table, func(t *testing.T) {
			conn := serviceOf(t, table)
			for _, p := range privileges {
				var has bool
				require.NoError(t, conn.QueryRow(ctx, "SELECT has_table_privilege($1::regclass, $2)", table, p).Scan(&has))
				require.Equal(t, slices.Contains(grant.Privileges, p), has, "%s on %s", p, table)
			}
			if slices.Contains(grant.Privileges, "UPDATE") {
				return
			}
			rows, err := conn.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass
				AND attnum > 0 AND NOT attisdropped AND has_column_privilege(attrelid, attnum, 'UPDATE') ORDER BY attname`, table)
			require.NoError(t, err)
			updatable, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.ElementsMatch(t, grant.UpdateColumns, updatable, "columns of %s the service may update", table)
		})
	}

	refused := map[migrations.Service][]string{
		migrations.Auth: {
			"DELETE FROM api_keys WHERE false",
			"TRUNCATE api_key_limits",
			"DROP TABLE rate_limit_tiers",
			"ALTER TABLE api_keys ADD COLUMN intruder int",
			"ALTER TABLE api_keys DISABLE TRIGGER ALL",
			"UPDATE api_keys SET secret_hash = secret_hash WHERE false",
			"UPDATE api_keys SET groups = '{admins}' WHERE false",
			"UPDATE api_keys SET scope_tools = '{}' WHERE false",
			"UPDATE api_key_limits SET limit_value = 1000000 WHERE false",
			"DELETE FROM api_key_limits WHERE false",
			"INSERT INTO rate_limit_tiers (name) VALUES ('week')",
		},
		migrations.VendorGraph: {
			"DELETE FROM entities WHERE false",
			"DELETE FROM relationships WHERE false",
			"TRUNCATE vendor_aliases",
			"DROP TABLE relationships",
			"ALTER TABLE entities ADD COLUMN intruder int",
			"UPDATE vendor_aliases SET alias = alias WHERE false",
		},
	}
	allowed := map[migrations.Service][]string{
		// keys.Store: rotation locks the old key, revocation and last use.
		migrations.Auth: {
			"SELECT key_id FROM api_keys WHERE false FOR UPDATE",
			"UPDATE api_keys SET revoked_at = now(), expires_at = now(), last_used_at = now() WHERE false",
		},
		migrations.VendorGraph: {"SELECT vendorgraph.analyze_graph()"},
	}
	for svc, stmts := range refused {
		for _, stmt := range stmts {
			_, err := conns[svc].Exec(ctx, stmt)
			requireRefused(t, err, string(svc)+": "+stmt)
		}
		for _, stmt := range allowed[svc] {
			_, err := conns[svc].Exec(ctx, stmt)
			require.NoError(t, err, "%s: %s", svc, stmt)
		}
	}

	// The graph's statistics are refreshed through the function: ANALYZE
	// runs as the tables' owner.
	_, err := admin.Exec(ctx, `INSERT INTO vendorgraph.entities (id, name, normalized_name, entity_type, confidence, record_hash, is_vendor)
		VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'acme', 'vendor', 1, '\x00', true)`)
	require.NoError(t, err)
	_, err = conns[migrations.VendorGraph].Exec(ctx, "SELECT vendorgraph.analyze_graph()")
	require.NoError(t, err)
	var tuples float64
	require.NoError(t, admin.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'vendorgraph.entities'::regclass").Scan(&tuples))
	require.Equal(t, float64(1), tuples, "analyze_graph analyzed the entities")

	// No default privileges: a table a later migration creates in auth's or
	// vendorgraph's schema is nobody's until the migration grants it.
	for _, svc := range []migrations.Service{migrations.Auth, migrations.VendorGraph} {
		table := svc.Schema() + ".later_table"
		_, err := admin.Exec(ctx, "CREATE TABLE "+table+" (i int)")
		require.NoError(t, err)
		for _, p := range privileges {
			var has bool
			require.NoError(t, conns[svc].QueryRow(ctx, "SELECT has_table_privilege($1::regclass, $2)", table, p).Scan(&has))
			require.False(t, has, "%s %s on a new table %s", svc, p, table)
		}
	}
}

func requireRefused(t *testing.T, err error, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want a refusal, got %v", what, err)
	require.Equal(t, "42501", pgErr.Code, "%s: want insufficient_privilege, got %s", what, pgErr.Message)
}

// A service connects as a superuser only with the privileged-login switch,
// which logs one warning naming the role, never the URL or its password; the
// secrets switch alone does not let it (a development machine that needs
// placeholder secrets must not thereby run a service as the superuser).
func TestPrivilegedLoginNeedsItsOwnSwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	var superuser string
	require.NoError(t, admin.QueryRow(ctx, "SELECT current_user FROM pg_roles WHERE rolname = current_user AND rolsuper").Scan(&superuser))
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	password, _ := u.User.Password()
	require.NotEmpty(t, password)

	for _, tc := range []struct {
		name                string
		secrets, privileged bool
		connects            bool
	}{
		{"neither", false, false, false},
		{"secrets only", true, false, false},
		{"privileged only", false, true, true},
		{"both", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": dbURL, "DATABASE_CONNECT_TIMEOUT": "5s", "DATABASE_MAX_CONNS": "2"}
			if tc.secrets {
				env[config.EnvAllowInsecureSecrets] = "true"
			}
			if tc.privileged {
				env[pg.EnvAllowPrivilegedLogin] = "true"
			}
			r := config.FromMap(env)
			c := pg.LoadConfig(r)
			require.NoError(t, r.Err())
			require.Equal(t, tc.privileged, c.AllowPrivileged)

			var logs bytes.Buffer
			pool, err := migrations.ConnectService(ctx, c, migrations.Search, slog.New(slog.NewTextHandler(&logs, nil)))
			require.NotContains(t, logs.String(), password)
			if !tc.connects {
				require.ErrorContains(t, err, "DATABASE_URL connects as "+superuser+", a superuser")
				require.ErrorContains(t, err, "or set "+pg.EnvAllowPrivilegedLogin+"=true on a development machine")
				// An operator who relied on the secrets switch is told it changed.
				const changed = "(" + config.EnvAllowInsecureSecrets + " no longer allows this)"
				if tc.secrets {
					require.ErrorContains(t, err, changed)
				} else {
					require.NotContains(t, err.Error(), changed)
				}
				require.NotContains(t, err.Error(), password)
				require.Empty(t, logs.String())
				return
			}
			require.NoError(t, err)
			defer pool.Close()
			var user string
			require.NoError(t, pool.QueryRow(ctx, "SELECT current_user").Scan(&user))
			require.Equal(t, superuser, user)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			require.Len(t, lines, 1, logs.String())
			require.Contains(t, lines[0], "level=WARN")
			require.Contains(t, lines[0], pg.EnvAllowPrivilegedLogin+" is set")
			require.Contains(t, lines[0], "role="+superuser)
			require.Contains(t, lines[0], "a superuser")
		})
	}
}

// A superuser login is refused before anything that needs the schema: on a
// database that is not migrated (no vector type to register) the operator
// sees the privileged-login refusal, not "run `bmcisctl migrate`".
func TestPrivilegedRefusalComesBeforeTheSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := testdb.NewEmpty(t)
	for _, tc := range []struct {
		name    string
		secrets bool
	}{
		{"neither", false},
		{"secrets only", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"DATABASE_URL": dbURL, "DATABASE_CONNECT_TIMEOUT": "5s", "DATABASE_MAX_CONNS": "2"}
			if tc.secrets {
				env[config.EnvAllowInsecureSecrets] = "true"
			}
			r := config.FromMap(env)
			c := pg.LoadConfig(r)
			require.NoError(t, r.Err())
			pool, err := migrations.ConnectService(ctx, c, migrations.Search, discard)
			require.Nil(t, pool)
			require.ErrorContains(t, err, ", a superuser")
			require.ErrorContains(t, err, "or set "+pg.EnvAllowPrivilegedLogin+"=true on a development machine")
			require.NotContains(t, err.Error(), "pgvector")
		})
	}
}

// A service refuses, at start, a login that reaches past its own schema
// without being privileged: one in another service's group as well as its
// own (the migration role is in every group), or one in none but
// another's (a URL given to the wrong service).
func TestConnectServiceRefusesAWiderRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	const login, password = "bmcis_test_two_groups", "two-groups-pw"
	_, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+login)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE ROLE "+login+" LOGIN PASSWORD '"+password+"' IN ROLE bmcis_search, bmcis_auth")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+login) })
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(login, password)
	twoGroups := u.String()

	for _, tc := range []struct {
		name    string
		url     string
		svc     migrations.Service
		refusal string
	}{
		{"in two groups", twoGroups, migrations.Search, "bmcis_test_two_groups, which is a member of bmcis_auth too"},
		{"another service's login", testdb.ServiceURL(t, dbURL, "search"), migrations.VendorGraph, "is not a member of bmcis_vendorgraph"},
		{"its own login", testdb.ServiceURL(t, dbURL, "vendorgraph"), migrations.VendorGraph, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := migrations.ConnectService(ctx, pg.Config{URL: tc.url, MaxConns: 2, ConnectTimeout: 5 * time.Second}, tc.svc, discard)
			if tc.refusal == "" {
				require.NoError(t, err)
				pool.Close()
				return
			}
			require.ErrorContains(t, err, tc.refusal)
			require.ErrorContains(t, err, "or set "+pg.EnvAllowPrivilegedLogin+"=true on a development machine")
			require.NotContains(t, err.Error(), password)
		})
	}
}

// TestSchemasMigrationKeepsData moves a populated database (every table
// in public, as before 00012) into the service schemas: the rows, the
// links between them and the sequences stay, and the services' roles
// write to them.
func TestSchemasMigrationKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	_, err := migrations.DownTo(ctx, admin, 11)
	require.NoError(t, err)
	admin.Reset() // the search_path of open connections named the dropped schemas

	_, err = admin.Exec(ctx, `
		INSERT INTO public.documents (external_id, source_file, content_hash) VALUES ('doc-1', 'a.md', '\x00');
		INSERT INTO public.chunks (document_id, chunk_index, total_chunks, text, token_count, content_hash)
			SELECT id, 0, 1, 'Acme ships widgets', 3, '\x00' FROM public.documents;
		INSERT INTO public.entities (id, name, normalized_name, entity_type, confidence, record_hash, is_vendor)
			VALUES ('00000000-0000-0000-0000-000000000001', 'Acme', 'acme', 'vendor', 1, '\x00', true);
		INSERT INTO public.entity_mentions (entity_id, chunk_id, mention_count)
			SELECT '00000000-0000-0000-0000-000000000001', id, 1 FROM public.chunks;
		INSERT INTO public.api_keys (key_id, secret_hash, name, owner) VALUES ('k1', decode(repeat('00', 32), 'hex'), 'n', 'o');`)
	require.NoError(t, err)
	_, err = migrations.Up(ctx, admin)
	require.NoError(t, err)
	admin.Reset()

	var docs, chunks, ents, names, mentions, keys int
	require.NoError(t, admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM search.documents), (SELECT count(*) FROM search.chunks),
		(SELECT count(*) FROM vendorgraph.entities), (SELECT count(*) FROM search.entity_names WHERE name = 'Acme'),
		(SELECT count(*) FROM search.entity_mentions), (SELECT count(*) FROM auth.api_keys)`).
		Scan(&docs, &chunks, &ents, &names, &mentions, &keys))
	require.Equal(t, []int{1, 1, 1, 1, 1, 1}, []int{docs, chunks, ents, names, mentions, keys},
		"search's copy of the names (00014) holds the graph's, so the mention keeps its entity")

	// The search role writes a document: the id and generation sequences
	// came along, and its mention's entity is still tied to its chunk.
	conn, err := pgx.Connect(ctx, testdb.ServiceURL(t, dbURL, string(migrations.Search)))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var id, gen int64
	require.NoError(t, conn.QueryRow(ctx, `INSERT INTO documents (external_id, source_file, content_hash)
		VALUES ('doc-2', 'b.md', '\x00') RETURNING id, generation`).Scan(&id, &gen))
	require.Greater(t, id, int64(1))
	require.Positive(t, gen)
	_, err = conn.Exec(ctx, "DELETE FROM chunks")
	require.NoError(t, err)
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM search.entity_mentions").Scan(&mentions))
	require.Zero(t, mentions, "mentions go with their chunk")
}

// bmcisctl migrate up refuses to make a service's login of the migration
// role itself, or one login for two services.
func TestEnsureServiceLoginsRefusesSharedRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testdb.New(t)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	_, err := migrations.EnsureServiceLogins(ctx, admin, "migrator", env(map[string]string{
		migrations.Search.LoginURLEnv(): "postgres://migrator:pw@127.0.0.1:5432/bmcis",
	}))
	require.ErrorContains(t, err, "BMCIS_SEARCH_DATABASE_URL connects as the migration role migrator")

	_, err = migrations.EnsureServiceLogins(ctx, admin, "migrator", env(map[string]string{
		migrations.Search.LoginURLEnv(): "postgres://shared_login:pw@127.0.0.1:5432/bmcis",
		migrations.Auth.LoginURLEnv():   "postgres://shared_login:pw@127.0.0.1:5432/bmcis",
	}))
	require.ErrorContains(t, err, "BMCIS_SEARCH_DATABASE_URL and BMCIS_AUTH_DATABASE_URL name the same role shared_login")
	require.NotContains(t, err.Error(), "pw@")
	var created bool
	require.NoError(t, admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shared_login')").Scan(&created))
	require.False(t, created, "refused before any role is touched")
}

// migrate up sets up the backup's login from BMCIS_BACKUP_DATABASE_URL: a
// member of the read-only bmcis_backup and of no service's group, refused
// when it is the migration role or a service's.
func TestEnsureBackupLoginFrom(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _ := testdb.New(t)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	done, err := migrations.EnsureBackupLoginFrom(ctx, admin, "migrator", env(nil))
	require.NoError(t, err)
	require.False(t, done, "nothing to set up without the URL")
	_, err = migrations.EnsureBackupLoginFrom(ctx, admin, "migrator", env(map[string]string{
		migrations.BackupLoginURLEnv: "postgres://migrator:pw@127.0.0.1:5432/bmcis",
	}))
	require.ErrorContains(t, err, "BMCIS_BACKUP_DATABASE_URL connects as the migration role migrator")
	_, err = migrations.EnsureBackupLoginFrom(ctx, admin, "migrator", env(map[string]string{
		migrations.BackupLoginURLEnv:  "postgres://shared_backup:pw@127.0.0.1:5432/bmcis",
		migrations.Auth.LoginURLEnv(): "postgres://shared_backup:pw@127.0.0.1:5432/bmcis",
	}))
	require.ErrorContains(t, err, "name the same role shared_backup")
	require.NotContains(t, err.Error(), "pw@")

	done, err = migrations.EnsureBackupLoginFrom(ctx, admin, "migrator", env(map[string]string{
		migrations.BackupLoginURLEnv: "postgres://bmcis_test_backup_login:secret-pw@127.0.0.1:5432/bmcis",
	}))
	require.NoError(t, err)
	require.True(t, done)
	for group, want := range map[string]bool{migrations.BackupRole: true, "bmcis_search": false, "bmcis_vendorgraph": false, "bmcis_auth": false} {
		var member bool
		require.NoError(t, admin.QueryRow(ctx, "SELECT pg_has_role('bmcis_test_backup_login', $1, 'MEMBER')", group).Scan(&member))
		require.Equal(t, want, member, group)
	}
}

// recordingDB records every statement a role set-up sends and whether the
// server refused it: what PostgreSQL's log could show (log_statement, or
// the statement of any error).
type recordingDB struct {
	db     migrations.Execer
	sent   []string
	failed []string
}

func (r *recordingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sent = append(r.sent, sql)
	tag, err := r.db.Exec(ctx, sql, args...)
	if err != nil {
		r.failed = append(r.failed, sql)
	}
	return tag, err
}

func (r *recordingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.sent = append(r.sent, sql)
	return r.db.QueryRow(ctx, sql, args...)
}

// A login's password never reaches the server: it is sent as a SCRAM
// verifier, and setting up an existing role makes no failing statement
// (PostgreSQL logs those by default, statement included). The role then
// logs in with the password, over scram-sha-256, and a new password
// replaces the old one.
func TestLoginPasswordsNeverReachTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, dbURL := testdb.New(t)
	const login = "bmcis_test_password_login"
	_, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+login)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+login) })
	connect := func(password string) error {
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		u.User = url.UserPassword(login, password)
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}

	// The last holds a character Unicode 3.2 did not assign (U+1F642), so
	// SASLprep, pgx's as PostgreSQL's, takes it as it is: not in NFC (a
	// decomposed é) and with a no-break space, neither normalised.
	for i, password := range []string{"first-pw'\"x 1", "first-pw'\"x 1", "sécond-pässword-ﬁ", "the e\u0301\u00a0\U0001F642 pw"} {
		rec := &recordingDB{db: admin}
		require.NoError(t, migrations.EnsureServiceLogin(ctx, rec, migrations.Search, login, password), "run %d", i)
		require.Empty(t, rec.failed, "run %d: a refused statement is logged with its text", i)
		for _, sql := range rec.sent {
			require.NotContains(t, sql, password, "run %d", i)
			require.NotContains(t, sql, strings.ReplaceAll(password, "'", "''"), "run %d", i)
		}
		var stored string
		require.NoError(t, admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", login).Scan(&stored))
		require.True(t, strings.HasPrefix(stored, "SCRAM-SHA-256$4096:"), "run %d: stored %.20s...", i, stored)
		require.NoError(t, connect(password), "run %d: the login's password", i)
	}
	require.Error(t, connect("first-pw'\"x 1"), "the replaced password")
}
